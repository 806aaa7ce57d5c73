// SPDX-License-Identifier: MIT
// The domain rules every front end calls (rules.h), each with the cases where the copies the
// CLI and the GUI kept before disagreed with the engine.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ampscope/engine/compare.h"
#include "ampscope/engine/rules.h"

using namespace ampscope;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

PassResult pass_of(int num_outputs, std::vector<float> outputs) {
    PassResult p;
    p.num_outputs = num_outputs;
    p.outputs = std::move(outputs);
    return p;
}

TrainStep step(int i, double scale, bool skipped, int effective, int tracker) {
    TrainStep s;
    s.step = i;
    s.scale = scale;
    s.skipped = s.found_inf = skipped;
    s.effective_updates = effective;
    s.growth_tracker = tracker;
    return s;
}

ValidationCandidate candidate(const std::string& run, const BenchPolicy& p, ReviewStatus review = ReviewStatus::Open) {
    return {run, p, {review, review == ReviewStatus::Open ? "" : "rita", ""}};
}
}  // namespace

// ---- formats --------------------------------------------------------------------------------

TEST(Rules, FormatLimitsAreTheFormatsOwn) {
    EXPECT_EQ(format_max(Precision::Fp16), 65504.0);
    EXPECT_EQ(format_max(Precision::Bf16), 3.3895313892515355e38);  // the CLI had 3.3895e38
    EXPECT_EQ(format_max(Precision::Fp32), double(std::numeric_limits<float>::max()));
    EXPECT_EQ(headroom_format(Precision::Fp32), Precision::Fp16);  // the reference against the tightest format
    EXPECT_EQ(headroom_format(Precision::Bf16), Precision::Bf16);
}

TEST(Rules, HeadroomInPowersOfTwo) {
    EXPECT_EQ(headroom(65504.0, Precision::Fp16), 0.0);
    EXPECT_EQ(headroom(65504.0 / 8, Precision::Fp16), 3.0);
    EXPECT_EQ(headroom(65504.0 * 2, Precision::Fp32), -1.0);  // an FP32 pass measured against FP16
    // BF16's exact maximum has no headroom (log2(3.3895e38 / max) would be -1.3e-5: it read as overflowing)
    EXPECT_EQ(headroom(3.3895313892515355e38, Precision::Bf16), 0.0);
    EXPECT_TRUE(std::isinf(headroom(0.0, Precision::Fp16)));
    EXPECT_GT(headroom(0.0, Precision::Fp16), 0.0);
}

// ---- reference margin -----------------------------------------------------------------------

TEST(Rules, ReferenceMarginIsTheOneAFlipRecords) {
    const auto ref = pass_of(3, {1.0f, 3.0f, 2.5f, 0.0f, 0.0f, 1.0f});
    EXPECT_DOUBLE_EQ(reference_margin(ref, 0), 0.5);
    EXPECT_DOUBLE_EQ(reference_margin(ref, 1), 1.0);
    EXPECT_EQ(reference_margin(ref, 2), 0.0);  // no such sample
    // the flip compare() records for sample 0 carries the same margin
    auto amp = ref;
    amp.precision = Precision::Fp16;
    amp.outputs[2] = 3.5f;
    Truth truth;
    truth.labels = {1, 2};
    const auto c = compare(ref, amp, {{"a", "ordinary"}, {"b", "ordinary"}}, truth, Criteria{});
    ASSERT_EQ(c.flips.size(), 1u);
    EXPECT_EQ(c.flips[0].ref_margin, reference_margin(ref, 0));
}

TEST(Rules, ReferenceMarginOverFiniteScoresOnly) {
    // The GUI's copy counted +inf as the top score (margin inf) and gave inf for one finite
    // score next to a NaN; a flip records the margin of the finite scores.
    EXPECT_DOUBLE_EQ(reference_margin(pass_of(3, {kInf, 2.0f, 1.0f}), 0), 1.0);
    EXPECT_EQ(reference_margin(pass_of(2, {float(kNaN), 3.0f}), 0), 0.0);
    EXPECT_DOUBLE_EQ(reference_margin(pass_of(3, {float(kNaN), 3.0f, 1.0f}), 0), 2.0);
}

TEST(Rules, ARegressorHasNoMargin) {
    // The GUI's copy showed |score| for a single output; there is no top-2 to compare with.
    EXPECT_EQ(reference_margin(pass_of(1, {-2.5f, 4.0f}), 0), 0.0);
    EXPECT_EQ(reference_margin(pass_of(1, {-2.5f, 4.0f}), 1), 0.0);
    EXPECT_EQ(reference_margin(pass_of(0, {}), 0), 0.0);
}

// ---- training totals ------------------------------------------------------------------------

