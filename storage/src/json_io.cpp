// SPDX-License-Identifier: MIT
#include "ampscope/storage/json_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "ampscope/engine/errors.h"

namespace ampscope::json {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

/// JSON has no NaN/Inf: non-finite numbers become strings "nan", "inf", "-inf".
ordered_json num(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return v;
}

ordered_json criteria_json(const Criteria& c) {
    ordered_json j;
    j["atol"] = c.atol;
    j["rtol"] = c.rtol;
    j["heads"] = ordered_json::array();
    for (const auto& h : c.heads)
        j["heads"].push_back({{"name", h.name}, {"begin", h.begin}, {"end", h.end}, {"atol", h.atol}, {"rtol", h.rtol}});
    j["tie_tolerance"] = c.tie_tolerance;
    j["tie_rule"] = to_string(c.tie_rule);
    j["max_flips"] = c.max_flips;
    j["quality_metric"] = to_string(c.quality_metric);
    j["quality_threshold"] = c.quality_threshold;
    j["allow_nonfinite"] = c.allow_nonfinite;
    if (!c.fixed_at.empty()) j["fixed_at"] = c.fixed_at;
    return j;
}

ordered_json stats_json(const TensorStats& s) {
    return {{"count", s.count}, {"nan", s.nan}, {"posinf", s.posinf}, {"neginf", s.neginf}, {"zeros", s.zeros},
            {"min", num(s.min)}, {"max", num(s.max)}, {"absmax", num(s.absmax)},
            {"min_nonzero_abs", num(s.min_nonzero_abs)}, {"mean", num(s.mean)}, {"rms", num(s.rms)},
            {"fp16_overflow", s.fp16_overflow}, {"fp16_subnormal", s.fp16_subnormal},
            {"fp16_underflow", s.fp16_underflow}, {"bf16_overflow", s.bf16_overflow},
            {"bf16_subnormal", s.bf16_subnormal}, {"bf16_underflow", s.bf16_underflow}};
}

ordered_json origin_json(const std::optional<Origin>& o) {
    if (!o) return nullptr;
    json j = {{"stage", o->stage}, {"module", o->module}, {"op", o->op}, {"index", o->index}, {"samples", o->samples}};
    if (!o->grad_fn.empty()) j["grad_fn"] = o->grad_fn;
    return j;
}

ordered_json backend_json(const BackendReport& b) {
    return {{"device", b.device}, {"kind", b.kind}, {"torch", b.torch_version}, {"name", b.name},
            {"cuda", b.cuda_version}, {"cudnn", b.cudnn_version}, {"hip", b.hip_version},
            {"compute_capability", b.compute_capability}, {"cuda_available", b.cuda_available},
            {"cuda_device_count", b.cuda_device_count}, {"bf16_supported", b.bf16_supported},
            {"fp16_supported", b.fp16_supported}, {"num_threads", b.num_threads}, {"notes", b.notes}};
}

template <class T>
T get(const json& j, const char* key, const std::string& file) {
    try {
        return j.at(key).get<T>();
    } catch (const json::exception&) {
        std::string want = std::is_same_v<T, bool> ? "true or false"
                           : std::is_same_v<T, std::string> ? "a string"
                           : std::is_integral_v<T> ? "an integer" : "a number";
        throw InputError(file, key, "expected " + want + ", found " + std::string(j.at(key).type_name()));
    }
}

}  // namespace

