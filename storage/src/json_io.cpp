// SPDX-License-Identifier: MIT
#include "ampscope/storage/json_io.h"

#include "ampscope/engine/compare.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

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

/// A finite number, >= 0 for tolerances. `field` names it in messages.
double get_number(const json& j, const char* key, const std::string& file, const std::string& field, bool nonnegative) {
    const auto& v = j.at(key);
    const std::string want = nonnegative ? "a finite number >= 0" : "a finite number";
    if (!v.is_number()) throw InputError(file, field, "expected " + want + ", found " + std::string(v.type_name()));
    const double x = v.get<double>();
    if (!std::isfinite(x) || (nonnegative && x < 0)) throw InputError(file, field, "expected " + want + ", found " + v.dump());
    return x;
}

double get_tolerance(const json& j, const char* key, const std::string& file, const std::string& field) {
    return get_number(j, key, file, field, true);
}

/// An integer within [lo, hi]; no silent wrap of values beyond int.
int get_int(const json& j, const char* key, const std::string& file, const std::string& field, int64_t lo, int64_t hi) {
    const auto& v = j.at(key);
    const std::string range = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
    if (!v.is_number_integer()) throw InputError(file, field, "expected " + range + ", found " + v.dump());
    if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(hi) : (v.get<int64_t>() < lo || v.get<int64_t>() > hi))
        throw InputError(file, field, "expected " + range + ", found " + v.dump());
    return int(v.get<int64_t>());
}

/// Parses, naming the key whose value could not be read (e.g. 1e400 overflows a double).
json parse_document(const std::string& text, const std::string& file) {
    std::string key;
    auto track = [&key](int, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::key) key = parsed.get<std::string>();
        return true;
    };
    try {
        return json::parse(text, track);
    } catch (const json::out_of_range& e) {
        throw InputError(file, key, std::string("a number out of range (beyond a 64-bit double): ") + e.what());
    } catch (const json::exception& e) {
        throw InputError(file, "", std::string("not valid JSON: ") + e.what());
    }
}

std::vector<HeadTolerance> parse_heads(const json& heads, const std::string& file, const Criteria& c) {
    if (!heads.is_array()) throw InputError(file, "heads", "expected an array of {name, begin, end, atol, rtol}");
    std::vector<HeadTolerance> out;
    for (size_t i = 0; i < heads.size(); ++i) {
        const auto& h = heads[i];
        const std::string f = "heads[" + std::to_string(i) + "]";
        if (!h.is_object() || !h.contains("begin") || !h.contains("end"))
            throw InputError(file, f, "expected an object with integer begin and end");
        for (auto it = h.begin(); it != h.end(); ++it)
            if (it.key() != "name" && it.key() != "begin" && it.key() != "end" && it.key() != "atol" && it.key() != "rtol")
                throw InputError(file, f + "." + it.key(), "unknown key; expected name, begin, end, atol, rtol");
        HeadTolerance t;
        if (h.contains("name") && !h["name"].is_string())
            throw InputError(file, f + ".name", "expected a string, found " + std::string(h["name"].type_name()));
        t.name = h.value("name", f);
        constexpr int64_t kMax = std::numeric_limits<int>::max();
        t.begin = get_int(h, "begin", file, f + ".begin", 0, kMax - 1);
        t.end = get_int(h, "end", file, f + ".end", 1, kMax);
        if (t.end <= t.begin)
            throw InputError(file, f + ".end", "expected end > begin (" + std::to_string(t.begin) + "), found " + std::to_string(t.end));
        t.atol = h.contains("atol") ? get_tolerance(h, "atol", file, f + ".atol") : c.atol;
        t.rtol = h.contains("rtol") ? get_tolerance(h, "rtol", file, f + ".rtol") : c.rtol;
        out.push_back(t);
    }
    return out;
}

}  // namespace

