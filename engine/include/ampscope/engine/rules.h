// SPDX-License-Identifier: MIT
#pragma once
/// \file rules.h
/// Domain rules that every front end applies the same way: the CLI, the GUI and the store
/// call these instead of keeping copies. Torch-free (part of ampscope_core).

#include <string>
#include <vector>

#include "ampscope/engine/train.h"
#include "ampscope/engine/types.h"
#include "ampscope/engine/vocabulary.h"

namespace ampscope {

// ---- number formats ---------------------------------------------------------------------------

/// The largest finite value of a format: 65504 (FP16), 3.3895313892515355e38 (BF16), 448 (FP8: E4M3),
/// 3.4028234663852886e38 (FP32).
double format_max(Precision format);

/// The format a pass's headroom is measured against: an AMP pass's own; for the FP32
/// reference, FP16 (the format that overflows first, where the reference tells how close
/// the model comes to it); for an FP8 pass BF16, the format of its op outputs.
Precision headroom_format(Precision pass);

/// Headroom of an op output in a pass, in powers of two: log2(format max / absmax) for the
/// pass's headroom_format; +infinity for absmax 0; negative when it overflows the format.
double headroom(double absmax, Precision pass);

// ---- comparison -------------------------------------------------------------------------------

/// The reference margin of sample `i` (top-1 minus top-2 of the reference pass's finite scores,
/// as a flip records it): 0 for a regressor's single score, for fewer than two finite scores,
/// and for a sample the pass holds no scores of.
double reference_margin(const PassResult& ref, size_t i);

// ---- training ---------------------------------------------------------------------------------

/// What a training run's steps add up to.
struct TrainTotals {
    int iterations = 0;         ///< steps run
    int effective_updates = 0;  ///< optimizer updates applied (cumulative over a resume)
    int skipped = 0;            ///< steps whose update was skipped (non-finite gradients)
    double final_scale = 1.0;   ///< GradScaler's scale after the last step
};

/// GradScaler's scale after `step`'s update: backed off after a skipped step, grown when the
/// step completed a growth interval (its growth tracker restarted at 0), else unchanged. Steps
/// recorded without a growth tracker (-1) are taken as not grown. 1 without a scaler.
double scale_after(const TrainStep& step, const ScalerOptions& scaler);

/// Totals of `steps` (in order) of a run under `scaler`. No steps: the initial scale.
TrainTotals training_totals(const std::vector<TrainStep>& steps, const ScalerOptions& scaler);

// ---- the bench gate ---------------------------------------------------------------------------

/// A human review of a recorded run.
struct Review {
    ReviewStatus status = ReviewStatus::Open;  ///< stored and shown by its name (vocabulary.h)
    std::string by, at;
};

/// What a benchmark times, which a validation run must have passed exactly.
struct BenchPolicy {
    std::string model_sha256, weights_sha256, probes_sha256, device;
    Precision precision = Precision::Fp16;
    std::string mode = "eval";           ///< eval | train
    std::vector<std::string> keep_fp32;  ///< FP32 regions (globs), compared as a set
};

/// The policy a benchmark of `spec` times for AMP precision `p`, on the inputs identified.
BenchPolicy bench_policy(const BenchSpec& spec, const RunInputs& inputs, Precision p);

/// The policy in words, for messages: "fp16 with FP32 regions [fc1], mode eval, on cpu".
std::string describe(const BenchPolicy& policy);

/// A completed comparison run that accepted a precision, with the policy it ran under.
struct ValidationCandidate {
    std::string run;
    BenchPolicy policy;
    Review review;
};

/// The bench gate's answer for one precision.
struct Validation {
    Precision precision = Precision::Fp16;
    std::string run;      ///< the validation run relied on; empty when none qualifies
    Review review;        ///< that run's human review
    Criteria criteria;    ///< what it was accepted under (how strict)
    std::string refusal;  ///< why none qualifies (empty when `run` is set)
};

/// The validation rule: the newest candidate (they come newest first) whose policy is exactly
/// the benchmarked one: model file and weights hashes, probe-set hash, device, mode, and the
/// FP32 regions (as a set of globs). When that run's review is `rejected`, nothing validates
/// (an older run does not stand in for it). `refusal` says why none does, naming the nearest
/// candidate and each way it differs; `source` (the database) is named in it. `criteria` is
/// left for the caller to fill from the chosen run.
Validation choose_validation(const BenchPolicy& policy, const std::vector<ValidationCandidate>& newest_first,
                             const std::string& source);

/// A benchmark is validated when every precision it times has a validation run.
bool all_validated(const std::vector<Validation>& validations);

}  // namespace ampscope
