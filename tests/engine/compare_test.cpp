// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ampscope/engine/compare.h"

using namespace ampscope;

namespace {
PassResult pass(Precision p, int k, std::vector<float> v) {
    PassResult r;
    r.precision = p;
    r.num_outputs = k;
    r.outputs = std::move(v);
    return r;
}
std::vector<SampleInfo> samples(int n) {
    std::vector<SampleInfo> s;
    for (int i = 0; i < n; ++i) s.push_back({"s" + std::to_string(i), i % 2 ? "boundary" : "ordinary"});
    return s;
}
const CriterionResult& crit(const Comparison& c, const std::string& name) {
    for (const auto& k : c.criteria)
        if (k.name == name) return k;
    throw std::runtime_error("no criterion " + name);
}
}  // namespace

TEST(Decide, ArgmaxAndTieRules) {
    const float a[] = {0.1f, 0.7f, 0.2f};
    EXPECT_EQ(decide(a, 3, 0.0, TieRule::LowestIndex), 1);
    const float tie[] = {0.5f, 0.1f, 0.5f};
    EXPECT_EQ(decide(tie, 3, 0.0, TieRule::LowestIndex), 0);
    EXPECT_EQ(decide(tie, 3, 0.0, TieRule::Abstain), -1);
    const float near[] = {0.30f, 0.5f, 0.4999f};
    EXPECT_EQ(decide(near, 3, 0.0, TieRule::LowestIndex), 1);
    EXPECT_EQ(decide(near, 3, 1e-3, TieRule::LowestIndex), 1);  // lowest tied index among {1,2}
    EXPECT_EQ(decide(near, 3, 1e-3, TieRule::Abstain), -1);
    // The tied set's lowest index is not the argmax: the rules disagree.
    const float lower_first[] = {0.4999f, 0.5f, 0.1f};
    EXPECT_EQ(decide(lower_first, 3, 0.0, TieRule::LowestIndex), 1);   // no tolerance: argmax
    EXPECT_EQ(decide(lower_first, 3, 1e-3, TieRule::LowestIndex), 0);  // tied {0, 1}: lowest
    EXPECT_EQ(decide(lower_first, 3, 1e-3, TieRule::Abstain), kAbstain);
    EXPECT_EQ(decide(lower_first, 3, 1e-5, TieRule::LowestIndex), 1);  // 1e-4 apart: not tied
    // Non-finite scores: no decision (torch.argmax would name the NaN's or the inf's index).
    const float nan[] = {std::numeric_limits<float>::quiet_NaN(), 0.2f, 0.1f};
    EXPECT_EQ(decide(nan, 3, 0.0, TieRule::LowestIndex), kNonFinite);
    const float allnan[] = {std::nanf(""), std::nanf("")};
    EXPECT_EQ(decide(allnan, 2, 0.0, TieRule::Abstain), kNonFinite);
    const float inf[] = {1.0f, std::numeric_limits<float>::infinity()};
    EXPECT_EQ(decide(inf, 2, 0.0, TieRule::LowestIndex), kNonFinite);
    EXPECT_EQ(decision_label(kNonFinite), "non-finite");
    EXPECT_EQ(decision_label(kAbstain), "abstain");
    EXPECT_EQ(decision_label(3), "3");
}

TEST(Margin, TopOneMinusTopTwo) {
    const float a[] = {0.1f, 0.7f, 0.2f};
    EXPECT_NEAR(margin(a, 3), 0.5, 1e-6);
    const float one[] = {0.1f, std::nanf("")};
    EXPECT_EQ(margin(one, 2), 0.0);
}