Criteria parse_criteria(const std::string& text, const std::string& file, Criteria c) {
    const json j = parse_document(text, file);
    if (!j.is_object()) throw InputError(file, "", "expected a JSON object of criteria");
    static const std::vector<std::string> keys = {"atol", "rtol", "heads", "tie_tolerance", "tie_rule", "max_flips",
                                                  "quality_metric", "quality_threshold", "allow_nonfinite", "fixed_at"};
    for (auto it = j.begin(); it != j.end(); ++it)
        if (std::find(keys.begin(), keys.end(), it.key()) == keys.end())
            throw InputError(file, it.key(), "unknown key; expected one of atol, rtol, heads, tie_tolerance, tie_rule, "
                                             "max_flips, quality_metric, quality_threshold, allow_nonfinite");
    if (j.contains("atol")) c.atol = get_tolerance(j, "atol", file, "atol");
    if (j.contains("rtol")) c.rtol = get_tolerance(j, "rtol", file, "rtol");
    if (j.contains("tie_tolerance")) c.tie_tolerance = get_tolerance(j, "tie_tolerance", file, "tie_tolerance");
    if (j.contains("max_flips")) c.max_flips = get_int(j, "max_flips", file, "max_flips", 0, std::numeric_limits<int>::max());
    if (j.contains("quality_threshold")) {
        c.quality_threshold = get_number(j, "quality_threshold", file, "quality_threshold", false);
        c.quality_threshold_set = true;
    }
    if (j.contains("allow_nonfinite")) c.allow_nonfinite = get<bool>(j, "allow_nonfinite", file);
    if (j.contains("fixed_at") && !j["fixed_at"].is_string()) throw InputError(file, "fixed_at", "expected a string (ISO-8601 time)");
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
    if (j.contains("heads")) c.heads = parse_heads(j["heads"], file, c);
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
                              {"growth_tracker", st.growth_tracker >= 0 ? ordered_json(st.growth_tracker) : ordered_json(nullptr)},
                              {"nonfinite_stage", st.nonfinite_stage.empty() ? ordered_json(nullptr) : ordered_json(st.nonfinite_stage)},
                              {"origin", origin_json(st.origin)}});
    j["summary"] = {{"iterations", r.iterations}, {"effective_updates", r.effective_updates}, {"skipped", r.skipped},
                    {"final_scale", num(r.final_scale)}};
    j["checkpoints"] = r.checkpoints;
    j["warnings"] = r.warnings;
    j["started_at"] = r.started_at;
    j["finished_at"] = r.finished_at;
    return j.dump(indent, ' ', false, ordered_json::error_handler_t::replace);
}

std::string bench_to_json(const BenchResult& r, const BenchSpec& spec, const std::vector<storage::Validation>& validations,
                          int indent) {
    ordered_json j;
    bool validated = !validations.empty();
    ordered_json vs = ordered_json::array();
    for (const auto& v : validations) {
        validated = validated && !v.run.empty();
        ordered_json vj;
        vj["precision"] = to_string(v.precision);
        vj["run"] = v.run.empty() ? ordered_json(nullptr) : ordered_json(v.run);
        if (!v.run.empty()) {
            vj["review"] = {{"status", v.review.status}, {"by", v.review.by}, {"at", v.review.at}};
            vj["criteria"] = criteria_json(v.criteria);
        }
        vj["refusal"] = v.refusal.empty() ? ordered_json(nullptr) : ordered_json(v.refusal);
        vs.push_back(vj);
    }
    j["validated"] = validated;
    j["validation_run"] = validations.empty() || validations[0].run.empty() ? ordered_json(nullptr) : ordered_json(validations[0].run);
    j["validations"] = vs;
    j["keep_fp32"] = spec.keep_fp32;
    j["mode"] = to_string(spec.mode);
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

namespace {

ordered_json pass_json(const PassResult& p, bool with_outputs) {
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
    return pj;
}

/// A decision in JSON: the class index, -1 for abstain (as before), "non-finite" for a score
/// vector with NaN/Inf (never shown as a class or as abstain).
ordered_json decision_json(int d) { return d == kNonFinite ? ordered_json("non-finite") : ordered_json(d); }

ordered_json comparison_json(const Comparison& c, bool with_outputs) {
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
        cj["flips"].push_back({{"sample", f.sample}, {"tag", f.tag}, {"ref", decision_json(f.ref)}, {"amp", decision_json(f.amp)},
                               {"ref_margin", num(f.ref_margin)}, {"amp_margin", num(f.amp_margin)}});
    cj["criteria"] = ordered_json::array();
    for (const auto& k : c.criteria)
        cj["criteria"].push_back({{"name", k.name}, {"passed", k.passed}, {"detail", k.detail}, {"samples", k.samples}});
    if (with_outputs) {
        cj["ref_decisions"] = ordered_json::array();
        cj["amp_decisions"] = ordered_json::array();
        for (int d : c.ref_decisions) cj["ref_decisions"].push_back(decision_json(d));
        for (int d : c.amp_decisions) cj["amp_decisions"].push_back(decision_json(d));
    }
    return cj;
}

}  // namespace

std::string run_to_json(const RunResult& r, bool with_outputs, int indent, const std::vector<std::string>& damaged) {
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
    if (!damaged.empty()) j["damaged"] = damaged;  // parts of a stored run that could not be read
    j["passes"] = ordered_json::array();
    for (const auto& p : r.passes) j["passes"].push_back(pass_json(p, with_outputs));
    j["comparisons"] = ordered_json::array();
    for (const auto& c : r.comparisons) j["comparisons"].push_back(comparison_json(c, with_outputs));
    // Strings come from files others may have edited: invalid UTF-8 is replaced, not fatal.
    return j.dump(indent, ' ', false, ordered_json::error_handler_t::replace);
}

}  // namespace ampscope::json
