// SPDX-License-Identifier: MIT
// Fused statistics against ATen's own reductions on random and salted tensors, on both
// paths of the CPU kernel: the AVX2 fast path and the exact portable path (CPUs without
// AVX2), which set_stats_portable forces.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <limits>

#include "inspect/observer.h"
#include "inspect/stats_kernel.h"

using namespace ampscope;
using ampscope::detail::tensor_stats;

namespace {

/// The same statistics composed from separate ATen ops (the oracle).
TensorStats reference(const at::Tensor& in) {
    TensorStats s;
    auto t = in.to(at::kDouble).flatten();
    s.count = t.numel();
    s.nan = t.isnan().sum().item<int64_t>();
    s.posinf = t.isposinf().sum().item<int64_t>();
    s.neginf = t.isneginf().sum().item<int64_t>();
    s.zeros = (t == 0).sum().item<int64_t>();
    auto f = t.masked_select(t.isfinite());
    auto a = f.abs();
    if (f.numel() > 0) {
        s.min = f.min().item<double>();
        s.max = f.max().item<double>();
        s.absmax = a.max().item<double>();
        s.mean = f.mean().item<double>();
        s.rms = f.pow(2).mean().sqrt().item<double>();
    }
    auto nz = a.masked_select(a > 0);
    s.min_nonzero_abs = nz.numel() ? nz.min().item<double>() : 0.0;
    s.fp16_overflow = (a > 65504.0).sum().item<int64_t>();
    s.fp16_subnormal = ((a > 0) & (a < 6.103515625e-05)).sum().item<int64_t>();
    s.fp16_underflow = ((a > 0) & (a < 5.960464477539063e-08)).sum().item<int64_t>();
    s.bf16_overflow = (a > 3.3895313892515355e+38).sum().item<int64_t>();
    s.bf16_subnormal = ((a > 0) & (a < 1.1754943508222875e-38)).sum().item<int64_t>();
    s.bf16_underflow = ((a > 0) & (a < 9.183549615799121e-41)).sum().item<int64_t>();
    return s;
}

/// Relative tolerance of mean and RMS (times RMS) on the path under test: the fast path sums
/// in float lanes of at most 32 elements (relative error below 33 * 2^-24 < 2e-6, see
/// stats_kernel.h); the portable path sums in double.
double g_sum_tolerance = 2e-6;

void expect_same(const TensorStats& got, const TensorStats& want, const std::string& what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(got.count, want.count);
    EXPECT_EQ(got.nan, want.nan);
    EXPECT_EQ(got.posinf, want.posinf);
    EXPECT_EQ(got.neginf, want.neginf);
    EXPECT_EQ(got.zeros, want.zeros);
    EXPECT_EQ(got.min, want.min);  // exact: min/max/absmax are values of the tensor
    EXPECT_EQ(got.max, want.max);
    EXPECT_EQ(got.absmax, want.absmax);
    EXPECT_EQ(got.min_nonzero_abs, want.min_nonzero_abs);
    EXPECT_NEAR(got.mean, want.mean, g_sum_tolerance * want.rms + 1e-300);
    EXPECT_NEAR(got.rms, want.rms, g_sum_tolerance * want.rms + 1e-300);
    EXPECT_EQ(got.fp16_overflow, want.fp16_overflow);
    EXPECT_EQ(got.fp16_subnormal, want.fp16_subnormal);
    EXPECT_EQ(got.fp16_underflow, want.fp16_underflow);
    EXPECT_EQ(got.bf16_overflow, want.bf16_overflow);
    EXPECT_EQ(got.bf16_subnormal, want.bf16_subnormal);
    EXPECT_EQ(got.bf16_underflow, want.bf16_underflow);
}

at::Tensor salted(at::ScalarType dt, int64_t n, uint64_t seed) {
    auto gen = at::detail::createCPUGenerator(seed);
    auto t = at::randn({n}, gen, at::TensorOptions().dtype(at::kFloat)) * 100.0;
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> special = {std::numeric_limits<float>::quiet_NaN(),
                                        inf,
                                        -inf,
                                        0.0f,
                                        -0.0f,
                                        65504.0f,
                                        -65504.0f,
                                        65520.0f,
                                        7e4f,
                                        6.1e-5f,
                                        6.2e-5f,
                                        3e-8f,
                                        6e-8f,
                                        1e-7f,
                                        -2e-6f,
                                        1e-39f,
                                        5e-41f,
                                        3e38f,
                                        1e-45f,
                                        2.0f};
    auto p = t.data_ptr<float>();
    for (size_t i = 0; i < special.size() && int64_t(i * 7) < n; ++i) p[i * 7] = special[i];
    return t.to(dt);
}

bool cpu_has_avx2() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
    return false;
#endif
}

