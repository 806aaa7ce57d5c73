// SPDX-License-Identifier: MIT
#include "summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "ampscope/engine/compare.h"
#include "ampscope/engine/rules.h"
#include "ampscope/engine/text.h"

namespace ampscope::cli {

/// Stored or model-given text, its control characters made visible (no terminal escapes).
std::string safe(const std::string& s) {
    return visible_controls(s);
}

/// A table cell: safe(s), cut to `w` columns (its last one "~" when cut) or padded with spaces.
std::string pad(std::string s, size_t w) {
    s = safe(s);
    // columns of characters, not bytes: a UTF-8 name ("blöck") takes as many as it shows
    const auto columns = [](const std::string& t) {
        return size_t(std::count_if(t.begin(), t.end(), [](char c) { return (c & 0xC0) != 0x80; }));
    };
    if (columns(s) > w) {  // cut on a character's first byte, w - 1 characters kept
        size_t i = 0;
        for (size_t kept = 0; i < s.size(); ++i)
            if ((s[i] & 0xC0) != 0x80 && kept++ == w - 1) break;
        s = s.substr(0, i) + "~";
    }
    return s + std::string(w - columns(s), ' ');
}
namespace {

std::string fmtg(double v, int prec = 3) {
    if (std::isnan(v)) return "nan";  // never "-nan" (the sign of a NaN means nothing)
    char b[64];
    std::snprintf(b, sizeof b, "%.*g", prec, v);
    return b;
}

std::string paint(const std::string& s, const char* code, bool color) {
    return color ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
}

std::string verdict_text(Verdict v, bool color) {
    const auto s = to_string(v);
    return paint(s, v == Verdict::Accepted ? "1;32" : "1;31", color);
}

}  // namespace

void print_backend(std::ostream& os, const BackendReport& b) {
    os << "device   " << b.device << " (" << b.kind << ")\n"
       << "name     " << b.name << "\n"
       << "torch    " << b.torch_version << "\n";
    if (!b.cuda_version.empty()) os << "cuda     " << b.cuda_version << "\n";
    if (!b.cudnn_version.empty()) os << "cudnn    " << b.cudnn_version << "\n";
    if (!b.hip_version.empty()) os << "hip      " << b.hip_version << "\n";
    if (!b.compute_capability.empty()) os << "compute  " << b.compute_capability << "\n";
    os << "cuda     "
       << (b.cuda_available ? std::to_string(b.cuda_device_count) + " device(s)" : std::string("not available")) << "\n"
       << "bf16     " << (b.bf16_supported ? "supported" : "not supported") << "\n"
       << "fp16     " << (b.fp16_supported ? "supported" : "not supported") << "\n"
       << "threads  " << b.num_threads << "\n";
    for (const auto& n : b.notes) os << "note     " << n << "\n";
}

void print_ops(std::ostream& os, const OpsReport& r) {
    os << "operator coverage of " << safe(r.model) << " for " << to_string(r.precision) << " on " << r.backend.device
       << " (" << r.backend.kind << ", torch " << r.backend.torch_version << ")\n";
    os << "  " << pad("op", 30) << pad("calls", 7) << pad("autocast out", 14) << pad("kernel", 8) << "modules\n";
    int failing = 0, fp32 = 0;
    for (const auto& o : r.ops) {
        std::string mods;
        for (size_t i = 0; i < std::min<size_t>(3, o.modules.size()); ++i)
            mods += (i ? ", " : "") + (o.modules[i].empty() ? std::string("(root)") : o.modules[i]);
        if (o.modules.size() > 3) mods += ", ...";
        os << "  " << pad(o.op, 30) << pad(std::to_string(o.calls), 7)
           << pad(o.amp_output_dtype + (o.autocast_fp32 ? " (fp32)" : ""), 14) << pad(o.kernel_ok ? "ok" : "MISSING", 8)
           << safe(mods) << "\n";
        if (!o.kernel_ok) os << "      " << safe(o.error) << "\n";
        failing += !o.kernel_ok;
        fp32 += o.autocast_fp32;
    }
    os << r.ops.size() << " ops; " << fp32 << " run in FP32 under autocast; " << failing << " without a "
       << to_string(r.precision) << " kernel on " << r.backend.device << "\n";
}

namespace {

/// A training's FP8 recipe lines: MX block scales, modules kept in BF16, fp8-delayed's settings
/// and the steps where a tensor outran its stale scale.
void print_train_fp8(std::ostream& os, const TrainResult& r) {
    if (r.spec.precision == Precision::Mxfp8 && r.spec.autocast)
        os << "  mxfp8: " << to_string(r.spec.mx_scaling) << " block scales\n";
    if (r.spec.rowwise_gw_hp && r.spec.autocast)
        os << "  fp8-rowwise: torchao's rowwise_with_gw_hp (the weight gradient's GEMM in high precision)\n";
    if (r.spec.fp8_all_gemms)
        os << "  FP8 GEMMs: every matrix product (linear layers, the model's own products"
           << (r.spec.precision == Precision::Fp8 || r.spec.precision == Precision::Fp8Delayed ? " and convolutions"
                                                                                               : "")
           << "), forward and backward\n";
    if (!r.spec.keep_bf16.empty()) {  // an FP8 recipe's modules left out of it
        os << "  kept in BF16, out of " << to_string(r.spec.precision) << ":";
        for (const auto& k : r.spec.keep_bf16) os << " " << safe(k);
        os << "\n";
    }
    if (r.spec.precision == Precision::Fp8Delayed && r.spec.autocast) {  // where a tensor outran its stale scale
        os << "  fp8-delayed: amax history " << r.spec.fp8_amax_history << " micro-batches, margin "
           << r.spec.fp8_margin
           << (r.spec.fp8_weight_cache ? ", weights cast once a step (its first micro-batch's reused)" : "")
           << "; values beyond the stale scale, clamped:";
        int shown = 0, steps = 0;
        for (const auto& st : r.steps)
            if (st.fp8_saturated > 0 && steps++ < 12)
                os << (shown++ ? "," : "") << " step " << st.step << " " << st.fp8_saturated << " ("
                   << safe(st.fp8_saturated_at) << (st.fp8_saturated_at.empty() ? "" : " first") << ")";
        os << (steps == 0 ? " none" : steps > 12 ? ", ..." : "") << "\n";
    }
}

}  // namespace

void print_train(std::ostream& os, const TrainResult& r, bool color) {
    const auto& s = r.spec;
    os << "training run " << safe(r.run_id) << "\n  model " << safe(r.model.source) << ", data " << safe(s.data) << ", "
       << to_string(s.optimizer) << " lr " << s.lr << ", batch " << s.batch_size
       << (s.accumulate > 1 ? " x" + std::to_string(s.accumulate) : "") << ", loss " << to_string(s.loss)
       << "\n  policy: " << to_string(s.precision) << (s.autocast ? " autocast" : " (no autocast: FP32 compute)")
       << (s.scaler.enabled ? ", GradScaler(init " + fmtg(s.scaler.init_scale) + ", growth " +
                                  fmtg(s.scaler.growth_factor) + ", backoff " + fmtg(s.scaler.backoff_factor) +
                                  ", interval " + std::to_string(s.scaler.growth_interval) + ")"
                            : std::string(", no GradScaler"))
       << "\n";
    if (!r.resumed_from.empty())
        os << "  resumed from " << safe(r.resumed_from)
           << (r.policy_changed ? " (policy changed: experiment change)" : "") << "\n";
    os << "  iterations " << r.iterations << ", effective updates " << r.effective_updates << ", skipped " << r.skipped
       << ", final scale " << fmtg(r.final_scale) << "\n";
    if (r.skipped) {
        os << "  skipped steps:";
        int shown = 0;
        for (const auto& st : r.steps)
            if (st.skipped && shown++ < 20) os << " " << st.step;
        if (r.skipped > 20) os << " ...";
        os << "\n";
    }
    os << "  scale trajectory:";
    double last = -1;
    for (const auto& st : r.steps)
        if (st.scale != last) {
            os << " " << st.step << ":" << fmtg(st.scale);
            last = st.scale;
        }
    os << "\n";
    print_train_fp8(os, r);
    os << "    step   loss_ref    loss_amp    scale      skip  eff  grad_norm  divergence  underflow  non-finite\n";
    const size_t n = r.steps.size();
    for (size_t i = 0; i < n; ++i) {
        if (n > 24 && i >= 10 && i + 10 < n) {
            if (i == 10) os << "    ...\n";
            continue;
        }
        const auto& st = r.steps[i];
        char line[256];
        std::snprintf(line, sizeof line, "    %-6d %-11.5g %-11.5g %-10.4g %-5s %-4d %-10.4g %-11.3g ", st.step,
                      st.loss_ref, st.loss_amp, st.scale, st.skipped ? "yes" : "", st.effective_updates, st.grad_norm,
                      st.divergence);
        os << line;
        std::snprintf(line, sizeof line, "%-10s ",
                      st.grad_underflow >= 0 ? std::to_string(st.grad_underflow).c_str() : "-");
        os << line;
        if (!st.nonfinite_stage.empty()) {
            os << paint(safe(st.nonfinite_stage), "31", color);
            if (st.origin)
                os << " (" << (st.origin->module.empty() ? "(root)" : safe(st.origin->module)) << ", "
                   << safe(st.origin->op) << ")";
        }
        os << "\n";
    }
    if (!r.steps.empty())
        os << "  final losses: reference " << fmtg(r.steps.back().loss_ref, 5) << ", AMP "
           << fmtg(r.steps.back().loss_amp, 5) << "\n";
    for (const auto& c : r.checkpoints) os << "  checkpoint " << safe(c) << "\n";
    for (const auto& w : r.warnings) os << "  warning: " << safe(w) << "\n";
}

void print_layers(std::ostream& os, const PassResult& p, bool color) {
    os << "  layers of the " << to_string(p.precision) << " pass (" << p.layers.size() << " ops; headroom = log2("
       << to_string(headroom_format(p.precision)) << " max / absmax))\n";
    os << "    " << pad("#", 5) << pad("module", 22) << pad("op", 22) << pad("dtype", 10) << pad("absmax", 11)
       << pad("headroom", 9) << pad("f16 ovf", 8) << pad("f16 sub", 8) << pad("nonfin", 8) << "\n";
    for (const auto& l : p.layers) {
        const double head = headroom(l.stats.absmax, p.precision);
        std::string mark = l.origin                  ? paint("<- origin", "1;31", color)
                           : l.stats.nonfinite() > 0 ? std::string("  (propagated)")
                                                     : std::string();
        os << "    " << pad(std::to_string(l.index), 5) << pad(l.module.empty() ? "(root)" : l.module, 22)
           << pad(l.op, 22) << pad(l.dtype, 10) << pad(fmtg(l.stats.absmax), 11)
           << pad(std::isinf(head) ? "-" : fmtg(head, 3), 9) << pad(std::to_string(l.stats.fp16_overflow), 8)
           << pad(std::to_string(l.stats.fp16_subnormal), 8) << pad(std::to_string(l.stats.nonfinite()), 8) << mark
           << "\n";
    }
}

std::string percent(double share) {
    return fmtg(100 * share, 3) + "%";
}

/// An FP8 operand as the tables name it: a linear layer's "input" / "weight", another GEMM's with
/// its op (run --fp8-all-gemms), "bmm.mat1", as the GUI's headroom chart labels it.
std::string operand_label(const Fp8Operand& o) {
    if (o.op.empty() || o.op == "aten::linear") return safe(o.operand);
    const std::string op = o.op.rfind("aten::", 0) == 0 ? o.op.substr(6) : o.op;
    return safe(op + "." + o.operand);
}

/// A BF16 pass's FP8 what-if, one line per recipe: the shares over all its operands' elements
/// and the operand with the lowest SQNR.
void print_what_if_summary(std::ostream& os, const PassResult& p) {
    std::vector<Precision> recipes;  // in the order the pass recorded them
    for (const auto& o : p.fp8_operands)
        if (std::find(recipes.begin(), recipes.end(), what_if_recipe(o.stats.scheme)) == recipes.end())
            recipes.push_back(what_if_recipe(o.stats.scheme));
    for (Precision r : recipes) {
        int64_t n = 0, under = 0, sub = 0, sat = 0;
        const Fp8Operand* worst = nullptr;
        for (const auto& o : p.fp8_operands) {
            if (what_if_recipe(o.stats.scheme) != r) continue;
            n += o.stats.numel, under += o.stats.underflow, sub += o.stats.subnormal, sat += o.stats.saturated;
            if (!std::isnan(o.stats.sqnr_db) && (!worst || o.stats.sqnr_db < worst->stats.sqnr_db)) worst = &o;
        }
        const auto share = [n](int64_t k) { return percent(n > 0 ? double(k) / double(n) : 0.0); };
        os << "  fp8 what-if " << pad(to_string(r), 12) << "underflow " << share(under) << ", subnormal " << share(sub)
           << ", saturated " << share(sat) << "; lowest SQNR ";
        if (!worst)  // every operand non-finite: no SQNR measured
            os << "none (no finite operand)\n";
        else
            os << fmtg(worst->stats.sqnr_db, 3) << " dB (" << (worst->module.empty() ? "(root)" : safe(worst->module))
               << " " << operand_label(*worst) << ")\n";
    }
}

/// An fp8 / fp8-rowwise pass's real-GEMM check, said plainly: the pass is simulated, these GEMMs real.
void print_real_gemm(std::ostream& os, const PassResult& p, const RealGemmCheck& g) {
    os << "  the pass is simulated: its GEMMs are FP32 products of the FP8 operands (torchao's emulate=True)\n";
    if (!g.ran) {
        os << "  real FP8 GEMMs: not run: " << safe(g.reason) << "\n";
        return;
    }
    os << "  real FP8 GEMMs (" << safe(g.kernel) << "): " << fmtg(g.seconds, 3) << " s; against the simulated pass "
       << g.differing << " of " << p.outputs.size() << " scores differ (max |diff| " << fmtg(g.max_abs_diff) << "), "
       << g.decisions_differ << " decisions differ; " << g.flips << " flips against FP32\n";
}

/// An FP8 pass's quantized GEMM operands: amax, scale, shares underflowing / subnormal /
/// saturated, SQNR (percentages of the operand's elements over all batches); a BF16 pass's
/// what-if: the same per recipe.
void print_fp8_operands(std::ostream& os, const PassResult& p) {
    const bool what_if = !is_fp8(p.precision);
    const auto& first = p.fp8_operands.front().stats;  // one recipe per FP8 pass
    // fp8-delayed quantizes as tensorwise does, with the scale its amax history gave: name that
    const std::string scheme =
        p.precision == Precision::Fp8Delayed ? "delayed (amax history)" : to_string(first.scheme);
    if (what_if)
        os << "  fp8 what-if (" << p.fp8_operands.size()
           << "; this pass's GEMM operands as each recipe would quantize them)\n";
    else
        os << "  fp8 operands (" << p.fp8_operands.size() << "; " << to_string(first.element) << ", " << scheme
           << " scales)\n";
    os << "    " << (what_if ? pad("recipe", 13) : "") << pad("module", 22) << pad("operand", 14) << pad("amax", 11)
       << pad("scale", 20) << pad("underflow", 10) << pad("subnorm", 9) << pad("saturated", 10) << "SQNR dB\n";
    for (const auto& o : p.fp8_operands) {
        const auto& s = o.stats;
        const bool one = s.scale_min == s.scale_max;
        os << "    " << (what_if ? pad(to_string(what_if_recipe(s.scheme)), 13) : "")
           << pad(o.module.empty() ? "(root)" : safe(o.module), 22) << pad(operand_label(o), 14)
           << pad(fmtg(s.amax), 11)
           << pad(one ? fmtg(s.scale_min) : fmtg(s.scale_min, 3) + ".." + fmtg(s.scale_max, 3), 20)
           << pad(percent(s.share(s.underflow)), 10) << pad(percent(s.share(s.subnormal)), 9)
           << pad(percent(s.share(s.saturated)), 10) << fmtg(s.sqnr_db, 3) << "\n";
    }
}

/// Per-token figures of a sequence output (llama.cpp's --kl-divergence definitions).
void print_tokens(std::ostream& os, const TokenStats& t) {
    os << "    tokens: " << t.positions << " positions compared (" << t.masked << " masked; T " << t.length << ", V "
       << t.vocab << "): mean KLD " << fmtg(t.mean_kld, 4) << ", p99 " << fmtg(t.p99_kld, 4) << ", max "
       << fmtg(t.max_kld, 4) << "; same top-1 " << fmtg(100 * t.same_top, 4) << "%, top-5 overlap "
       << fmtg(100 * t.top5_overlap, 4) << "%, RMS dp " << fmtg(t.rms_dp, 3) << "\n";
    if (t.label_tokens > 0)
        os << "    labels: " << t.label_tokens << " tokens, cross-entropy " << fmtg(t.ref_ce, 5) << " -> "
           << fmtg(t.amp_ce, 5) << ", perplexity " << fmtg(t.ref_ppl, 5) << " -> " << fmtg(t.amp_ppl, 5) << "\n";
    if (t.boundary.empty()) return;
    os << "    boundary positions (smallest reference top-2 margins):";
    for (size_t i = 0; i < std::min<size_t>(5, t.boundary.size()); ++i)
        os << " " << safe(t.boundary[i].sample) << "@" << t.boundary[i].position << "("
           << fmtg(t.boundary[i].ref_margin, 2) << ")";
    os << "\n";
}

/// One AMP pass against the reference: criteria, per-token figures, worst samples, flips.
void print_comparison(std::ostream& os, const Comparison& c, bool color) {
    // |delta| is measured on finite samples only: with none, 0 would read as a perfect pass
    const bool none_finite = !c.deltas.empty() && std::none_of(c.deltas.begin(), c.deltas.end(),
                                                               [](const SampleDelta& d) { return d.finite; });
    os << "\n"
       << paint(to_string(c.precision) + " vs fp32", "1", color) << ": " << verdict_text(c.verdict, color)
       << (none_finite ? "  (no finite sample: no |delta| measured)\n"
                       : "  (max |delta| " + fmtg(c.max_abs_delta) + ", max rel " + fmtg(c.max_rel_delta) + ")\n");
    for (const auto& k : c.criteria) {
        os << "    " << (k.passed ? paint("pass", "32", color) : paint("FAIL", "31", color)) << "  " << pad(k.name, 16)
           << safe(k.detail);
        if (!k.passed && !k.samples.empty()) {
            os << " [";
            for (size_t i = 0; i < std::min<size_t>(5, k.samples.size()); ++i)
                os << (i ? " " : "") << safe(k.samples[i]);
            if (k.samples.size() > 5) os << " ...";
            os << "]";
        }
        os << "\n";
    }
    if (c.tokens) print_tokens(os, *c.tokens);
    std::vector<const SampleDelta*> worst;
    for (const auto& d : c.deltas) worst.push_back(&d);
    std::sort(worst.begin(), worst.end(), [](auto* a, auto* b) {  // a strict order even for NaN read from a file
        if (a->finite != b->finite) return !a->finite;
        const double x = std::isnan(a->abs) ? INFINITY : a->abs, y = std::isnan(b->abs) ? INFINITY : b->abs;
        return x > y;
    });
    os << "    worst samples:";
    for (size_t i = 0; i < std::min<size_t>(5, worst.size()); ++i)
        os << " " << safe(worst[i]->sample) << "(" << safe(worst[i]->tag) << ", "
           << (worst[i]->finite ? fmtg(worst[i]->abs) : "non-finite") << ")";
    os << "\n";
    if (!c.flips.empty()) {
        os << "    flips:";
        for (size_t i = 0; i < std::min<size_t>(8, c.flips.size()); ++i) {
            const auto& f = c.flips[i];
            os << " " << safe(f.sample) << (f.position >= 0 ? "@" + std::to_string(f.position) : "") << "("
               << safe(f.tag) << " " << decision_label(f.ref) << "->" << decision_label(f.amp) << ", margin "
               << fmtg(f.ref_margin, 2) << ")";
        }
        if (c.flips.size() > 8) os << " ...";
        os << "\n";
    }
}

namespace {

/// The ranks of a run under torchrun: which samples each ran, where, how long.
void print_ranks(std::ostream& os, const std::vector<RankInfo>& ranks) {
    os << "  ranks   " << ranks.size() << " (torchrun)\n";
    for (const auto& k : ranks) {
        os << "    rank " << k.rank << "  " << safe(k.host) << "  " << safe(k.device) << "  samples ";
        if (k.samples > 0)
            os << k.first_sample << "-" << (k.first_sample + k.samples - 1);
        else
            os << "none";
        os << " (" << k.samples << ")  " << fmtg(k.seconds, 3) << " s\n";
    }
}

}  // namespace

void print_run_summary(std::ostream& os, const RunResult& r, bool layers, bool color) {
    os << "run " << safe(r.run_id) << "\n"
       << "  model   " << safe(r.model.source) << " (" << safe(r.model.kind) << ", " << r.model.parameters
       << " parameters, sha256 " << safe(r.model.sha256.substr(0, 12)) << ", " << safe(r.model.mode) << ")\n"
       << "  probes  " << safe(r.probes.source) << " (" << r.probes.count << " samples:";
    for (const auto& [t, n] : r.probes.tags) os << " " << n << " " << safe(t);
    os << ")\n  device  " << safe(r.backend.device) << " (" << safe(r.backend.kind) << ", torch "
       << safe(r.backend.torch_version) << ")\n"
       << "  criteria fixed at " << safe(r.criteria.fixed_at) << ": atol " << r.criteria.atol << ", rtol "
       << r.criteria.rtol << ", max flips " << r.criteria.max_flips << ", tie rule " << to_string(r.criteria.tie_rule)
       << "\n";
    if (std::any_of(r.comparisons.begin(), r.comparisons.end(),
                    [](const Comparison& c) { return c.tokens.has_value(); }))
        os << "  per position: max flip rate " << r.criteria.max_flip_rate << ", max mean KLD "
           << r.criteria.max_mean_kld << ", min same top-1 " << r.criteria.min_same_top
           << (r.criteria.mask_input.empty() ? "" : ", mask input " + safe(r.criteria.mask_input)) << "\n";
    if (r.spec.has_pass(Precision::Fp8Delayed))
        os << "  fp8-delayed: amax history " << r.spec.fp8_amax_history << " batches, margin " << r.spec.fp8_margin
           << " (scale = 448 / max(history) / 2^" << r.spec.fp8_margin << ")\n";
    if (!r.spec.advised_from.empty())
        os << "  verifies the FP32 set advised for run " << safe(r.spec.advised_from) << "\n";
    if (!r.ranks.empty()) print_ranks(os, r.ranks);
    for (const auto& w : r.warnings) os << "  warning: " << safe(w) << "\n";
    for (const auto& p : r.passes) {
        os << "\n" << paint("pass " + to_string(p.precision), "1", color);
        if (!p.keep_fp32.empty()) {
            os << " (fp32 regions:";
            for (const auto& k : p.keep_fp32) os << " " << safe(k);
            os << ")";
        }
        if (p.precision == Precision::Mxfp8 && r.spec.mx_scaling != MxScaling::Floor)
            os << " (" << to_string(r.spec.mx_scaling) << " block scales)";
        if (is_fp8(p.precision) && r.spec.fp8_all_gemms)
            os << " (all matrix products quantized, not only linear layers)";
        else if (p.precision == Precision::Bf16 && r.spec.fp8_what_if && r.spec.fp8_all_gemms)
            os << " (the what-if counts every matrix product, not only linear layers)";
        if (is_fp8(p.precision) && !r.spec.keep_bf16.empty()) {
            os << " (kept in BF16:";
            for (const auto& k : r.spec.keep_bf16) os << " " << safe(k);
            os << ")";
        }
        os << ": " << fmtg(p.seconds, 3) << " s";
        if (p.quality) os << ", quality " << fmtg(*p.quality, 4);
        os << ", " << p.nonfinite_samples.size() << " non-finite samples\n";
        if (p.origin) {
            os << "  non-finite values born at " << safe(p.origin->stage);
            if (p.origin->stage != "input")
                os << " op #" << p.origin->index << " " << safe(p.origin->op) << " in module '"
                   << safe(p.origin->module) << "'";
            os << " for " << p.origin->samples.size() << " samples:";
            for (size_t i = 0; i < std::min<size_t>(6, p.origin->samples.size()); ++i)
                os << " " << safe(p.origin->samples[i]);
            if (p.origin->samples.size() > 6) os << " ...";
            os << "\n";
        }
        if (p.real_gemm) print_real_gemm(os, p, *p.real_gemm);
        if (!is_fp8(p.precision) && !p.fp8_operands.empty()) print_what_if_summary(os, p);
        if (layers && !p.layers.empty()) print_layers(os, p, color);
        if (layers && !p.fp8_operands.empty()) print_fp8_operands(os, p);
    }
    if (r.verdict == Verdict::InvalidReference) {
        os << "\n"
           << paint("verdict: invalid_reference", "1;31", color) << " - the FP32 reference itself is not finite for:";
        if (!r.passes.empty())
            for (const auto& s : r.passes.front().nonfinite_samples) os << " " << safe(s);
        os << "\n";
        return;
    }
    for (const auto& c : r.comparisons) print_comparison(os, c, color);
    os << "\nverdict: " << verdict_text(r.verdict, color) << "\n";
}

}  // namespace ampscope::cli