Criteria parse_criteria(const std::string& text, const std::string& file, Criteria c) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::parse_error& e) {
        throw InputError(file, "", std::string("not valid JSON: ") + e.what());
    }
    if (!j.is_object()) throw InputError(file, "", "expected a JSON object of criteria");
    static const std::vector<std::string> keys = {"atol", "rtol", "heads", "tie_tolerance", "tie_rule", "max_flips",
                                                  "quality_metric", "quality_threshold", "allow_nonfinite", "fixed_at"};
    for (auto it = j.begin(); it != j.end(); ++it)
        if (std::find(keys.begin(), keys.end(), it.key()) == keys.end())
            throw InputError(file, it.key(), "unknown key; expected one of atol, rtol, heads, tie_tolerance, tie_rule, "
                                             "max_flips, quality_metric, quality_threshold, allow_nonfinite");
    if (j.contains("atol")) c.atol = get<double>(j, "atol", file);
    if (j.contains("rtol")) c.rtol = get<double>(j, "rtol", file);
    if (j.contains("tie_tolerance")) c.tie_tolerance = get<double>(j, "tie_tolerance", file);
    if (j.contains("max_flips")) {
        if (!j["max_flips"].is_number_integer()) throw InputError(file, "max_flips", "expected an integer >= 0");
        c.max_flips = j["max_flips"].get<int>();
    }
    if (j.contains("quality_threshold")) {
        c.quality_threshold = get<double>(j, "quality_threshold", file);
        c.quality_threshold_set = true;
    }
    if (j.contains("allow_nonfinite")) c.allow_nonfinite = get<bool>(j, "allow_nonfinite", file);
    if (j.contains("tie_rule")) {
        auto r = parse_tie_rule(get<std::string>(j, "tie_rule", file));
        if (!r) throw InputError(file, "tie_rule", "expected \"lowest-index\" or \"abstain\"");
        c.tie_rule = *r;
    }
    if (j.contains("quality_metric")) {
        auto m = parse_quality_metric(get<std::string>(j, "quality_metric", file));
        if (!m) throw InputError(file, "quality_metric", "expected \"accuracy\", \"mse\" or \"max_abs_error\"");
        c.quality_metric = *m;
        c.quality_metric_set = true;
    }
    if (j.contains("heads")) {
        if (!j["heads"].is_array()) throw InputError(file, "heads", "expected an array of {name, begin, end, atol, rtol}");
        c.heads.clear();
        for (size_t i = 0; i < j["heads"].size(); ++i) {
            const auto& h = j["heads"][i];
            const std::string f = "heads[" + std::to_string(i) + "]";
            if (!h.is_object() || !h.contains("begin") || !h.contains("end") || !h["begin"].is_number_integer() ||
                !h["end"].is_number_integer())
                throw InputError(file, f, "expected an object with integer begin and end");
            HeadTolerance t;
            t.name = h.value("name", f);
            t.begin = h["begin"].get<int>();
            t.end = h["end"].get<int>();
            t.atol = h.contains("atol") ? get<double>(h, "atol", file) : c.atol;
            t.rtol = h.contains("rtol") ? get<double>(h, "rtol", file) : c.rtol;
            c.heads.push_back(t);
        }
    }
    return c;
}

std::string criteria_to_json(const Criteria& c) { return criteria_json(c).dump(2); }

