// SPDX-License-Identifier: MIT
// An fp8 / fp8-rowwise pass run again with real FP8 GEMMs (torch._scaled_mm), set beside its
// simulated GEMMs and the FP32 reference (issue 30; ampscope/engine/types.h RealGemmCheck).
#include <cmath>
#include <cstring>
#include <string>

#include "ampscope/engine/run.h"
#include "precision/fp8_pass.h"
#include "run/comparison.h"

namespace ampscope::detail {

bool ComparisonRun::wants_real_gemm(Precision p) const {
    if (p != Precision::Fp8 && p != Precision::Fp8Rowwise) return false;
    switch (spec.fp8_real_gemm) {
        case RealGemm::On: return true;
        case RealGemm::Off: return false;
        case RealGemm::Auto: return res.backend.kind == "cuda" && real_gemm_unavailable(p, res.backend).empty();
    }
    return false;
}

RealGemmCheck ComparisonRun::real_gemm_check(const PassResult& ref, const PassResult& sim, PassOptions o) {
    RealGemmCheck c;
    c.reason = real_gemm_unavailable(sim.precision, res.backend);
    if (!c.reason.empty()) {
        res.warnings.push_back(to_string(sim.precision) + ": real FP8 GEMMs not run: " + c.reason);
        return c;
    }
    o.inspect = false;  // the simulated pass has the statistics; this one only its outputs
    o.fp8_real_gemm = true;
    o.module_outputs = nullptr;
    const PassResult real = pass(o, false);
    c.ran = true;
    c.kernel = "aten::_scaled_mm on " + res.backend.device +
               (res.backend.kind == "cpu" ? std::string()
                                          : " (" + res.backend.name + ", sm " + res.backend.compute_capability + ")");
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
