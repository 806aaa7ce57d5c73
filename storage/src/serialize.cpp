// SPDX-License-Identifier: MIT
#include "serialize.h"

namespace ampscope::storage::ser {

using nlohmann::json;

namespace {

json criteria(const Criteria& c) {
    json heads = json::array();
    for (const auto& h : c.heads) heads.push_back({{"name", h.name}, {"begin", h.begin}, {"end", h.end}, {"atol", h.atol}, {"rtol", h.rtol}});
    return {{"atol", c.atol}, {"rtol", c.rtol}, {"heads", heads}, {"tie_tolerance", c.tie_tolerance},
            {"tie_rule", to_string(c.tie_rule)}, {"max_flips", c.max_flips},
            {"quality_metric", to_string(c.quality_metric)}, {"quality_metric_set", c.quality_metric_set},
            {"quality_threshold", c.quality_threshold}, {"quality_threshold_set", c.quality_threshold_set},
            {"allow_nonfinite", c.allow_nonfinite}, {"fixed_at", c.fixed_at}};
}

Criteria read_criteria(const json& j) {
    Criteria c;
    c.atol = j.at("atol");
    c.rtol = j.at("rtol");
    for (const auto& h : j.at("heads")) c.heads.push_back({h.at("name"), h.at("begin"), h.at("end"), h.at("atol"), h.at("rtol")});
    c.tie_tolerance = j.at("tie_tolerance");
    c.tie_rule = parse_tie_rule(j.at("tie_rule").get<std::string>()).value_or(TieRule::LowestIndex);
    c.max_flips = j.at("max_flips");
    c.quality_metric = parse_quality_metric(j.at("quality_metric").get<std::string>()).value_or(QualityMetric::Accuracy);
    c.quality_metric_set = j.at("quality_metric_set");
    c.quality_threshold = j.at("quality_threshold");
    c.quality_threshold_set = j.at("quality_threshold_set");
    c.allow_nonfinite = j.at("allow_nonfinite");
    c.fixed_at = j.at("fixed_at");
    return c;
}

json backend(const BackendReport& b) {
    return {{"device", b.device}, {"kind", b.kind}, {"torch", b.torch_version}, {"cuda", b.cuda_version},
            {"cudnn", b.cudnn_version}, {"hip", b.hip_version}, {"name", b.name}, {"cc", b.compute_capability},
            {"cuda_available", b.cuda_available}, {"cuda_devices", b.cuda_device_count}, {"bf16", b.bf16_supported},
            {"fp16", b.fp16_supported}, {"threads", b.num_threads}, {"notes", b.notes}};
}

BackendReport read_backend(const json& j) {
    BackendReport b;
    b.device = j.at("device"); b.kind = j.at("kind"); b.torch_version = j.at("torch"); b.cuda_version = j.at("cuda");
    b.cudnn_version = j.at("cudnn"); b.hip_version = j.at("hip"); b.name = j.at("name"); b.compute_capability = j.at("cc");
    b.cuda_available = j.at("cuda_available"); b.cuda_device_count = j.at("cuda_devices"); b.bf16_supported = j.at("bf16");
    b.fp16_supported = j.at("fp16"); b.num_threads = j.at("threads"); b.notes = j.at("notes").get<std::vector<std::string>>();
    return b;
}

}  // namespace

json header(const RunResult& r) {
    std::vector<std::string> precisions;
    for (auto p : r.spec.precisions) precisions.push_back(to_string(p));
    json spec = {{"model", r.spec.model}, {"probes", r.spec.probes}, {"precisions", precisions},
                 {"device", r.spec.device}, {"mode", to_string(r.spec.mode)}, {"criteria", criteria(r.spec.criteria)},
                 {"keep_fp32", r.spec.keep_fp32}, {"seed", r.spec.seed}, {"batch_size", r.spec.batch_size},
                 {"inspect", r.spec.inspect}};
    json tags = json::object();
    for (const auto& [k, v] : r.probes.tags) tags[k] = v;
    return {{"spec", spec},
            {"criteria", criteria(r.criteria)},
            {"backend", backend(r.backend)},
            {"model", {{"source", r.model.source}, {"kind", r.model.kind}, {"sha256", r.model.sha256},
                       {"weights_sha256", r.model.weights_sha256}, {"mode", r.model.mode},
                       {"parameters", r.model.parameters}, {"modules", r.model.modules}}},
            {"probes", {{"source", r.probes.source}, {"sha256", r.probes.sha256}, {"count", r.probes.count},
                        {"tags", tags}, {"input_shapes", r.probes.input_shapes}, {"has_labels", r.probes.has_labels},
                        {"has_targets", r.probes.has_targets}}},
            {"warnings", r.warnings},
            {"labels", r.labels},
            {"targets", r.targets},
            {"tool_version", r.tool_version}};
}

void read_header(const json& j, RunResult& r) {
    const auto& s = j.at("spec");
    r.spec.model = s.at("model");
    r.spec.probes = s.at("probes");
    r.spec.precisions.clear();
    for (const auto& p : s.at("precisions")) r.spec.precisions.push_back(parse_precision(p.get<std::string>()).value_or(Precision::Fp16));
    r.spec.device = s.at("device");
    r.spec.mode = s.at("mode") == "train" ? Mode::Train : Mode::Eval;
    r.spec.criteria = read_criteria(s.at("criteria"));
    r.spec.keep_fp32 = s.at("keep_fp32").get<std::vector<std::string>>();
    r.spec.seed = s.at("seed");
    r.spec.batch_size = s.at("batch_size");
    r.spec.inspect = s.at("inspect");
    r.criteria = read_criteria(j.at("criteria"));
    r.backend = read_backend(j.at("backend"));
    const auto& m = j.at("model");
    r.model.source = m.at("source"); r.model.kind = m.at("kind"); r.model.sha256 = m.at("sha256");
    r.model.weights_sha256 = m.at("weights_sha256"); r.model.mode = m.at("mode"); r.model.parameters = m.at("parameters");
    r.model.modules = m.at("modules").get<std::vector<std::string>>();
    const auto& p = j.at("probes");
    r.probes.source = p.at("source"); r.probes.sha256 = p.at("sha256"); r.probes.count = p.at("count");
    r.probes.tags = p.at("tags").get<std::map<std::string, int>>();
    r.probes.input_shapes = p.at("input_shapes").get<std::vector<std::vector<int64_t>>>();
    r.probes.has_labels = p.at("has_labels"); r.probes.has_targets = p.at("has_targets");
    r.warnings = j.at("warnings").get<std::vector<std::string>>();
    r.labels = j.at("labels").get<std::vector<int64_t>>();
    r.targets = j.at("targets").get<std::vector<float>>();
    r.tool_version = j.at("tool_version");
}

json origin(const std::optional<Origin>& o) {
    if (!o) return nullptr;
    json j = {{"stage", o->stage}, {"module", o->module}, {"op", o->op}, {"index", o->index}, {"samples", o->samples}};
    if (!o->grad_fn.empty()) j["grad_fn"] = o->grad_fn;
    return j;
}

std::optional<Origin> read_origin(const json& j) {
    if (j.is_null()) return std::nullopt;
    return Origin{j.at("stage"), j.at("module"), j.at("op"), j.at("index"), j.at("samples").get<std::vector<std::string>>(),
                  j.value("grad_fn", std::string())};
}

}  // namespace ampscope::storage::ser
