// SPDX-License-Identifier: MIT
// Fused statistics vs torch::sum and vs the same statistics from separate ATen ops;
// instrumented vs plain AMP pass of demo:transformer on the CPU.
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>

#include <limits>

#include "ampscope/engine/run.h"
#include "inspect/observer.h"
#include "run/pass.h"

namespace {

constexpr int64_t kBytes = 64ll << 20;  // 64 MiB

at::Tensor tensor_of(at::ScalarType dt) {
    const int64_t n = kBytes / int64_t(c10::elementSize(dt));
    return (at::randn({n}) * 100).to(dt);
}

void BM_FusedStats(benchmark::State& st, at::ScalarType dt) {
    auto t = tensor_of(dt);
    for (auto _ : st) benchmark::DoNotOptimize(ampscope::detail::tensor_stats(t));
    st.SetBytesProcessed(int64_t(st.iterations()) * kBytes);
}

void BM_TorchSum(benchmark::State& st, at::ScalarType dt) {
    auto t = tensor_of(dt);
    for (auto _ : st) benchmark::DoNotOptimize(t.sum());
    st.SetBytesProcessed(int64_t(st.iterations()) * kBytes);
}

/// What a user writes without ampscope: one ATen reduction per statistic.
void BM_SeparateAtenOps(benchmark::State& st, at::ScalarType dt) {
    auto t = tensor_of(dt);
    for (auto _ : st) {
        auto f = t.to(at::kFloat);
        auto a = f.abs();
        auto fin = f.isfinite();
        auto nz = a > 0;
        benchmark::DoNotOptimize(f.isnan().sum());
        benchmark::DoNotOptimize(f.isposinf().sum());
        benchmark::DoNotOptimize(f.isneginf().sum());
        benchmark::DoNotOptimize((f == 0).sum());
        auto ff = f.masked_select(fin);
        benchmark::DoNotOptimize(ff.min());
        benchmark::DoNotOptimize(ff.max());
        benchmark::DoNotOptimize(a.masked_select(fin).max());
        benchmark::DoNotOptimize(a.masked_select(nz & fin).min());
        benchmark::DoNotOptimize(ff.mean());
        benchmark::DoNotOptimize(ff.pow(2).mean().sqrt());
        benchmark::DoNotOptimize((a > 65504).sum());
        benchmark::DoNotOptimize((nz & (a < 6.1035e-5)).sum());
        benchmark::DoNotOptimize((nz & (a < 5.96e-8)).sum());
        benchmark::DoNotOptimize((a > 3.3895e38).sum());
        benchmark::DoNotOptimize((nz & (a < 1.1755e-38)).sum());
        benchmark::DoNotOptimize((nz & (a < 9.18e-41)).sum());
    }
    st.SetBytesProcessed(int64_t(st.iterations()) * kBytes);
}

BENCHMARK_CAPTURE(BM_FusedStats, fp32, at::kFloat)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_TorchSum, fp32, at::kFloat)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_SeparateAtenOps, fp32, at::kFloat)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FusedStats, fp16, at::kHalf)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_TorchSum, fp16, at::kHalf)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_SeparateAtenOps, fp16, at::kHalf)->Unit(benchmark::kMillisecond)->UseRealTime();

/// One op output of demo:transformer's size (40 x 16 x 64 half), as the observer sees it:
/// finite, and with 8 of the 40 sample rows overflowed to inf (per-row counts asked).
void BM_FusedStatsOpOutput(benchmark::State& st, bool with_inf) {
    auto t = (at::randn({40, 16, 64}) * 3).to(at::kHalf);
    if (with_inf) t.slice(0, 32, 40).fill_(std::numeric_limits<float>::infinity());
    std::vector<int64_t> rows;
    for (auto _ : st) benchmark::DoNotOptimize(ampscope::detail::tensor_stats(t, &rows));
}
BENCHMARK_CAPTURE(BM_FusedStatsOpOutput, finite, false)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FusedStatsOpOutput, inf_rows, true)->Unit(benchmark::kMicrosecond)->UseRealTime();