/// Every test below runs twice: on the fast path (where the CPU has it) and on the portable path.
class TensorStatsTest : public ::testing::TestWithParam<bool> {
protected:
    void SetUp() override {
        portable_ = GetParam();
        ampscope::detail::set_stats_portable(portable_);
        g_sum_tolerance = portable_ ? 1e-10 : 2e-6;
        ASSERT_EQ(ampscope::detail::stats_fast_path(), !portable_ && cpu_has_avx2());
    }
    void TearDown() override {
        ampscope::detail::set_stats_portable(false);
        g_sum_tolerance = 2e-6;
    }
    bool portable_ = false;
};

}  // namespace

INSTANTIATE_TEST_SUITE_P(Path, TensorStatsTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Portable" : "Fast"; });

TEST(TensorStatsPath, SwitchForcesThePortablePath) {
    ampscope::detail::set_stats_portable(true);
    EXPECT_FALSE(ampscope::detail::stats_fast_path());
    ampscope::detail::set_stats_portable(false);
    EXPECT_EQ(ampscope::detail::stats_fast_path(), cpu_has_avx2());
}

TEST_P(TensorStatsTest, RandomFloat32MatchesAten) {
    auto t = at::randn({1000, 37}) * 1e3;
    expect_same(tensor_stats(t), reference(t), "randn f32");
}

TEST_P(TensorStatsTest, SaltedTensorsEveryDtype) {
    for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
        for (int64_t n : {1, 5, 140, 65536 + 17, 300001}) {
            auto t = salted(dt, n, uint64_t(n));
            expect_same(tensor_stats(t), reference(t), std::string(c10::toString(dt)) + " n=" + std::to_string(n));
        }
    }
}