std::string train_to_json(const TrainResult& r, int indent) {
    ordered_json j;
    j["run_id"] = r.run_id;
    j["precision"] = to_string(r.spec.precision);
    j["autocast"] = r.spec.autocast;
    j["scaler"] = {{"enabled", r.spec.scaler.enabled}, {"init_scale", r.spec.scaler.init_scale},
                   {"growth_factor", r.spec.scaler.growth_factor}, {"backoff_factor", r.spec.scaler.backoff_factor},
                   {"growth_interval", r.spec.scaler.growth_interval}};
    j["model"] = {{"source", r.model.source}, {"sha256", r.model.sha256}, {"weights_sha256", r.model.weights_sha256}};
    j["data"] = r.spec.data;
    j["optimizer"] = {{"name", r.spec.optimizer}, {"lr", r.spec.lr}, {"momentum", r.spec.momentum},
                      {"weight_decay", r.spec.weight_decay}, {"schedule", r.spec.lr_schedule},
                      {"schedule_follows", r.spec.lr_per_iteration ? "iterations" : "effective_updates"}};
    j["loss"] = r.spec.loss;
    j["batch_size"] = r.spec.batch_size;
    j["accumulate"] = r.spec.accumulate;
    j["clip_grad_norm"] = r.spec.clip_grad_norm;
    j["keep_fp32"] = r.spec.keep_fp32;
    j["backend"] = backend_json(r.backend);
    j["resumed_from"] = r.resumed_from.empty() ? ordered_json(nullptr) : ordered_json(r.resumed_from);
    j["policy_changed"] = r.policy_changed;
    j["steps"] = ordered_json::array();
    for (const auto& st : r.steps)
        j["steps"].push_back({{"step", st.step}, {"loss_ref", num(st.loss_ref)}, {"loss_amp", num(st.loss_amp)},
                              {"scale", num(st.scale)}, {"found_inf", st.found_inf}, {"skipped", st.skipped},
                              {"effective_updates", st.effective_updates}, {"grad_norm", num(st.grad_norm)},
                              {"lr", num(st.lr)}, {"divergence", num(st.divergence)},
                              {"grad_underflow", st.grad_underflow >= 0 ? ordered_json(st.grad_underflow) : ordered_json(nullptr)},
                              {"nonfinite_stage", st.nonfinite_stage.empty() ? ordered_json(nullptr) : ordered_json(st.nonfinite_stage)},
                              {"origin", origin_json(st.origin)}});
    j["summary"] = {{"iterations", r.iterations}, {"effective_updates", r.effective_updates}, {"skipped", r.skipped},
                    {"final_scale", num(r.final_scale)}};
    j["checkpoints"] = r.checkpoints;
    j["warnings"] = r.warnings;
    j["started_at"] = r.started_at;
    j["finished_at"] = r.finished_at;
    return j.dump(indent);
}

std::string bench_to_json(const BenchResult& r, const std::string& validation_run, bool validated, int indent) {
    ordered_json j;
    j["validated"] = validated;
    j["validation_run"] = validation_run.empty() ? ordered_json(nullptr) : ordered_json(validation_run);
    j["model"] = {{"source", r.model.source}, {"sha256", r.model.sha256}, {"weights_sha256", r.model.weights_sha256}};
    j["probes"] = {{"source", r.probes.source}, {"sha256", r.probes.sha256}};
    j["backend"] = backend_json(r.backend);
    j["batch"] = r.batch;
    j["what"] = r.train ? "training step" : "forward";
    j["timer"] = r.timer;
    j["memory"] = r.memory;
    j["figures"] = ordered_json::array();
    for (const auto& f : r.figures)
        j["figures"].push_back({{"precision", to_string(f.precision)}, {"median_ms", f.median_ms}, {"p10_ms", f.p10_ms},
                                {"p90_ms", f.p90_ms}, {"peak_bytes", f.peak_bytes}, {"speedup", f.speedup},
                                {"memory_ratio", f.memory_ratio}});
    return j.dump(indent);
}

std::string ops_to_json(const OpsReport& r, int indent) {
    ordered_json j;
    j["model"] = r.model;
    j["precision"] = to_string(r.precision);
    j["backend"] = backend_json(r.backend);
    j["ops"] = ordered_json::array();
    for (const auto& o : r.ops)
        j["ops"].push_back({{"op", o.op}, {"calls", o.calls}, {"modules", o.modules}, {"input_dtypes", o.input_dtypes},
                            {"amp_output_dtype", o.amp_output_dtype}, {"autocast_fp32", o.autocast_fp32},
                            {"kernel_ok", o.kernel_ok}, {"error", o.error}});
    return j.dump(indent);
}

std::string backend_to_json(const BackendReport& b, int indent) { return backend_json(b).dump(indent); }