/// The same output with inf rows as the observer reads it after the op that made them (the
/// demo's ops after embed): its statistics, then the rows not yet non-finite in the batch
/// (inspect/observer.h new_nonfinite_rows; the 8 inf rows already seen).
void BM_ObserverOpOutputSeenRows(benchmark::State& st) {
    auto t = (at::randn({40, 16, 64}) * 3).to(at::kHalf);
    t.slice(0, 32, 40).fill_(std::numeric_limits<float>::infinity());
    std::vector<bool> seen(40, false);
    for (size_t r = 32; r < 40; ++r) seen[r] = true;
    std::vector<int64_t> rows;
    for (auto _ : st) {
        const auto s = ampscope::detail::tensor_stats(t);
        ampscope::detail::new_nonfinite_rows(t, s.nonfinite(), seen, rows);
        benchmark::DoNotOptimize(rows.data());
    }
}
BENCHMARK(BM_ObserverOpOutputSeenRows)->Unit(benchmark::kMicrosecond)->UseRealTime();

/// A 4 x 12 x 128 x 128 attention-score-sized output, with and without a causal mask's fill
/// value in its upper triangle: float32's lowest (-3.4028e38: in float32 a magnitude above 2^56
/// that leaves the plain fast path; cast to half or bfloat16 it rounds to -inf), or, for `min`,
/// the dtype's own torch.finfo(dtype).min (finite; bfloat16's -3.3895e38 is above 2^56 too).
enum class Fill { none, float_lowest, dtype_min };
void BM_FusedStatsMasked(benchmark::State& st, at::ScalarType dt, Fill fill) {
    auto t = at::randn({4, 12, 128, 128});
    const auto upper = at::ones({128, 128}, at::kBool).triu(1);
    if (fill == Fill::float_lowest) t = t.masked_fill(upper, std::numeric_limits<float>::lowest());
    t = t.to(dt);
    if (fill == Fill::dtype_min)
        t = t.masked_fill(upper, dt == at::kHalf       ? -65504.0
                                 : dt == at::kBFloat16 ? -3.3895313892515355e+38
                                                       : double(std::numeric_limits<float>::lowest()));
    for (auto _ : st) benchmark::DoNotOptimize(ampscope::detail::tensor_stats(t));
}
BENCHMARK_CAPTURE(BM_FusedStatsMasked, bf16_plain, at::kBFloat16, Fill::none)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_FusedStatsMasked, bf16_masked, at::kBFloat16, Fill::float_lowest)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_FusedStatsMasked, bf16_masked_min, at::kBFloat16, Fill::dtype_min)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_FusedStatsMasked, fp16_plain, at::kHalf, Fill::none)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FusedStatsMasked, fp16_masked, at::kHalf, Fill::float_lowest)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_FusedStatsMasked, fp32_plain, at::kFloat, Fill::none)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_FusedStatsMasked, fp32_masked, at::kFloat, Fill::float_lowest)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

/// One FP16 autocast pass of demo:transformer over its probe set, with and without the observer.
void BM_AmpPass(benchmark::State& st, bool inspect) {
    using namespace ampscope::detail;
    static auto model = load_model("demo:transformer", 0);
    static auto probes = load_probes("demo", *model, 0);
    PassOptions o;
    o.precision = ampscope::Precision::Fp16;
    o.inspect = inspect;
    o.batch_size = 40;
    run_pass(*model, probes, at::Device(at::kCPU), o, nullptr, false);  // warm-up
    for (auto _ : st) benchmark::DoNotOptimize(run_pass(*model, probes, at::Device(at::kCPU), o, nullptr, false));
}
// The ratio reported (bench/report.py) is of the CPU-time medians of interleaved repetitions
// (bench/run.sh): this thread's CPU time, steadier than wall time on a shared machine (process
// CPU time would add the OpenMP workers' spinning to both sides).
BENCHMARK_CAPTURE(BM_AmpPass, plain, false)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_AmpPass, instrumented, true)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
