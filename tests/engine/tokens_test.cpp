// SPDX-License-Identifier: MIT
// Per-token comparison of sequence outputs (compare/tokens.cpp), against figures worked out by
// hand: one sample, three positions, two tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ampscope/engine/compare.h"

using namespace ampscope;

namespace {

PassResult pass(Precision p, std::vector<float> v) {
    PassResult r;
    r.precision = p;
    r.num_outputs = int(v.size());
    r.outputs = std::move(v);
    return r;
}

const CriterionResult& crit(const Comparison& c, const std::string& name) {
    for (const auto& k : c.criteria)
        if (k.name == name) return k;
    throw std::runtime_error("no criterion " + name);
}

// position 0: p = (1/2, 1/2) vs q = (1/4, 3/4), a flip 0 -> 1 (the reference ties: lowest index)
// position 1: the same logits; position 2: masked out, and a flip there
const float kLog3 = float(std::log(3.0));
const std::vector<float> kRef = {0, 0, 1, 0, 0, 5};
const std::vector<float> kAmp = {0, kLog3, 1, 0, 5, 0};
const std::vector<SampleInfo> kSamples = {{"a", "ordinary"}};

}  // namespace

TEST(Tokens, FiguresOfUnmaskedPositions) {
    const SequenceLayout seq{3, 2, {1, 1, 0}};
    const auto c = compare(pass(Precision::Fp32, kRef), pass(Precision::Bf16, kAmp), kSamples, {}, Criteria{}, &seq);
    ASSERT_TRUE(c.tokens);
    const auto& t = *c.tokens;
    const double kl0 = 0.5 * std::log(0.5 / 0.25) + 0.5 * std::log(0.5 / 0.75);  // = 1/2 ln(4/3)
    EXPECT_EQ(t.positions, 2);
    EXPECT_EQ(t.masked, 1);
    EXPECT_NEAR(t.mean_kld, kl0 / 2, 1e-7);
    EXPECT_NEAR(t.max_kld, kl0, 1e-7);
    EXPECT_NEAR(t.p99_kld, 0.99 * kl0, 1e-7);  // linear interpolation between the two positions
    EXPECT_DOUBLE_EQ(t.same_top, 0.5);
    EXPECT_DOUBLE_EQ(t.top5_overlap, 1.0);  // V = 2: both tokens in both top sets
    EXPECT_NEAR(t.rms_dp, std::sqrt(0.0625 / 2), 1e-7);
    EXPECT_TRUE(std::isnan(t.kld[2]));
    ASSERT_EQ(c.flips.size(), 1u);  // the masked flip at position 2 is not one
    EXPECT_EQ(c.flips[0].position, 0);
    EXPECT_EQ(c.flips[0].ref, 0);
    EXPECT_EQ(c.flips[0].amp, 1);
    EXPECT_NEAR(c.max_abs_delta, std::log(3.0), 1e-6);  // not 5: masked scores take no part in the deltas
    EXPECT_FALSE(crit(c, "decision_flips").passed);
    EXPECT_FALSE(crit(c, "mean_kld").passed);
    EXPECT_FALSE(crit(c, "same_top").passed);
    ASSERT_EQ(t.boundary.size(), 2u);
    EXPECT_EQ(t.boundary[0].position, 0);  // margin 0 first, then 1
    EXPECT_DOUBLE_EQ(t.boundary[1].ref_margin, 1.0);
}

TEST(Tokens, CriteriaThresholds) {
    const SequenceLayout seq{3, 2, {1, 1, 0}};
    Criteria c;
    c.max_flip_rate = 0.5;
    c.max_mean_kld = 0.1;
    c.min_same_top = 0.5;
    const auto r = compare(pass(Precision::Fp32, kRef), pass(Precision::Bf16, kAmp), kSamples, {}, c, &seq);
    EXPECT_TRUE(crit(r, "decision_flips").passed);
    EXPECT_TRUE(crit(r, "mean_kld").passed);
    EXPECT_TRUE(crit(r, "same_top").passed);
}

TEST(Tokens, WithoutMaskEveryPositionCounts) {
    const SequenceLayout seq{3, 2, {}};
    const auto c = compare(pass(Precision::Fp32, kRef), pass(Precision::Bf16, kAmp), kSamples, {}, Criteria{}, &seq);
    EXPECT_EQ(c.tokens->positions, 3);
    EXPECT_EQ(c.flips.size(), 2u);
    EXPECT_NEAR(c.max_abs_delta, 5.0, 1e-6);
}