TEST(Compare, ToleranceFlipsAndVerdict) {
    // sample 0: tiny delta, no flip; sample 1: near tie flips; sample 2: large delta far from boundary
    auto ref = pass(Precision::Fp32, 2, {1.0f, 0.0f, 0.5000f, 0.4999f, 5.0f, 0.0f});
    auto amp = pass(Precision::Fp16, 2, {1.0005f, 0.0f, 0.4999f, 0.5000f, 5.2f, 0.0f});
    Criteria c;  // atol 1e-3, rtol 1e-2, max_flips 0
    auto cmp = compare(ref, amp, samples(3), {}, c);
    EXPECT_EQ(cmp.verdict, Verdict::Rejected);
    ASSERT_EQ(cmp.flips.size(), 1u);
    EXPECT_EQ(cmp.flips[0].sample, "s1");
    EXPECT_EQ(cmp.flips[0].ref, 0);
    EXPECT_EQ(cmp.flips[0].amp, 1);
    EXPECT_NEAR(cmp.flips[0].ref_margin, 1e-4, 1e-6);
    EXPECT_TRUE(cmp.deltas[0].within_tolerance);
    EXPECT_TRUE(cmp.deltas[1].within_tolerance);   // 1e-4 <= 1e-3 + 1e-2*0.5
    EXPECT_FALSE(cmp.deltas[2].within_tolerance);  // 0.2 > 1e-3 + 0.05
    EXPECT_NEAR(cmp.max_abs_delta, 0.2, 1e-5);
    EXPECT_FALSE(crit(cmp, "score_tolerance").passed);
    EXPECT_EQ(crit(cmp, "score_tolerance").samples, std::vector<std::string>{"s2"});
    EXPECT_FALSE(crit(cmp, "decision_flips").passed);
    EXPECT_TRUE(crit(cmp, "finite_outputs").passed);

    c.max_flips = 1;
    c.atol = 0.25;
    cmp = compare(ref, amp, samples(3), {}, c);
    EXPECT_EQ(cmp.verdict, Verdict::Accepted);
}

TEST(Compare, PerHeadTolerances) {
    auto ref = pass(Precision::Fp32, 3, {1.0f, 2.0f, 100.0f});
    auto amp = pass(Precision::Bf16, 3, {1.0f, 2.0f, 101.5f});  // 1.5 > 1e-3 + 1e-2 * 100
    Criteria c;
    c.max_flips = 5;
    EXPECT_FALSE(crit(compare(ref, amp, samples(1), {}, c), "score_tolerance").passed);
    c.heads.push_back({"box", 2, 3, 2.0, 0.0});
    EXPECT_TRUE(crit(compare(ref, amp, samples(1), {}, c), "score_tolerance").passed);
}

TEST(Compare, NonFiniteAndAllowPolicy) {
    auto ref = pass(Precision::Fp32, 2, {1.0f, 0.0f, 0.0f, 1.0f});
    auto amp = pass(Precision::Fp16, 2, {std::numeric_limits<float>::infinity(), 0.0f, 0.0f, 1.0f});
    Criteria c;
    c.max_flips = 10;
    auto cmp = compare(ref, amp, samples(2), {}, c);
    EXPECT_FALSE(crit(cmp, "finite_outputs").passed);
    EXPECT_EQ(crit(cmp, "finite_outputs").samples, std::vector<std::string>{"s0"});
    EXPECT_FALSE(cmp.deltas[0].finite);
    EXPECT_EQ(cmp.verdict, Verdict::Rejected);
    // The non-finite sample is counted once, by finite_outputs: not by tolerance or flips.
    EXPECT_TRUE(crit(cmp, "score_tolerance").passed) << crit(cmp, "score_tolerance").detail;
    EXPECT_TRUE(crit(cmp, "score_tolerance").samples.empty());
    ASSERT_EQ(cmp.flips.size(), 1u);  // listed, as non-finite
    EXPECT_EQ(cmp.flips[0].amp, kNonFinite);
    EXPECT_EQ(cmp.amp_decisions[0], kNonFinite);
    c.max_flips = 0;
    cmp = compare(ref, amp, samples(2), {}, c);
    EXPECT_TRUE(crit(cmp, "decision_flips").passed) << crit(cmp, "decision_flips").detail;
    EXPECT_NE(crit(cmp, "decision_flips").detail.find("1 non-finite samples not counted"), std::string::npos);
    // allow_nonfinite changes the verdict: the rest is within tolerance, so accepted.
    c.allow_nonfinite = true;
    cmp = compare(ref, amp, samples(2), {}, c);
    EXPECT_TRUE(crit(cmp, "finite_outputs").passed);
    EXPECT_EQ(cmp.verdict, Verdict::Accepted);
    // ... but not when a finite sample is outside tolerance.
    auto amp2 = pass(Precision::Fp16, 2, {std::numeric_limits<float>::quiet_NaN(), 0.0f, 0.5f, 1.0f});
    cmp = compare(ref, amp2, samples(2), {}, c);
    EXPECT_FALSE(crit(cmp, "score_tolerance").passed);
    EXPECT_EQ(crit(cmp, "score_tolerance").samples, std::vector<std::string>{"s1"});
    EXPECT_EQ(cmp.verdict, Verdict::Rejected);
}