TEST_P(TensorStatsTest, EveryBlockPathEveryDtype) {
    // Blocks of the fast path (finite, magnitudes in [2^-60, 2^56]) with and without range
    // counts, and blocks that take the exact path: huge, tiny, all-zero, non-finite.
    auto gen = at::detail::createCPUGenerator(11);
    const int64_t n = 8 * 1024 + 77;
    auto base = at::randn({n}, gen);
    std::vector<std::pair<std::string, at::Tensor>> cases = {
        {"relu", base.clamp_min(0)},
        {"narrow", base * 0.01 + 3.0},
        {"huge", base * 1e20},
        {"tiny", base * 1e-30},
        {"zeros", at::zeros({n})},
        {"fp16 edge", base * 3e4},
        {"fp16 subnormal", base.clamp_min(0) * 1e-5},
        {"mixed blocks", at::cat({base.slice(0, 0, 2048) * 1e20, base.slice(0, 2048, 4096) * 1e-3, at::zeros({1024}),
                                  base.slice(0, 5120) * 1e-9})},
    };
    auto with_nan = base.clone();
    with_nan[3000] = std::numeric_limits<float>::quiet_NaN();
    with_nan[7000] = -std::numeric_limits<float>::infinity();
    cases.emplace_back("nonfinite blocks", with_nan);
    // A whole block of NaN (a sample's rows after an overflow: counted without a float pass),
    // with either sign bit, and such blocks with one Inf or one finite value (the other paths).
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    auto nan_block = base.clone();
    nan_block.slice(0, 4096, 8192).fill_(nan);
    nan_block.slice(0, 6144, 8192).fill_(-nan);
    cases.emplace_back("all-NaN block", nan_block);
    auto nan_inf = nan_block.clone();
    nan_inf[5000] = -inf;
    cases.emplace_back("NaN block with one Inf", nan_inf);
    auto nan_finite = nan_block.clone();
    nan_finite[6000] = 2.5f;
    cases.emplace_back("NaN block with one finite value", nan_finite);
    cases.emplace_back("NaN only", at::full({n}, nan));
    // Every 7th value below FP16's range and, in bfloat16, subnormal, among normal ones (the
    // fast path's range counters on 16-bit patterns); and values just around 65504.
    auto tiny_mixed = base.clone();
    tiny_mixed.slice(0, 0, n, 7).mul_(1e-39);
    tiny_mixed.slice(0, 3, n, 11).mul_(1e-6);
    cases.emplace_back("subnormal among normal", tiny_mixed);
    auto near_max = base.clone();
    near_max.slice(0, 0, n, 5).fill_(65504.0f);
    near_max.slice(0, 1, n, 5).fill_(-65520.0f);
    near_max.slice(0, 2, n, 5).fill_(65536.0f);
    cases.emplace_back("around FP16's largest", near_max);
    for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
        for (const auto& [name, t] : cases) {
            auto x = t.to(dt);
            expect_same(tensor_stats(x), reference(x), name + " " + c10::toString(dt));
        }
    }
}

TEST_P(TensorStatsTest, MaskedScoresAndHugeAmongTinyEveryDtype) {
    // Attention scores with finfo.min in the upper triangle (GPT-2's causal mask), and finite
    // values above 2^56 mixed with tiny ones, NaN and Inf: the fast path splits the huge values
    // out of its float lanes; every statistic as ATen's and as the exact path's.
    auto gen = at::detail::createCPUGenerator(23);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    std::vector<std::pair<std::string, at::Tensor>> cases;
    for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
        const double lowest = dt == at::kHalf       ? -65504.0
                              : at::kBFloat16 == dt ? -3.3895313892515355e+38
                                                    : -3.4028234663852886e+38;
        auto scores = at::randn({2, 3, 128, 128}, gen) * 8.0;
        auto upper = at::ones({128, 128}, at::kBool).triu(1);
        cases.emplace_back("causal mask", scores.masked_fill(upper, lowest).to(dt));
        auto mixed = at::randn({4 * 4096 + 40}, gen) * 1e-30;
        mixed.slice(0, 0, mixed.numel(), 3).fill_(-3e38f);
        mixed.slice(0, 1, mixed.numel(), 17).fill_(7e37f);
        mixed.slice(0, 2, mixed.numel(), 29).fill_(1e17f);
        cases.emplace_back("huge among tiny", mixed.to(dt));
        auto bad = mixed.clone();
        bad.slice(0, 5, bad.numel(), 101).fill_(nan);
        bad.slice(0, 6, bad.numel(), 103).fill_(-inf);
        bad.slice(0, 7, bad.numel(), 107).fill_(inf);
        cases.emplace_back("huge with NaN and Inf", bad.to(dt));
        auto wide = at::randn({2 * 4096 + 3}, gen) * 3.0;
        wide.slice(0, 0, wide.numel(), 2).mul_(1e36);
        cases.emplace_back("half huge", wide.to(dt));
    }
    for (const auto& [name, x] : cases) {
        const std::string what = name + " " + c10::toString(x.scalar_type());
        const TensorStats got = tensor_stats(x);
        expect_same(got, reference(x), what);
        ampscope::detail::set_stats_portable(true);
        const TensorStats exact = tensor_stats(x);
        ampscope::detail::set_stats_portable(portable_);
        expect_same(got, exact, what + " vs the exact path");
    }
}

