// SPDX-License-Identifier: MIT
// Domain rules shared by every front end (rules.h).
#include "ampscope/engine/rules.h"
#include "ampscope/engine/vocabulary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "ampscope/engine/compare.h"

namespace ampscope {

// ---- number formats ---------------------------------------------------------------------------

double format_max(Precision format) {
    switch (format) {
        case Precision::Fp16: return 65504.0;
        case Precision::Bf16: return 3.3895313892515355e38;  // (2 - 2^-7) * 2^127
        case Precision::Fp8:                                 // E4M3, the format of an FP8 pass's GEMM operands
        case Precision::Fp8Rowwise:
        case Precision::Fp8Delayed:
        case Precision::Mxfp8: return 448.0;
        case Precision::Nvfp4: return 6.0;  // E2M1
        case Precision::Fp32: break;
    }
    return double(std::numeric_limits<float>::max());
}

Precision headroom_format(Precision pass) {
    // an FP8 pass's op outputs are BF16 (its GEMMs' operands are E4M3, their products BF16)
    return pass == Precision::Fp32 ? Precision::Fp16 : is_fp8(pass) ? Precision::Bf16 : pass;
}

double headroom(double absmax, Precision pass) {
    return absmax > 0 ? std::log2(format_max(headroom_format(pass)) / absmax) : std::numeric_limits<double>::infinity();
}

// ---- comparison -------------------------------------------------------------------------------

double reference_margin(const PassResult& ref, size_t i) {
    const size_t k = size_t(std::max(ref.num_outputs, 0));
    if (k == 0 || (i + 1) * k > ref.outputs.size()) return 0.0;
    return margin(ref.outputs.data() + i * k, int(k));
}

// ---- training ---------------------------------------------------------------------------------

double scale_after(const TrainStep& step, const ScalerOptions& scaler) {
    if (!scaler.enabled) return 1.0;
    if (step.skipped) return step.scale * scaler.backoff_factor;
    if (step.growth_tracker == 0) return step.scale * scaler.growth_factor;
    return step.scale;
}

TrainTotals training_totals(const std::vector<TrainStep>& steps, const ScalerOptions& scaler) {
    TrainTotals t;
    t.iterations = int(steps.size());
    for (const auto& s : steps) t.skipped += s.skipped;
    t.effective_updates = steps.empty() ? 0 : steps.back().effective_updates;
    t.final_scale = steps.empty() ? (scaler.enabled ? scaler.init_scale : 1.0) : scale_after(steps.back(), scaler);
    return t;
}

// ---- the bench gate ---------------------------------------------------------------------------

BenchPolicy bench_policy(const BenchSpec& spec, const RunInputs& inputs, Precision p) {
    BenchPolicy policy;
    policy.model_sha256 = inputs.model.sha256;
    policy.weights_sha256 = inputs.model.weights_sha256;
    policy.probes_sha256 = inputs.probes.sha256;
    policy.device = inputs.backend.device;
    policy.precision = p;
    policy.mode = to_string(spec.mode);
    policy.keep_fp32 = spec.keep_fp32;
    return policy;
}

namespace {

std::string regions(const std::set<std::string>& s) {
    if (s.empty()) return "none";
    std::string out;
    for (const auto& g : s) out += (out.empty() ? "" : ", ") + g;
    return "[" + out + "]";
}

std::set<std::string> region_set(const BenchPolicy& p) {
    return {p.keep_fp32.begin(), p.keep_fp32.end()};
}

std::string short_hash(const std::string& h) {
    return h.size() > 12 ? h.substr(0, 12) : h;
}

/// Each way the validated policy `v` differs from the benchmarked `p`, in words (none: the same).
std::vector<std::string> differences(const BenchPolicy& v, const BenchPolicy& p) {
    std::vector<std::string> d;
    auto differs = [&](const char* what, const std::string& validated, const std::string& benched) {
        if (validated != benched)
            d.push_back(std::string(what) + " (validated " + validated + ", benchmarked " + benched + ")");
    };
    differs("model file", short_hash(v.model_sha256), short_hash(p.model_sha256));
    differs("weights", short_hash(v.weights_sha256), short_hash(p.weights_sha256));
    differs("probe set", short_hash(v.probes_sha256), short_hash(p.probes_sha256));
    differs("device", v.device, p.device);
    differs("mode", v.mode, p.mode);
    differs("FP32 regions", regions(region_set(v)), regions(region_set(p)));
    return d;
}

}  // namespace

std::string describe(const BenchPolicy& p) {
    return to_string(p.precision) + " with FP32 regions " + regions(region_set(p)) + ", mode " + p.mode + ", on " +
           p.device;
}

Validation choose_validation(const BenchPolicy& p, const std::vector<ValidationCandidate>& newest_first,
                             const std::string& source) {
    Validation v;
    v.precision = p.precision;
    const std::string what = describe(p);
    const ValidationCandidate* nearest = nullptr;
    size_t nearest_diffs = 0;
    for (const auto& c : newest_first) {
        const auto d = differences(c.policy, p);
        if (d.empty()) {
            if (c.review.status == ReviewStatus::Rejected) {
                v.refusal = "run " + c.run + " validated exactly this policy (" + what +
                            ") but its review is rejected" +
                            (c.review.by.empty() ? std::string() : " (by " + c.review.by + ")") +
                            ": a human rejection is not overridden by an older run; record a new validation run";
                return v;
            }
            v.run = c.run;
            v.review = c.review;
            return v;
        }
        if (!nearest || d.size() < nearest_diffs) {
            nearest = &c;
            nearest_diffs = d.size();
        }
    }
    v.refusal = source + " holds no accepted validation run of " + what;
    if (nearest) {
        std::string d;
        for (const auto& x : differences(nearest->policy, p)) d += (d.empty() ? "" : "; ") + x;
        v.refusal +=
            "; the nearest, run " + nearest->run + ", accepted " + to_string(p.precision) + " but differs in " + d;
    }
    return v;
}

bool all_validated(const std::vector<Validation>& validations) {
    bool validated = !validations.empty();
    for (const auto& v : validations) validated = validated && !v.run.empty();
    return validated;
}

}  // namespace ampscope