TEST(Tokens, CausalCrossEntropyIgnoresMinus100) {
    const SequenceLayout seq{3, 2, {}};
    Truth truth;
    truth.labels = {7, 1, 0};  // label 0 is never scored (nothing predicts it); then 1, then 0
    truth.label_width = 3;
    const auto c = compare(pass(Precision::Fp32, kRef), pass(Precision::Bf16, kAmp), kSamples, truth, Criteria{}, &seq);
    const double lp1 = 1 - std::log(1 + std::exp(1.0));
    EXPECT_EQ(c.tokens->label_tokens, 2);
    EXPECT_NEAR(c.tokens->ref_ce, -(std::log(0.5) + lp1) / 2, 1e-7);
    EXPECT_NEAR(c.tokens->amp_ce, -(std::log(0.75) + lp1) / 2, 1e-7);
    EXPECT_NEAR(c.tokens->ref_ppl, std::exp(c.tokens->ref_ce), 1e-12);
    truth.labels = {7, -100, 0};
    int64_t scored = 0;
    const auto ce = token_cross_entropy(kRef.data(), 1, seq, truth, &scored);
    EXPECT_EQ(scored, 1);
    EXPECT_NEAR(*ce, -lp1, 1e-7);
}

TEST(Tokens, PerplexityQualityMetric) {
    Truth truth;
    truth.labels = {7, 1, 0};
    truth.label_width = 3;
    Criteria c;
    c.quality_metric = QualityMetric::Perplexity;
    const double lp1 = 1 - std::log(1 + std::exp(1.0));
    EXPECT_NEAR(*quality(pass(Precision::Fp32, kRef), truth, c), std::exp(-(std::log(0.5) + lp1) / 2), 1e-6);
    c.quality_metric = QualityMetric::TokenAccuracy;
    EXPECT_DOUBLE_EQ(*quality(pass(Precision::Fp32, kRef), truth, c),
                     0.5);  // position 0 (argmax 0) misses label 1; position 1 hits 0
}

// Masked vocabulary entries: -inf at the same entries of both passes is no new non-finite value
// (finite_outputs passes, the position is compared, a probability-0 entry adds nothing to the KL
// divergence); a -inf only the AMP pass has is one (counted once, by finite_outputs).
TEST(Tokens, SharedNegativeInfinityIsNotNew) {
    const float ninf = -std::numeric_limits<float>::infinity();
    const SequenceLayout seq{2, 3, {}};
    const std::vector<float> ref = {0, 0, ninf, 1, 0, ninf};
    const std::vector<float> amp = {0, float(std::log(3.0)), ninf, 1, 0, ninf};
    auto c = compare(pass(Precision::Fp32, ref), pass(Precision::Bf16, amp), kSamples, {}, Criteria{}, &seq);
    EXPECT_TRUE(crit(c, "finite_outputs").passed) << crit(c, "finite_outputs").detail;
    EXPECT_TRUE(c.deltas[0].finite);
    EXPECT_NEAR(c.max_abs_delta, std::log(3.0), 1e-6);
    ASSERT_TRUE(c.tokens);
    EXPECT_EQ(c.tokens->positions, 2);
    const double kl0 = 0.5 * std::log(0.5 / 0.25) + 0.5 * std::log(0.5 / 0.75);
    EXPECT_NEAR(c.tokens->mean_kld, kl0 / 2, 1e-7);
    EXPECT_DOUBLE_EQ(c.tokens->same_top, 0.5);  // position 0 flips 0 -> 1 (the tie: lowest index), position 1 does not
    ASSERT_EQ(c.flips.size(), 1u);
    EXPECT_EQ(c.flips[0].amp, 1);
    // a -inf where the reference is finite is new
    auto amp2 = amp;
    amp2[4] = ninf;
    c = compare(pass(Precision::Fp32, ref), pass(Precision::Bf16, amp2), kSamples, {}, Criteria{}, &seq);
    EXPECT_FALSE(crit(c, "finite_outputs").passed);
    EXPECT_EQ(c.tokens->positions, 1);
}

// An overflowed AMP pass (+-inf logits, as FP16 gives for |logit| > 65504): its perplexity is NaN
// and the quality criterion says "nan" (x86's default NaN printed as "-nan" before).
TEST(Tokens, NonFinitePerplexityIsSaidNan) {
    const float inf = std::numeric_limits<float>::infinity();
    const SequenceLayout seq{2, 2, {}};
    Truth truth;
    truth.labels = {-100, 1};
    truth.label_width = 2;
    Criteria c;
    c.quality_metric = QualityMetric::Perplexity;
    const auto r = compare(pass(Precision::Fp32, {1, 0, 1, 0}), pass(Precision::Fp16, {inf, -inf, 1, 0}), kSamples,
                           truth, c, &seq);
    ASSERT_TRUE(r.tokens);
    EXPECT_TRUE(std::isnan(r.tokens->amp_ppl));
    const auto& q = crit(r, "quality").detail;
    EXPECT_EQ(q.rfind("perplexity nan ", 0), 0u) << q;
}