TEST_P(TensorStatsTest, MaskedHalfAndBFloat16BlocksEveryMix) {
    // 16-bit blocks outside the plain fast path, built in their own dtype (so that finfo.min is
    // exact, where float32's lowest would round to -inf): a causal mask's -inf or finfo.min,
    // with NaN/Inf rows, with zeros and subnormals (the counters below FP16's range), finite
    // values all below 2^-60 (the exact path), NaN/Inf only, and values at every threshold;
    // lengths with a tail. Every statistic as ATen's and as the exact path's.
    auto gen = at::detail::createCPUGenerator(29);
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    const auto upper = at::ones({128, 128}, at::kBool).triu(1);
    std::vector<std::pair<std::string, at::Tensor>> cases;
    for (auto dt : {at::kHalf, at::kBFloat16}) {
        const bool bf = dt == at::kBFloat16;
        const double lowest = bf ? -3.3895313892515355e+38 : -65504.0;
        const auto scores = (at::randn({2, 3, 128, 128}, gen) * 8.0).to(dt);
        cases.emplace_back("causal -inf", scores.masked_fill(upper, -inf));
        cases.emplace_back("causal finfo.min", scores.masked_fill(upper, lowest));
        auto rows = scores.masked_fill(upper, lowest);
        rows[0][1][5].fill_(nan);
        rows[1][2][7].slice(0, 0, 64).fill_(inf);
        rows[1][0][100].slice(0, 3, 128, 2).fill_(-nan);
        rows[0][2][9].slice(0, 0, 11).fill_(-inf);
        cases.emplace_back("causal finfo.min with NaN and Inf rows", rows);
        auto low = (at::randn({2, 3, 128, 128}, gen) * 8.0);
        low.slice(3, 0, 128, 5).mul_(bf ? 1e-39 : 1e-6);  // BF16 subnormal / FP16 subnormal
        low.slice(3, 1, 128, 9).mul_(bf ? 1e-9 : 3e-8);   // below FP16's range / an FP16 subnormal
        low.slice(3, 2, 128, 7).zero_();
        low.slice(3, 3, 128, 11).fill_(-0.0);
        cases.emplace_back("causal -inf with zeros and subnormals", low.to(dt).masked_fill(upper, -inf));
        cases.emplace_back("causal finfo.min with zeros and subnormals", low.to(dt).masked_fill(upper, lowest));
        const int64_t n = 3 * 4096 + 45;
        auto tiny = (at::randn({n}, gen) * (bf ? 1e-25 : 1e-9)).to(dt);
        tiny.slice(0, 0, n, 3).fill_(-inf);
        cases.emplace_back("finite values below 2^-60 with -inf", tiny);
        auto bad = at::full({n}, nan, at::TensorOptions().dtype(dt));
        bad.slice(0, 0, n, 3).fill_(-inf);
        bad.slice(0, 1, n, 7).fill_(inf);
        bad.slice(0, 2, n, 5).fill_(-nan);
        cases.emplace_back("NaN and Inf only", bad);
        auto edges = at::randn({n}, gen) * 3.0;  // in float32, then rounded (FP16: the large ones to Inf)
        const std::vector<double> at_thresholds = {65504.0,
                                                   -65504.0,
                                                   65536.0,
                                                   -65536.0,
                                                   0x1p56,
                                                   -0x1p56,
                                                   0x1p56 * (1 + 0x1p-7),
                                                   -3.3895313892515355e+38,
                                                   3.3895313892515355e+38,
                                                   0x1p-60,
                                                   -0x1p-14,
                                                   0x1p-24,
                                                   -0x1p-25,
                                                   0x1p-126,
                                                   -0x1p-133,
                                                   6.1e-5};
        for (size_t i = 0; i < at_thresholds.size(); ++i)
            edges.slice(0, int64_t(i) * 37, n, 701).fill_(at_thresholds[i]);
        edges = edges.to(dt);
        cases.emplace_back("every threshold", edges);
        auto edges_inf = edges.clone();
        edges_inf.slice(0, 5, n, 13).fill_(-inf);
        edges_inf.slice(0, 6, n, 333).fill_(nan);
        cases.emplace_back("every threshold with -inf and NaN", edges_inf);
    }
    for (const auto& [name, x] : cases) {
        const std::string what = name + " " + c10::toString(x.scalar_type());
        const TensorStats got = tensor_stats(x);
        expect_same(got, reference(x), what);
        ampscope::detail::set_stats_portable(true);
        const TensorStats exact = tensor_stats(x);
        ampscope::detail::set_stats_portable(portable_);
        expect_same(got, exact, what + " vs the exact path");
    }
}