std::string run_to_json(const RunResult& r, bool with_outputs, int indent) {
    ordered_json j;
    j["run_id"] = r.run_id;
    j["verdict"] = to_string(r.verdict);
    j["tool_version"] = r.tool_version;
    j["started_at"] = r.started_at;
    j["finished_at"] = r.finished_at;
    j["criteria"] = criteria_json(r.criteria);
    j["backend"] = backend_json(r.backend);
    j["model"] = {{"source", r.model.source}, {"kind", r.model.kind}, {"sha256", r.model.sha256},
                  {"weights_sha256", r.model.weights_sha256}, {"mode", r.model.mode},
                  {"parameters", r.model.parameters}};
    ordered_json tags = ordered_json::object();
    for (const auto& [k, v] : r.probes.tags) tags[k] = v;
    j["probes"] = {{"source", r.probes.source}, {"sha256", r.probes.sha256}, {"count", r.probes.count},
                   {"tags", tags}, {"input_shapes", r.probes.input_shapes},
                   {"has_labels", r.probes.has_labels}, {"has_targets", r.probes.has_targets}};
    j["seed"] = r.spec.seed;
    j["batch_size"] = r.spec.batch_size;
    j["warnings"] = r.warnings;
    j["passes"] = ordered_json::array();
    for (const auto& p : r.passes) {
        ordered_json pj;
        pj["precision"] = to_string(p.precision);
        pj["keep_fp32"] = p.keep_fp32;
        pj["nonfinite_samples"] = p.nonfinite_samples;
        pj["origin"] = origin_json(p.origin);
        pj["quality"] = p.quality ? num(*p.quality) : ordered_json(nullptr);
        pj["seconds"] = p.seconds;
        pj["num_outputs"] = p.num_outputs;
        pj["layers"] = ordered_json::array();
        for (const auto& l : p.layers) {
            ordered_json lj = {{"index", l.index}, {"module", l.module}, {"op", l.op}, {"dtype", l.dtype},
                               {"shape", l.shape}, {"autocast", l.autocast}, {"inputs_finite", l.inputs_finite},
                               {"origin", l.origin}};
            const ordered_json stats = stats_json(l.stats);  // keep alive while iterating
            for (auto it = stats.begin(); it != stats.end(); ++it) lj[it.key()] = it.value();
            pj["layers"].push_back(lj);
        }
        if (with_outputs) {
            ordered_json outs = ordered_json::array();
            const int k = p.num_outputs;
            for (size_t i = 0; k > 0 && i < p.outputs.size() / size_t(k); ++i) {
                ordered_json row = ordered_json::array();
                for (int c = 0; c < k; ++c) row.push_back(num(p.outputs[i * size_t(k) + size_t(c)]));
                outs.push_back(row);
            }
            pj["outputs"] = outs;
        }
        j["passes"].push_back(pj);
    }
    j["comparisons"] = ordered_json::array();
    for (const auto& c : r.comparisons) {
        ordered_json cj;
        cj["precision"] = to_string(c.precision);
        cj["verdict"] = to_string(c.verdict);
        cj["max_abs_delta"] = num(c.max_abs_delta);
        cj["max_rel_delta"] = num(c.max_rel_delta);
        cj["deltas"] = ordered_json::array();
        for (const auto& d : c.deltas)
            cj["deltas"].push_back({{"sample", d.sample}, {"tag", d.tag}, {"abs", num(d.abs)}, {"rel", num(d.rel)},
                                    {"finite", d.finite}, {"within_tolerance", d.within_tolerance}});
        cj["flips"] = ordered_json::array();
        for (const auto& f : c.flips)
            cj["flips"].push_back({{"sample", f.sample}, {"tag", f.tag}, {"ref", f.ref}, {"amp", f.amp},
                                   {"ref_margin", num(f.ref_margin)}, {"amp_margin", num(f.amp_margin)}});
        cj["criteria"] = ordered_json::array();
        for (const auto& k : c.criteria)
            cj["criteria"].push_back({{"name", k.name}, {"passed", k.passed}, {"detail", k.detail}, {"samples", k.samples}});
        if (with_outputs) {
            cj["ref_decisions"] = c.ref_decisions;
            cj["amp_decisions"] = c.amp_decisions;
        }
        j["comparisons"].push_back(cj);
    }
    return j.dump(indent);
}

}  // namespace ampscope::json
