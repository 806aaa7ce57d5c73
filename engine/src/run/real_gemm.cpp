// SPDX-License-Identifier: MIT
// An fp8 / fp8-rowwise pass run again with real FP8 GEMMs (torch._scaled_mm), set beside its
// simulated GEMMs and the FP32 reference (issue 30; ampscope/engine/types.h RealGemmCheck), and
// the real GEMM of a linear (real_linear); the warnings an FP8 pass's GEMM counts give.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/run.h"
#include "precision/fp8.h"
#include "precision/fp8_pass.h"
#include "precision/precision.h"
#include "run/comparison.h"
#include "run/pass.h"

namespace ampscope::detail {

namespace {

/// The warning of FP8 pass `p` that left the model's own products unquantized ("" when none);
/// `training`: a training step's forward said it.
std::string fp8_coverage_warning(Precision p, const Fp8GemmCounts& c, bool training = false) {
    if (c.unquantized() == 0) return {};
    std::string calls;
    if (c.addmm) calls += "aten::addmm " + std::to_string(c.addmm);
    if (c.mm) calls += std::string(calls.empty() ? "" : ", ") + "aten::mm " + std::to_string(c.mm);
    // train --fp8-all-gemms is refused with nvfp4: the training warning does not offer it there
    const std::string remedy = training && p == Precision::Nvfp4
                                   ? "train --fp8-all-gemms quantizes them in fp8, fp8-rowwise, fp8-delayed and mxfp8; "
                                     "NVIDIA's NVFP4 recipe defines its linear layers' GEMMs only"
                                   : "--fp8-all-gemms quantizes them too";
    return (training ? to_string(p) + " training (its first forward)" : "FP8 passes (" + to_string(p) + " first)") +
           ": " + std::to_string(c.unquantized()) + " matrix products of the model ran unquantized in BF16 (" + calls +
           ") beside " + std::to_string(c.quantized) +
           " quantized linear-layer calls: the recipes quantize linear layers (aten::linear) only, as torchao and "
           "Transformer Engine do; a model written with Conv1D or torch.mm (transformers' GPT-2) keeps those "
           "GEMMs out of FP8 (" +
           remedy + ")";
}

/// The warning of an FP8 pass (or a training step's first forward, `training`) in which no GEMM of
/// the model ran in FP8: the recipe then changed nothing, the pass is BF16 autocast throughout.
std::string fp8_nothing_warning(Precision p, const Fp8GemmCounts& c, bool training) {
    if (c.quantized > 0 || c.products > 0) return {};
    return to_string(p) + (training ? " training (its first forward)" : "") +
           ": no GEMM of the model ran in FP8 (no linear layer, or with --fp8-all-gemms no matrix product or "
           "convolution, outside the modules kept in BF16): the recipe changed nothing, and what ran is BF16 "
           "autocast throughout";
}

/// The warning of a pass of all GEMMs that left convolutions in BF16 (recipe `p`'s scales are
/// finer than per-tensor), "" when it left none.
std::string fp8_conv_warning(Precision p, const Fp8GemmCounts& c) {
    std::string w;
    if (c.convs_bf16 > 0)
        w = to_string(p) + ": " + std::to_string(c.convs_bf16) +
            " convolution calls ran unquantized under autocast (BF16; a decomposed program's aten::convolution in "
            "its input's dtype where autocast leaves it, as on the CPU): --fp8-all-gemms quantizes convolutions in "
            "the recipes of per-tensor scales only (fp8, fp8-delayed, as cuDNN's FP8 convolution takes them); " +
            to_string(p) + "'s finer scales have no convolution kernel to follow";
    if (c.convs_transposed > 0)
        w += (w.empty() ? to_string(p) + ": " : "; and ") + std::to_string(c.convs_transposed) +
             " transposed convolution calls ran unquantized under autocast: no recipe quantizes a transposed "
             "convolution";
    return w;
}

/// The warning of an FP8 pass whose BF16 list has globs that left no GEMM out of FP8 (their
/// modules run none the pass quantizes), naming each as keep_bf16[i]; "" when every glob did.
std::string fp8_kept_warning(Precision p, const Fp8GemmCounts& c, const std::vector<std::string>& keep_bf16,
                             bool all_gemms) {
    std::string unused;
    for (size_t i = 0; i < keep_bf16.size(); ++i)
        if (std::none_of(c.kept_bf16.begin(), c.kept_bf16.end(),
                         [&](const std::string& m) { return bool(fp32_region_of(m, {keep_bf16[i]})); }))
            unused += (unused.empty() ? "" : ", ") + ("'" + keep_bf16[i] + "' (keep_bf16[" + std::to_string(i) + "])");
    if (unused.empty()) return {};
    return to_string(p) + ": kept in BF16 " + unused + " but left no GEMM out of FP8: " +
           (all_gemms ? "its modules ran no linear layer, matrix product or convolution the pass quantizes"
                      : "its modules ran no linear layer (the recipes quantize linear layers only; "
                        "--fp8-all-gemms quantizes matrix products too)");
}

/// Why recipe `p` cannot run real FP8 GEMMs on `device`, "" when it can: torch._scaled_mm takes
/// tensorwise scales on the CPU, tensorwise and rowwise on CUDA devices with FP8 (compute
/// capability >= 8.9); the other recipes have no such check.
std::string real_gemm_unavailable(Precision p, const BackendReport& b) {
    if (p != Precision::Fp8 && p != Precision::Fp8Rowwise)
        return to_string(p) + " has no real-GEMM check (torch._scaled_mm runs the fp8 and fp8-rowwise recipes)";
    if (b.kind == "cpu")
        return p == Precision::Fp8Rowwise ? "PyTorch's CPU torch._scaled_mm takes tensorwise scales only, not rowwise"
                                          : "";
    if (b.kind != "cuda")
        return b.device + " (" + b.kind + ") is not checked: ROCm's FP8 GEMMs take the fnuz formats, not E4M3FN";
    const auto dot = b.compute_capability.find('.');
    int major = 0, minor = 0;
    try {
        major = std::stoi(b.compute_capability.substr(0, dot));
        minor = dot == std::string::npos ? 0 : std::stoi(b.compute_capability.substr(dot + 1));
    } catch (const std::exception&) {
        return b.device + ": compute capability unknown ('" + b.compute_capability + "')";
    }
    if (major * 10 + minor < 89)
        return b.device + " (" + b.name + ", compute capability " + b.compute_capability +
               ") has no FP8 GEMMs; they need compute capability 8.9 or newer";
    return "";
}

}  // namespace

void add_fp8_coverage_warnings(std::vector<std::string>& warnings, Precision p, const Fp8GemmCounts& c,
                               const std::vector<std::string>& keep_bf16, bool all_gemms) {
    if (!is_fp8(p)) return;
    for (auto w : {fp8_nothing_warning(p, c, true), fp8_coverage_warning(p, c, true),
                   fp8_kept_warning(p, c, keep_bf16, all_gemms), fp8_conv_warning(p, c)})
        if (!w.empty()) warnings.push_back(std::move(w));
}

void add_fp8_warnings(std::vector<std::string>& warnings, const PassResult& pass, const Fp8GemmCounts& c,
                      const PassOptions& o, bool first_fp8) {
    const Precision p = pass.precision;
    if (p == Precision::Bf16 && o.fp8_what_if && o.inspect && pass.fp8_operands.empty())
        warnings.push_back(std::string("fp8 what-if: no GEMM of the model ran in the BF16 pass (no linear layer") +
                           (o.fp8_all_gemms ? ", matrix product or convolution" : "") +
                           ", outside the modules kept in FP32): no recipe would quantize anything, and the what-if "
                           "has no operand statistics to show");
    if (!is_fp8(p)) return;
    if (first_fp8)  // every recipe alike: said once, by the run's first FP8 pass
        for (auto w : {fp8_nothing_warning(p, c, false), fp8_coverage_warning(p, c),
                       fp8_kept_warning(p, c, o.keep_bf16, o.fp8_all_gemms)})
            if (!w.empty()) warnings.push_back(std::move(w));
    if (auto w = fp8_conv_warning(p, c); !w.empty()) warnings.push_back(std::move(w));
}

at::Tensor real_linear(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias, Precision p,
                       at::ScalarType out_dtype) {
    const auto spec = recipe_spec(p);  // along K, as the simulated pass
    const auto [xd, xs] = to_fp8(rows_of(x), spec);
    const auto [wd, ws] = to_fp8(w, spec);
    // torchao's addmm_float8_unwrapped: inverse scales, a rowwise weight's as [1, N]
    const auto wi = p == Precision::Fp8Rowwise ? ws.reciprocal().reshape({1, -1}) : ws.reciprocal();
    auto out = at::_scaled_mm(xd, wd.t(), xs.reciprocal(), wi, std::nullopt, std::nullopt, out_dtype,
                              /*use_fast_accum=*/true);
    auto sizes = x.sizes().vec();
    sizes.back() = w.size(0);
    out = out.reshape(sizes);
    return bias && bias->defined() ? out + bias->to(out.scalar_type()) : out;
}

bool ComparisonRun::wants_real_gemm(Precision p) const {
    if (p != Precision::Fp8 && p != Precision::Fp8Rowwise) return false;
    switch (spec.fp8_real_gemm) {
        case RealGemm::On: return true;
        case RealGemm::Off: return false;
        case RealGemm::Auto:  // not under torchrun: the other ranks run the recorded passes only
            return !pass_runner && res.backend.kind == "cuda" && real_gemm_unavailable(p, res.backend).empty();
    }
    return false;
}

RealGemmCheck ComparisonRun::real_gemm_check(const PassResult& ref, const PassResult& sim, PassOptions o) {
    RealGemmCheck c;
    c.reason = pass_runner ? "not run under torchrun (the ranks run the recorded passes only)"
                           : real_gemm_unavailable(sim.precision, res.backend);
    const auto not_run = [&](std::string why) {
        c.reason = std::move(why);
        res.warnings.push_back(to_string(sim.precision) + ": real FP8 GEMMs not run: " + c.reason);
        return c;
    };
    if (!c.reason.empty()) return not_run(c.reason);
    o.inspect = false;  // the simulated pass has the statistics; this one only its outputs
    o.fp8_real_gemm = true;
    o.module_outputs = nullptr;
    Fp8GemmCounts counts;
    o.gemm_counts = &counts;
    PassResult real;
    try {
        real = pass(o, false);
    } catch (const Cancelled&) {
        throw;
    } catch (const std::exception& e) {  // the simulated pass stands; the check says why it failed
        return not_run("torch._scaled_mm failed: " + first_line(e.what()));
    }
    c.ran = true;
    c.kernel = "aten::_scaled_mm on " + res.backend.device +
               (res.backend.kind == "cpu" ? std::string()
                                          : " (" + res.backend.name + ", sm " + res.backend.compute_capability + ")");
    if (counts.real_emulated > 0)
        c.kernel += "; " + std::to_string(counts.real_emulated) + " of " + std::to_string(counts.quantized) +
                    " linear calls emulated (K or N not a multiple of 16, which CUDA's kernel needs)";
    if (counts.products_emulated > 0)
        c.kernel += "; " + std::to_string(counts.products_emulated) + " of " + std::to_string(counts.products) +
                    " matrix products emulated (batched, a convolution, or an addmm whose self is not a bias: no real "
                    "kernel here)";
    c.outputs = real.outputs;
    c.seconds = real.seconds;
    for (size_t i = 0; i < c.outputs.size() && i < sim.outputs.size(); ++i) {
        const float a = c.outputs[i], b = sim.outputs[i];
        if (std::memcmp(&a, &b, sizeof a) != 0) ++c.differing;
        if (std::isfinite(a) && std::isfinite(b)) c.max_abs_diff = std::max(c.max_abs_diff, double(std::fabs(a - b)));
    }
    c.decisions_differ = int(compare_pass(sim, real).flips.size());
    c.flips = int(compare_pass(ref, real).flips.size());
    return c;
}

}  // namespace ampscope::detail
