// SPDX-License-Identifier: MIT
// An fp8 / fp8-rowwise pass run again with real FP8 GEMMs (torch._scaled_mm), set beside its
// simulated GEMMs and the FP32 reference (issue 30; ampscope/engine/types.h RealGemmCheck).
#include <cmath>
#include <cstring>
#include <string>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/run.h"
#include "precision/fp8_pass.h"
#include "run/comparison.h"
#include "run/pass.h"

namespace ampscope::detail {

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