TEST(Compare, QualityAccuracyAndRegression) {
    auto ref = pass(Precision::Fp32, 2, {1.0f, 0.0f, 0.0f, 1.0f});
    auto amp = pass(Precision::Fp16, 2, {1.0f, 0.0f, 1.0f, 0.0f});
    Truth t;
    t.labels = {0, 1};
    Criteria c;
    c.max_flips = 5;
    c.atol = 10;
    c.quality_threshold = 0.75;
    auto cmp = compare(ref, amp, samples(2), t, c);
    EXPECT_FALSE(crit(cmp, "quality").passed);
    EXPECT_NEAR(*quality(amp, t, c), 0.5, 1e-12);

    auto rref = pass(Precision::Fp32, 1, {1.0f, 2.0f});
    auto ramp = pass(Precision::Bf16, 1, {1.5f, 2.0f});
    Truth rt;
    rt.targets = {1.0f, 2.0f};
    Criteria rc;
    rc.quality_metric = QualityMetric::Mse;
    EXPECT_NEAR(*quality(ramp, rt, rc), 0.125, 1e-9);
    rc.quality_metric = QualityMetric::MaxAbsError;
    int worst = -1;
    EXPECT_NEAR(*quality(ramp, rt, rc, &worst), 0.5, 1e-9);
    EXPECT_EQ(worst, 0);
    EXPECT_FALSE(is_classifier(1, rt));
}

// An error metric (lower is better) with no threshold given is reported, not judged: its detail
// says so rather than "at most 0"; a threshold given is named.
TEST(Compare, QualityWithoutThresholdSaysSo) {
    auto ref = pass(Precision::Fp32, 1, {1.0f, 2.0f});
    auto amp = pass(Precision::Bf16, 1, {1.5f, 2.0f});
    Truth t;
    t.targets = {1.0f, 2.0f};
    Criteria c;
    c.atol = 10;
    c.quality_metric = QualityMetric::Mse;
    auto q = crit(compare(ref, amp, samples(1), t, c), "quality");
    EXPECT_TRUE(q.passed);
    EXPECT_EQ(q.detail.rfind("mse 0.125 (no threshold set)", 0), 0u) << q.detail;
    EXPECT_EQ(q.detail.find("at most"), std::string::npos) << q.detail;
    c.quality_threshold = 0.1;
    c.quality_threshold_set = true;
    q = crit(compare(ref, amp, samples(1), t, c), "quality");
    EXPECT_FALSE(q.passed);
    EXPECT_EQ(q.detail.rfind("mse 0.125 (at most 0.1)", 0), 0u) << q.detail;
}

// -inf scores are masked entries (probability 0): never the decision, and the same -inf in both
// passes is no new non-finite value; a vector of only -inf has no decision.
TEST(Decide, NegativeInfinityIsNeverChosen) {
    const float ninf = -std::numeric_limits<float>::infinity();
    const float masked[] = {ninf, 0.2f, 0.7f, ninf};
    EXPECT_EQ(decide(masked, 4, 0.0, TieRule::LowestIndex), 2);
    const float tie[] = {ninf, 0.5f, 0.5f};
    EXPECT_EQ(decide(tie, 3, 0.0, TieRule::Abstain), kAbstain);
    EXPECT_EQ(decide(tie, 3, 0.0, TieRule::LowestIndex), 1);
    const float all[] = {ninf, ninf};
    EXPECT_EQ(decide(all, 2, 0.0, TieRule::LowestIndex), kNonFinite);
    auto ref = pass(Precision::Fp32, 3, {ninf, 1.0f, 0.0f, ninf, 0.0f, 1.0f});
    auto amp = pass(Precision::Fp16, 3, {ninf, 1.0f, 0.0f, ninf, 0.0f, 1.0f});
    auto cmp = compare(ref, amp, samples(2), {}, Criteria{});
    EXPECT_TRUE(crit(cmp, "finite_outputs").passed) << crit(cmp, "finite_outputs").detail;
    EXPECT_EQ(cmp.verdict, Verdict::Accepted);
    EXPECT_EQ(cmp.amp_decisions, (std::vector<int>{1, 2}));
    // a new -inf (a negative overflow) is counted once, by finite_outputs, and flips no decision
    amp.outputs[1] = ninf;
    cmp = compare(ref, amp, samples(2), {}, Criteria{});
    EXPECT_FALSE(crit(cmp, "finite_outputs").passed);
    EXPECT_EQ(crit(cmp, "finite_outputs").samples, std::vector<std::string>{"s0"});
    EXPECT_TRUE(crit(cmp, "decision_flips").passed) << crit(cmp, "decision_flips").detail;
}