TEST_P(TensorStatsTest, NonContiguousAndEmpty) {
    auto base = salted(at::kFloat, 4096, 7).view({64, 64});
    auto t = base.t().slice(0, 0, 64, 3);
    ASSERT_FALSE(t.is_contiguous());
    expect_same(tensor_stats(t), reference(t), "non-contiguous");
    auto e = at::empty({0, 8});
    auto s = tensor_stats(e);
    EXPECT_EQ(s.count, 0);
    EXPECT_EQ(s.absmax, 0);
}

TEST_P(TensorStatsTest, PerRowNonFiniteCounts) {
    auto t = at::zeros({4, 10});
    t[1][3] = std::numeric_limits<float>::infinity();
    t[3][0] = std::numeric_limits<float>::quiet_NaN();
    t[3][9] = -std::numeric_limits<float>::infinity();
    std::vector<int64_t> rows;
    auto s = tensor_stats(t.to(at::kHalf), &rows);
    EXPECT_EQ(rows, (std::vector<int64_t>{0, 1, 0, 2}));
    EXPECT_EQ(s.nonfinite(), 3);
}

// The observer reads only the rows not yet non-finite in a batch (new_nonfinite_rows): for
// every set of rows already seen, the others are flagged exactly where tensor_stats counts.
TEST_P(TensorStatsTest, NewNonFiniteRowsAreThePerRowCountsOfTheRowsNotSeen) {
    for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
        auto t = at::zeros({6, 3000});
        t[1][2999] = std::numeric_limits<float>::infinity();
        t[3][0] = std::numeric_limits<float>::quiet_NaN();
        t[3][7] = -std::numeric_limits<float>::infinity();
        t[4][1500] = std::numeric_limits<float>::quiet_NaN();
        t = t.to(dt);
        std::vector<int64_t> counts;
        const auto s = tensor_stats(t, &counts);
        ASSERT_EQ(s.nonfinite(), 4);
        for (const std::vector<int>& seen_rows : std::vector<std::vector<int>>{
                 {}, {1}, {3}, {1, 3}, {0, 1}, {1, 3, 4}, {0, 1, 3, 4, 5}, {0, 1, 2, 3, 4, 5}}) {
            std::vector<bool> seen(6, false);
            for (int r : seen_rows) seen[size_t(r)] = true;
            std::vector<int64_t> rows;
            ampscope::detail::new_nonfinite_rows(t, s.nonfinite(), seen, rows);
            std::vector<int64_t> want(6, 0);
            for (size_t r = 0; r < 6; ++r) want[r] = !seen[r] && counts[r] > 0 ? 1 : 0;
            EXPECT_EQ(rows, want) << c10::toString(dt) << ", " << seen_rows.size() << " rows seen";
        }
    }
}

TEST_P(TensorStatsTest, MergeOfPartsEqualsWhole) {
    auto t = salted(at::kFloat, 10000, 3);
    auto a = tensor_stats(t.slice(0, 0, 4000)), b = tensor_stats(t.slice(0, 4000, 10000));
    a.merge(b);
    expect_same(a, reference(t), "merged");
}
