// SPDX-License-Identifier: MIT
#include "serialize.h"

#include "ampscope/engine/errors.h"
#include "ampscope/engine/vocabulary.h"
#include "ampscope/storage/errors.h"
#include "json_map.h"
#include "json_types.h"

#include <tuple>

namespace ampscope::storage::ser {

using nlohmann::json;
using nlohmann::ordered_json;

json parse_column(const std::string& text, const std::string& column) {
    try {
        return json::parse(text);
    } catch (const json::exception& e) {
        throw StoreError(column + " is not valid JSON: " + e.what());
    }
}

namespace {

/// Runs `read`; a JSON of another shape, or values criteria do not allow, is a StoreError
/// naming the column.
template <class F>
void reading(const std::string& column, const char* what, F&& read) {
    try {
        read();
    } catch (const json::exception& e) {
        throw StoreError(column + what + e.what());
    } catch (const InputError& e) {
        throw StoreError(column + what + e.what());
    }
}

ordered_json run_spec(const RunSpec& s) {
    std::vector<std::string> precisions;
    for (auto p : s.precisions) precisions.push_back(to_string(p));
    ordered_json j = {{"model", s.model},           {"probes", s.probes},
                      {"precisions", precisions},   {"device", s.device},
                      {"mode", to_string(s.mode)},  {"criteria", jmap::criteria(s.criteria)},
                      {"keep_fp32", s.keep_fp32},   {"seed", s.seed},
                      {"batch_size", s.batch_size}, {"inspect", s.inspect}};
    if (!s.keep_bf16.empty()) j["keep_bf16"] = s.keep_bf16;  // FP8 passes' BF16 list (absent: none)
    if (s.fp8_what_if) j["fp8_what_if"] = true;              // the BF16 pass's FP8 what-if (absent: off)
    if (s.fp8_all_gemms) j["fp8_all_gemms"] = true;  // the model's own products quantized too (absent: linears only)
    if (s.fp8_real_gemm != RealGemm::Auto)           // real FP8 GEMMs beside fp8 / fp8-rowwise passes (absent: auto)
        j["fp8_real_gemm"] = to_string(s.fp8_real_gemm);
    if (s.mx_scaling != MxScaling::Floor) j["mx_scaling"] = to_string(s.mx_scaling);  // MX block scales (absent: floor)
    if (!s.advised_from.empty()) j["advised_from"] = s.advised_from;  // a run verifying an advised FP32 set
    // an fp8-delayed pass: its recipe's settings (absent before they were options: TE's defaults)
    if (s.has_pass(Precision::Fp8Delayed))
        j["fp8_delayed"] = {{"amax_history", s.fp8_amax_history}, {"margin", s.fp8_margin}};
    return j;
}

RunSpec read_run_spec(const json& s, const std::string& column) {
    RunSpec r;
    r.model = s.at("model");
    r.probes = s.at("probes");
    r.precisions.clear();  // not RunSpec's default: exactly the precisions run
    for (const auto& p : s.at("precisions")) {
        const auto parsed = parse_precision(p.get<std::string>());
        if (!parsed)
            throw json::type_error::create(302, "unknown precision \"" + p.get<std::string>() + "\" in spec.precisions",
                                           &p);
        r.precisions.push_back(*parsed);
    }
    r.device = s.at("device");
    r.mode = s.at("mode") == "train" ? Mode::Train : Mode::Eval;
    r.criteria = jmap::read_criteria(s.at("criteria"), column);
    r.keep_fp32 = s.at("keep_fp32").get<std::vector<std::string>>();
    if (const auto k = s.find("keep_bf16"); k != s.end()) r.keep_bf16 = k->get<std::vector<std::string>>();
    r.fp8_what_if = s.value("fp8_what_if", false);
    r.fp8_all_gemms = s.value("fp8_all_gemms", false);
    if (const auto g = s.find("fp8_real_gemm"); g != s.end())
        r.fp8_real_gemm = parse_real_gemm(g->is_string() ? g->get<std::string>() : g->dump(), "spec.fp8_real_gemm");
    if (const auto m = s.find("mx_scaling"); m != s.end())
        r.mx_scaling = parse_mx_scaling(m->is_string() ? m->get<std::string>() : m->dump(), "spec.mx_scaling");
    r.seed = s.at("seed");
    r.batch_size = s.at("batch_size");
    r.inspect = s.at("inspect");
    r.advised_from = s.value("advised_from", "");
    if (const auto d = s.find("fp8_delayed"); d != s.end())
        std::tie(r.fp8_amax_history, r.fp8_margin) = jtypes::fp8_delayed_settings(*d);
    return r;
}

/// What the header of every kind of run holds, then the keys of its kind (`own`).
ordered_json envelope(const char* kind, ordered_json spec, const BackendReport& backend, const ModelInfo& m,
                      const std::vector<std::string>& warnings, const std::string& tool_version,
                      const ordered_json& own) {
    ordered_json j;
    j["kind"] = kind;
    j["spec"] = std::move(spec);
    j["backend"] = ordered_json(backend);
    j["model"] = ordered_json(m);
    j["warnings"] = warnings;
    j["tool_version"] = tool_version;
    for (auto it = own.begin(); it != own.end(); ++it) j[it.key()] = it.value();
    return j;
}

}  // namespace

ordered_json header(const RunResult& r) {
    return envelope("compare", run_spec(r.spec), r.backend, r.model, r.warnings, r.tool_version,
                    {{"criteria", jmap::criteria(r.criteria)},
                     {"probes", ordered_json(r.probes)},
                     {"labels", r.labels},
                     {"targets", r.targets}});
}

void read_header(const std::string& text, RunResult& r, const std::string& column) {
    const auto j = parse_column(text, column);
    reading(column, " is malformed: ", [&] {
        r.spec = read_run_spec(j.at("spec"), column);
        r.criteria = jmap::read_criteria(j.at("criteria"), column);
        r.backend = j.at("backend").get<BackendReport>();
        r.model = j.at("model").get<ModelInfo>();
        r.probes = j.at("probes").get<ProbeInfo>();
        r.warnings = j.at("warnings").get<std::vector<std::string>>();
        r.labels = j.at("labels").get<std::vector<int64_t>>();
        r.targets = j.at("targets").get<std::vector<float>>();
        r.tool_version = j.at("tool_version");
    });
}

// ---- training runs --------------------------------------------------------------------------

namespace {

/// The header of builds before this layout: the training JSON without its steps (every key
/// read with a default: what they wrote varied).
void read_legacy_train_header(const json& h, TrainResult& t) {
    t.model = jmap::read_model_identity(h.value("model", json::object()));
    t.spec.model = t.model.source;
    t.spec.data = h.value("data", "");
    t.spec.precision =
        h.contains("precision") ? jtypes::training_precision(h.at("precision"), "precision") : Precision::Fp16;
    t.spec.autocast = h.value("autocast", true);
    t.spec.scaler = h.value("scaler", json::object()).get<ScalerOptions>();
    const auto opt = h.value("optimizer", json::object());
    // an empty or missing name (some early builds): sgd, the default the training dialog showed for it
    const std::string optimizer = opt.value("name", "");
    t.spec.optimizer = optimizer.empty() ? OptimizerKind::Sgd : parse_optimizer_kind(optimizer, "optimizer.name");
    t.spec.lr = opt.value("lr", 0.0);
    t.spec.momentum = opt.value("momentum", 0.0);
    t.spec.weight_decay = opt.value("weight_decay", 0.0);
    t.spec.lr_schedule = parse_lr_schedule(opt.value("schedule", "constant"), "optimizer.schedule");
    t.spec.lr_per_iteration = opt.value("schedule_follows", "effective_updates") == "iterations";
    t.spec.loss = parse_loss_kind(h.value("loss", ""), "loss");
    t.spec.batch_size = h.value("batch_size", 0);
    t.spec.accumulate = h.value("accumulate", 1);
    t.spec.clip_grad_norm = h.value("clip_grad_norm", 0.0);
    t.spec.keep_fp32 = h.value("keep_fp32", std::vector<std::string>{});
    if (h.contains("backend")) t.backend = h.at("backend").get<BackendReport>();
    const auto resumed = h.value("resumed_from", json());
    t.resumed_from = resumed.is_null() ? "" : resumed.get<std::string>();
    t.policy_changed = h.value("policy_changed", false);
    t.warnings = h.value("warnings", std::vector<std::string>{});
    t.started_at = h.value("started_at", "");
}

}  // namespace

ordered_json train_header(const TrainResult& t) {
    return envelope(
        "train", ordered_json(t.spec), t.backend, t.model, t.warnings, version(),
        {{"started_at", t.started_at}, {"resumed_from", t.resumed_from}, {"policy_changed", t.policy_changed}});
}

void read_train_header(const std::string& text, TrainResult& t, const std::string& column) {
    const auto h = parse_column(text, column);
    reading(column, " is not the JSON of a training run: ", [&] {
        if (!h.is_object() || !h.contains("spec")) return read_legacy_train_header(h, t);
        t.spec = h.at("spec").get<TrainSpec>();
        t.backend = h.at("backend").get<BackendReport>();
        t.model = h.at("model").get<ModelInfo>();
        t.warnings = h.at("warnings").get<std::vector<std::string>>();
        t.started_at = h.at("started_at");
        t.resumed_from = h.at("resumed_from");
        t.policy_changed = h.at("policy_changed");
    });
}

// ---- benchmarks -----------------------------------------------------------------------------

BenchResult read_bench(const std::string& text, const std::string& column) {
    const auto j = parse_column(text, column);
    BenchResult b;
    reading(column, " is malformed: ", [&] {
        b.model = jmap::read_model_identity(j.value("model", json::object()));
        const auto p = j.value("probes", json::object());
        b.probes.source = p.value("source", "");
        b.probes.sha256 = p.value("sha256", "");
        if (j.contains("backend")) b.backend = j.at("backend").get<BackendReport>();
        b.batch = j.value("batch", 0);
        b.train = j.value("what", "forward") == "training step";
        b.timer = j.value("timer", "");
        b.memory = j.value("memory", "");
        b.keep_fp32 = j.value("keep_fp32", std::vector<std::string>{});
        for (const auto& f : j.at("figures")) {
            BenchFigure x;
            const auto named = parse_precision(f.value("precision", ""));
            if (!named)  // never read as fp32: a second FP32 figure
                throw json::type_error::create(302, "figures[].precision is none of fp32, fp16 and bf16", &f);
            x.precision = *named;
            if (is_fp8(x.precision))  // bench times fp16 and bf16 against fp32 only
                throw json::type_error::create(302,
                                               "precision \"" + to_string(x.precision) +
                                                   "\" in figures[].precision; a benchmark times fp32, fp16 and bf16",
                                               &f.at("precision"));
            x.median_ms = f.value("median_ms", 0.0);
            x.p10_ms = f.value("p10_ms", 0.0);
            x.p90_ms = f.value("p90_ms", 0.0);
            x.peak_bytes = f.value("peak_bytes", int64_t(0));
            x.speedup = f.value("speedup", 1.0);
            x.memory_ratio = f.value("memory_ratio", 1.0);
            b.figures.push_back(x);
        }
    });
    return b;
}

}  // namespace ampscope::storage::ser