TEST(Rules, TrainingTotalsCountSkippedStepsAndUpdates) {
    ScalerOptions sc;
    const std::vector<TrainStep> steps = {step(0, 65536, false, 1, 1), step(1, 65536, true, 1, 0),
                                          step(2, 32768, false, 2, 1)};
    const auto t = training_totals(steps, sc);
    EXPECT_EQ(t.iterations, 3);
    EXPECT_EQ(t.skipped, 1);
    EXPECT_EQ(t.effective_updates, 2);
    EXPECT_EQ(t.final_scale, 32768.0);
}

TEST(Rules, FinalScaleIsTheScaleAfterTheLastStep) {
    // `show` reported the scale the last step ran with; `train` the scaler's scale after it.
    ScalerOptions sc;
    sc.growth_interval = 2;
    EXPECT_EQ(training_totals({step(0, 1024, true, 0, 0)}, sc).final_scale, 512.0);  // backed off
    EXPECT_EQ(training_totals({step(0, 1024, false, 1, 1), step(1, 1024, false, 2, 0)}, sc).final_scale,
              2048.0);                                                                  // grown: tracker restarted
    EXPECT_EQ(training_totals({step(0, 1024, false, 1, -1)}, sc).final_scale, 1024.0);  // no tracker recorded
    EXPECT_EQ(training_totals({}, sc).final_scale, sc.init_scale);
    sc.enabled = false;
    EXPECT_EQ(training_totals({step(0, 1.0, true, 0, -1)}, sc).final_scale, 1.0);
    EXPECT_EQ(training_totals({}, sc).final_scale, 1.0);
}

// ---- the bench gate -------------------------------------------------------------------------

TEST(Rules, TheNewestExactPolicyValidates) {
    BenchPolicy p{"m", "w", "p", "cpu", Precision::Fp16, "eval", {"b.*", "a"}};
    BenchPolicy other = p;
    other.device = "cuda:0";
    BenchPolicy same = p;
    same.keep_fp32 = {"a", "b.*", "a"};  // FP32 regions are a set
    const auto v = choose_validation(p, {candidate("r3", other), candidate("r2", same), candidate("r1", p)}, "db");
    EXPECT_EQ(v.run, "r2");
    EXPECT_EQ(v.precision, Precision::Fp16);
    EXPECT_TRUE(v.refusal.empty());
}

TEST(Rules, ARejectedReviewIsNotOverriddenByAnOlderRun) {
    BenchPolicy p{"m", "w", "p", "cpu", Precision::Bf16, "eval", {}};
    const auto v = choose_validation(
        p, {candidate("r2", p, ReviewStatus::Rejected), candidate("r1", p, ReviewStatus::Accepted)}, "db");
    EXPECT_TRUE(v.run.empty());
    EXPECT_NE(v.refusal.find("run r2 validated exactly this policy"), std::string::npos) << v.refusal;
    EXPECT_NE(v.refusal.find("(by rita)"), std::string::npos) << v.refusal;
}

TEST(Rules, ARefusalNamesTheNearestRunAndEachDifference) {
    BenchPolicy p{"m", "w", "p", "cpu", Precision::Fp16, "eval", {}};
    BenchPolicy far = p, near = p;
    far.device = "cuda:0";
    far.mode = "train";
    near.keep_fp32 = {"fc1"};
    const auto v = choose_validation(p, {candidate("far", far), candidate("near", near)}, "runs.sqlite");
    EXPECT_TRUE(v.run.empty());
    EXPECT_EQ(v.refusal,
              "runs.sqlite holds no accepted validation run of fp16 with FP32 regions none, mode eval, on cpu; "
              "the nearest, run near, accepted fp16 but differs in FP32 regions (validated [fc1], "
              "benchmarked none)");
    EXPECT_EQ(choose_validation(p, {}, "x").refusal, "x holds no accepted validation run of " + describe(p));
}

TEST(Rules, ABenchmarkIsValidatedWhenEveryPrecisionIs) {
    Validation yes, no;
    yes.run = "r1";
    EXPECT_TRUE(all_validated({yes, yes}));
    EXPECT_FALSE(all_validated({yes, no}));
    EXPECT_FALSE(all_validated({}));  // the CLI's copy said true: nothing timed was validated
}

TEST(Rules, BenchPolicyTakesTheIdentifiedInputs) {
    BenchSpec spec;
    spec.mode = Mode::Train;
    spec.keep_fp32 = {"fc1"};
    RunInputs in;
    in.model.sha256 = "m";
    in.model.weights_sha256 = "w";
    in.probes.sha256 = "p";
    in.backend.device = "cuda:0";
    const auto p = bench_policy(spec, in, Precision::Bf16);
    EXPECT_EQ(p.model_sha256, "m");
    EXPECT_EQ(p.weights_sha256, "w");
    EXPECT_EQ(p.probes_sha256, "p");
    EXPECT_EQ(p.device, "cuda:0");
    EXPECT_EQ(p.mode, "train");
    EXPECT_EQ(p.precision, Precision::Bf16);
    EXPECT_EQ(p.keep_fp32, std::vector<std::string>{"fc1"});
}
