// SPDX-License-Identifier: MIT
#include "ampscope/storage/json_io.h"

#include "ampscope/engine/compare.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/vocabulary.h"
#include "json_map.h"
#include "json_types.h"

namespace ampscope::json {

using nlohmann::json;
using nlohmann::ordered_json;
namespace jmap = storage::jmap;

namespace {

using jmap::num;

ordered_json stats_json(const TensorStats& s) {
    return {{"count", s.count},
            {"nan", s.nan},
            {"posinf", s.posinf},
            {"neginf", s.neginf},
            {"zeros", s.zeros},
            {"min", num(s.min)},
            {"max", num(s.max)},
            {"absmax", num(s.absmax)},
            {"min_nonzero_abs", num(s.min_nonzero_abs)},
            {"mean", num(s.mean)},
            {"rms", num(s.rms)},
            {"fp16_overflow", s.fp16_overflow},
            {"fp16_subnormal", s.fp16_subnormal},
            {"fp16_underflow", s.fp16_underflow},
            {"bf16_overflow", s.bf16_overflow},
            {"bf16_subnormal", s.bf16_subnormal},
            {"bf16_underflow", s.bf16_underflow}};
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

}  // namespace

Criteria parse_criteria(const std::string& text, const std::string& file, Criteria c) {
    return jmap::read_criteria(parse_document(text, file), file, std::move(c));
}

std::string criteria_to_json(const Criteria& c) {
    return jmap::criteria(c).dump(2);
}

std::string train_to_json(const TrainResult& r, int indent) {
    ordered_json j;
    j["run_id"] = r.run_id;
    j["precision"] = to_string(r.spec.precision);
    j["autocast"] = r.spec.autocast;
    j["scaler"] = {{"enabled", r.spec.scaler.enabled},
                   {"init_scale", r.spec.scaler.init_scale},
                   {"growth_factor", r.spec.scaler.growth_factor},
                   {"backoff_factor", r.spec.scaler.backoff_factor},
                   {"growth_interval", r.spec.scaler.growth_interval}};
    j["model"] = jmap::model_identity(r.model);
    j["data"] = r.spec.data;
    j["optimizer"] = {{"name", to_string(r.spec.optimizer)},
                      {"lr", r.spec.lr},
                      {"momentum", r.spec.momentum},
                      {"weight_decay", r.spec.weight_decay},
                      {"schedule", to_string(r.spec.lr_schedule)},
                      {"schedule_follows", r.spec.lr_per_iteration ? "iterations" : "effective_updates"}};
    j["loss"] = to_string(r.spec.loss);
    j["batch_size"] = r.spec.batch_size;
    j["accumulate"] = r.spec.accumulate;
    j["clip_grad_norm"] = r.spec.clip_grad_norm;
    j["keep_fp32"] = r.spec.keep_fp32;
    if (!r.spec.keep_bf16.empty()) j["keep_bf16"] = r.spec.keep_bf16;  // an FP8 recipe's modules left out of it
    if (r.spec.precision == Precision::Mxfp8) j["mx_scaling"] = to_string(r.spec.mx_scaling);  // block scales
    if (r.spec.fp8_all_gemms) j["fp8_all_gemms"] = true;  // the model's own products quantized too (absent: linears)
    if (r.spec.rowwise_gw_hp) j["rowwise_gw_hp"] = true;  // torchao's rowwise_with_gw_hp
    if (r.spec.precision == Precision::Fp8Delayed) {      // Transformer Engine's amax_history_len and margin
        j["fp8_delayed"] = {{"amax_history", r.spec.fp8_amax_history}, {"margin", r.spec.fp8_margin}};
        if (r.spec.fp8_weight_cache) j["fp8_delayed"]["weight_cache"] = true;  // is_first_microbatch's caching
    }
    j["backend"] = ordered_json(r.backend);
    j["resumed_from"] = r.resumed_from.empty() ? ordered_json(nullptr) : ordered_json(r.resumed_from);
    j["policy_changed"] = r.policy_changed;
    j["steps"] = ordered_json::array();
    for (const auto& st : r.steps)
        j["steps"].push_back(
            {{"step", st.step},
             {"loss_ref", num(st.loss_ref)},
             {"loss_amp", num(st.loss_amp)},
             {"scale", num(st.scale)},
             {"found_inf", st.found_inf},
             {"skipped", st.skipped},
             {"effective_updates", st.effective_updates},
             {"grad_norm", num(st.grad_norm)},
             {"lr", num(st.lr)},
             {"divergence", num(st.divergence)},
             {"grad_underflow", st.grad_underflow >= 0 ? ordered_json(st.grad_underflow) : ordered_json(nullptr)},
             {"growth_tracker", st.growth_tracker >= 0 ? ordered_json(st.growth_tracker) : ordered_json(nullptr)},
             {"fp8_saturated", st.fp8_saturated >= 0 ? ordered_json(st.fp8_saturated) : ordered_json(nullptr)},
             {"fp8_saturated_at", st.fp8_saturated > 0 ? ordered_json(st.fp8_saturated_at) : ordered_json(nullptr)},
             {"nonfinite_stage", st.nonfinite_stage.empty() ? ordered_json(nullptr) : ordered_json(st.nonfinite_stage)},
             {"origin", jmap::origin(st.origin)}});
    j["summary"] = {{"iterations", r.iterations},
                    {"effective_updates", r.effective_updates},
                    {"skipped", r.skipped},
                    {"final_scale", num(r.final_scale)}};
    j["checkpoints"] = r.checkpoints;
    j["warnings"] = r.warnings;
    j["started_at"] = r.started_at;
    j["finished_at"] = r.finished_at;
    return j.dump(indent, ' ', false, ordered_json::error_handler_t::replace);
}

std::string bench_to_json(const BenchResult& r, const BenchSpec& spec, const std::vector<Validation>& validations,
                          int indent) {
    ordered_json j;
    ordered_json vs = ordered_json::array();
    for (const auto& v : validations) {
        ordered_json vj;
        vj["precision"] = to_string(v.precision);
        vj["run"] = v.run.empty() ? ordered_json(nullptr) : ordered_json(v.run);
        if (!v.run.empty()) {
            vj["review"] = {{"status", to_string(v.review.status)}, {"by", v.review.by}, {"at", v.review.at}};
            vj["criteria"] = jmap::criteria(v.criteria);
        }
        vj["refusal"] = v.refusal.empty() ? ordered_json(nullptr) : ordered_json(v.refusal);
        vs.push_back(vj);
    }
    j["validated"] = all_validated(validations);
    j["validation_run"] =
        validations.empty() || validations[0].run.empty() ? ordered_json(nullptr) : ordered_json(validations[0].run);
    j["validations"] = vs;
    j["keep_fp32"] = spec.keep_fp32;
    j["mode"] = to_string(spec.mode);
    j["model"] = jmap::model_identity(r.model);
    j["probes"] = {{"source", r.probes.source}, {"sha256", r.probes.sha256}};
    j["backend"] = ordered_json(r.backend);
    j["batch"] = r.batch;
    j["what"] = r.train ? "training step" : "forward";
    j["timer"] = r.timer;
    j["memory"] = r.memory;
    j["figures"] = ordered_json::array();
    for (const auto& f : r.figures)
        j["figures"].push_back({{"precision", to_string(f.precision)},
                                {"median_ms", f.median_ms},
                                {"p10_ms", f.p10_ms},
                                {"p90_ms", f.p90_ms},
                                {"peak_bytes", f.peak_bytes},
                                {"speedup", f.speedup},
                                {"memory_ratio", f.memory_ratio}});
    return j.dump(indent);
}

std::string ops_to_json(const OpsReport& r, int indent) {
    ordered_json j;
    j["model"] = r.model;
    j["precision"] = to_string(r.precision);
    j["backend"] = ordered_json(r.backend);
    j["ops"] = ordered_json::array();
    for (const auto& o : r.ops)
        j["ops"].push_back({{"op", o.op},
                            {"calls", o.calls},
                            {"modules", o.modules},
                            {"input_dtypes", o.input_dtypes},
                            {"amp_output_dtype", o.amp_output_dtype},
                            {"autocast_fp32", o.autocast_fp32},
                            {"kernel_ok", o.kernel_ok},
                            {"error", o.error}});
    return j.dump(indent);
}

std::string backend_to_json(const BackendReport& b, int indent) {
    return ordered_json(b).dump(indent);
}

namespace {

ordered_json advise_timing(const AdviseRecord& rec) {
    if (!rec.full_amp || !rec.with_set) return nullptr;
    ordered_json t = ordered_json::array();
    auto add = [&t](const BenchFigure& f, const std::string& policy) {
        t.push_back({{"precision", to_string(f.precision)},
                     {"policy", policy},
                     {"median_ms", num(f.median_ms)},
                     {"peak_bytes", f.peak_bytes},
                     {"speedup_vs_fp32", num(f.speedup)}});
    };
    for (const auto& f : rec.full_amp->figures) add(f, f.precision == Precision::Fp32 ? "fp32" : "full amp");
    for (const auto& f : rec.with_set->figures)
        if (f.precision != Precision::Fp32) add(f, "amp with the set in fp32");
    return {{"timer", rec.with_set->timer}, {"memory", rec.with_set->memory}, {"figures", t}};
}

}  // namespace

std::string advise_to_json(const AdviseResult& r, const AdviseRecord& rec, int indent) {
    ordered_json j;
    j["outcome"] = to_string(r.outcome);
    j["message"] = r.message;
    j["kept_in"] = to_string(r.kept_in);  // "fp32" (keep_fp32), or "bf16" for an FP8 recipe's set (keep_bf16)
    if (r.kept_in == Precision::Bf16) {   // an FP8 recipe's set: left out of FP8, in BF16 (run --keep-bf16)
        j["keep_fp32"] = ordered_json::array();
        j["keep_bf16"] = r.keep_fp32;
    } else {
        j["keep_fp32"] = r.keep_fp32;
    }
    j["reasons"] = ordered_json::array();
    for (const auto& x : r.reasons)
        j["reasons"].push_back({{"module", x.module}, {"why", x.why}, {"detail", x.detail}});
    j["verified_run"] = rec.verified_run.empty() ? ordered_json(nullptr) : ordered_json(rec.verified_run);
    j["verified_verdict"] = rec.verified_verdict.empty() ? ordered_json(nullptr) : ordered_json(rec.verified_verdict);
    j["advised_from"] = rec.advised_from.empty() ? ordered_json(nullptr) : ordered_json(rec.advised_from);
    j["granularity"] = rec.granularity;
    j["evaluations"] = r.evaluations;
    j["passes_used"] = r.passes_used;
    j["fp32_share"] = {{"ops", num(r.fp32_share_ops)}, {"flops", num(r.fp32_share_flops)}};
    j["model"] = jmap::model_identity(r.model);
    j["backend"] = ordered_json(r.backend);
    j["candidates"] = r.candidates;
    j["sensitivity"] = ordered_json::array();
    for (const auto& s : r.sensitivity)
        j["sensitivity"].push_back({{"module", s.module},
                                    {"precision", to_string(s.precision)},
                                    {"order", s.order},
                                    {"sqnr_db", num(s.sqnr_db)},
                                    {"rel_error", num(s.rel_error)},
                                    {"overflow", s.overflow},
                                    {"underflow", s.underflow},
                                    {"elements", s.elements},
                                    {"origin", s.origin}});
    j["timing"] = advise_timing(rec);
    j["warnings"] = r.warnings;
    return j.dump(indent);
}

namespace {

/// An FP8 pass's quantized GEMM operands (ampscope/engine/fp8.h): counts over all batches and
/// their shares of the operand's elements.
ordered_json fp8_operands_json(const std::vector<Fp8Operand>& ops, bool what_if) {
    ordered_json a = ordered_json::array();
    for (const auto& o : ops) {
        const auto& s = o.stats;
        a.push_back({{"module", o.module},
                     {"op", o.op},
                     {"operand", o.operand},
                     {"scheme", to_string(s.scheme)},
                     {"element", to_string(s.element)},
                     {"elements", s.numel},
                     {"amax", num(s.amax)},
                     {"scale_min", num(s.scale_min)},
                     {"scale_max", num(s.scale_max)},
                     {"nonfinite", s.nonfinite},
                     {"underflow", s.underflow},
                     {"subnormal", s.subnormal},
                     {"saturated", s.saturated},
                     {"nonfinite_out", s.nonfinite_out},
                     {"underflow_share", num(s.share(s.underflow))},
                     {"subnormal_share", num(s.share(s.subnormal))},
                     {"saturated_share", num(s.share(s.saturated))},
                     {"sqnr_db", num(s.sqnr_db)}});
        if (what_if) a.back()["recipe"] = to_string(what_if_recipe(s.scheme));
    }
    return a;
}

ordered_json pass_json(const PassResult& p, bool with_outputs) {
    ordered_json pj;
    pj["precision"] = to_string(p.precision);
    pj["keep_fp32"] = p.keep_fp32;
    pj["nonfinite_samples"] = p.nonfinite_samples;
    pj["origin"] = jmap::origin(p.origin);
    pj["quality"] = p.quality ? num(*p.quality) : ordered_json(nullptr);
    pj["seconds"] = p.seconds;
    pj["num_outputs"] = p.num_outputs;
    pj["layers"] = ordered_json::array();
    for (const auto& l : p.layers) {
        ordered_json lj = {{"index", l.index},
                           {"module", l.module},
                           {"op", l.op},
                           {"dtype", l.dtype},
                           {"shape", l.shape},
                           {"autocast", l.autocast},
                           {"inputs_finite", l.inputs_finite},
                           {"origin", l.origin}};
        const ordered_json stats = stats_json(l.stats);  // keep alive while iterating
        for (auto it = stats.begin(); it != stats.end(); ++it) lj[it.key()] = it.value();
        pj["layers"].push_back(lj);
    }
    // an FP8 pass's quantized operands; a BF16 pass's what-if (every current-scaling recipe on its operands)
    if (!p.fp8_operands.empty())
        pj[is_fp8(p.precision) ? "fp8_operands" : "fp8_what_if"] =
            fp8_operands_json(p.fp8_operands, !is_fp8(p.precision));
    const auto rows = [k = p.num_outputs](const std::vector<float>& v) {
        ordered_json outs = ordered_json::array();
        for (size_t i = 0; k > 0 && i < v.size() / size_t(k); ++i) {
            ordered_json row = ordered_json::array();
            for (int c = 0; c < k; ++c) row.push_back(num(v[i * size_t(k) + size_t(c)]));
            outs.push_back(row);
        }
        return outs;
    };
    if (const auto& g = p.real_gemm) {  // the pass again with real FP8 GEMMs (torch._scaled_mm)
        pj["real_gemm"] = {{"ran", g->ran},
                           {"reason", g->reason.empty() ? ordered_json(nullptr) : ordered_json(g->reason)},
                           {"kernel", g->ran ? ordered_json(g->kernel) : ordered_json(nullptr)},
                           {"differing", g->differing},
                           {"max_abs_diff", num(g->max_abs_diff)},
                           {"decisions_differ", g->decisions_differ},
                           {"flips", g->flips},
                           {"seconds", g->seconds}};
        if (with_outputs && g->ran) pj["real_gemm"]["outputs"] = rows(g->outputs);
    }
    if (with_outputs) pj["outputs"] = rows(p.outputs);
    return pj;
}

/// A decision in JSON: the class index, -1 for abstain (as before), "non-finite" for a score
/// vector with NaN/Inf (never shown as a class or as abstain).
ordered_json decision_json(int d) {
    return d == kNonFinite ? ordered_json("non-finite") : ordered_json(d);
}

/// Per-token figures of a sequence output (llama.cpp's --kl-divergence definitions).
ordered_json tokens_json(const TokenStats& t, bool with_outputs) {
    ordered_json j = {{"length", t.length},
                      {"vocab", t.vocab},
                      {"positions", t.positions},
                      {"masked", t.masked},
                      {"mean_kld", num(t.mean_kld)},
                      {"p99_kld", num(t.p99_kld)},
                      {"max_kld", num(t.max_kld)},
                      {"same_top", num(t.same_top)},
                      {"top5_overlap", num(t.top5_overlap)},
                      {"rms_dp", num(t.rms_dp)}};
    if (t.label_tokens > 0)
        j["labels"] = {{"tokens", t.label_tokens},
                       {"ref_cross_entropy", num(t.ref_ce)},
                       {"amp_cross_entropy", num(t.amp_ce)},
                       {"ref_perplexity", num(t.ref_ppl)},
                       {"amp_perplexity", num(t.amp_ppl)}};
    j["boundary"] = ordered_json::array();
    for (const auto& b : t.boundary)
        j["boundary"].push_back({{"sample", b.sample}, {"position", b.position}, {"ref_margin", num(b.ref_margin)}});
    if (with_outputs) {
        ordered_json kld = ordered_json::array();
        for (float v : t.kld) kld.push_back(num(v));
        j["kld"] = kld;  // per position [samples x length], "nan" where not compared
    }
    return j;
}

ordered_json comparison_json(const Comparison& c, bool with_outputs) {
    ordered_json cj;
    cj["precision"] = to_string(c.precision);
    cj["verdict"] = to_string(c.verdict);
    cj["max_abs_delta"] = num(c.max_abs_delta);
    cj["max_rel_delta"] = num(c.max_rel_delta);
    cj["deltas"] = ordered_json::array();
    for (const auto& d : c.deltas)
        cj["deltas"].push_back({{"sample", d.sample},
                                {"tag", d.tag},
                                {"abs", num(d.abs)},
                                {"rel", num(d.rel)},
                                {"finite", d.finite},
                                {"within_tolerance", d.within_tolerance}});
    cj["flips"] = ordered_json::array();
    for (const auto& f : c.flips) {
        ordered_json fj = {{"sample", f.sample},
                           {"tag", f.tag},
                           {"ref", decision_json(f.ref)},
                           {"amp", decision_json(f.amp)},
                           {"ref_margin", num(f.ref_margin)},
                           {"amp_margin", num(f.amp_margin)}};
        if (f.position >= 0) fj["position"] = f.position;  // sequence outputs
        cj["flips"].push_back(fj);
    }
    if (c.tokens) cj["tokens"] = tokens_json(*c.tokens, with_outputs);
    cj["criteria"] = ordered_json::array();
    for (const auto& k : c.criteria)
        cj["criteria"].push_back(
            {{"name", k.name}, {"passed", k.passed}, {"detail", k.detail}, {"samples", k.samples}});
    if (with_outputs) {
        cj["ref_decisions"] = ordered_json::array();
        cj["amp_decisions"] = ordered_json::array();
        for (int d : c.ref_decisions) cj["ref_decisions"].push_back(decision_json(d));
        for (int d : c.amp_decisions) cj["amp_decisions"].push_back(decision_json(d));
    }
    return cj;
}

/// The ranks of a run launched under torchrun: which samples each ran, where, how long.
ordered_json ranks_json(const std::vector<RankInfo>& ranks) {
    ordered_json out = ordered_json::array();
    for (const auto& k : ranks)
        out.push_back({{"rank", k.rank},
                       {"host", k.host},
                       {"device", k.device},
                       {"first_sample", k.first_sample},
                       {"samples", k.samples},
                       {"seconds", k.seconds},
                       {"bytes", k.bytes}});
    return out;
}

}  // namespace

std::string run_to_json(const RunResult& r, bool with_outputs, int indent, const std::vector<std::string>& damaged) {
    ordered_json j;
    j["run_id"] = r.run_id;
    j["verdict"] = to_string(r.verdict);
    j["tool_version"] = r.tool_version;
    j["started_at"] = r.started_at;
    j["finished_at"] = r.finished_at;
    j["criteria"] = jmap::criteria(r.criteria);
    j["backend"] = ordered_json(r.backend);
    j["model"] = {{"source", r.model.source}, {"kind", r.model.kind},
                  {"sha256", r.model.sha256}, {"weights_sha256", r.model.weights_sha256},
                  {"mode", r.model.mode},     {"parameters", r.model.parameters}};
    if (!r.model.format.empty()) j["model"]["format"] = r.model.format;  // torch.export: schema version, IR
    ordered_json tags = ordered_json::object();
    for (const auto& [k, v] : r.probes.tags) tags[k] = v;
    j["probes"] = {{"source", r.probes.source},
                   {"sha256", r.probes.sha256},
                   {"count", r.probes.count},
                   {"tags", tags},
                   {"input_shapes", r.probes.input_shapes},
                   {"has_labels", r.probes.has_labels},
                   {"has_targets", r.probes.has_targets}};
    j["seed"] = r.spec.seed;
    j["batch_size"] = r.spec.batch_size;
    if (r.spec.has_pass(Precision::Fp8Delayed))
        j["fp8_delayed"] = {{"amax_history", r.spec.fp8_amax_history},  // Transformer Engine's amax_history_len
                            {"margin", r.spec.fp8_margin},
                            {"amax_compute_algo", "max"}};
    if (!r.spec.keep_bf16.empty()) j["keep_bf16"] = r.spec.keep_bf16;  // FP8 passes' modules kept in BF16
    if (r.spec.fp8_what_if) j["fp8_what_if"] = true;                   // the BF16 pass holds fp8_what_if
    if (r.spec.fp8_all_gemms) j["fp8_all_gemms"] = true;  // the model's own products quantized too (absent: linears)
    if (r.spec.fp8_real_gemm != RealGemm::Auto)           // fp8 / fp8-rowwise passes hold real_gemm when it ran
        j["fp8_real_gemm"] = to_string(r.spec.fp8_real_gemm);
    if (r.spec.mx_scaling != MxScaling::Floor) j["mx_scaling"] = to_string(r.spec.mx_scaling);  // MX block scales
    // a run verifying an advised FP32 set names the run it was advised on (ampscope-cli advise)
    j["advised_from"] = r.spec.advised_from.empty() ? ordered_json(nullptr) : ordered_json(r.spec.advised_from);
    j["warnings"] = r.warnings;
    if (!damaged.empty()) j["damaged"] = damaged;            // parts of a stored run that could not be read
    if (!r.ranks.empty()) j["ranks"] = ranks_json(r.ranks);  // a run under torchrun (docs/distributed.md)
    j["passes"] = ordered_json::array();
    for (const auto& p : r.passes) j["passes"].push_back(pass_json(p, with_outputs));
    j["comparisons"] = ordered_json::array();
    for (const auto& c : r.comparisons) j["comparisons"].push_back(comparison_json(c, with_outputs));
    // Strings come from files others may have edited: invalid UTF-8 is replaced, not fatal.
    return j.dump(indent, ' ', false, ordered_json::error_handler_t::replace);
}

}  // namespace ampscope::json
