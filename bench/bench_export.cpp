// SPDX-License-Identifier: MIT
// Loading a torch.export program (.pt2): read, checked, parsed, weights copied, hashed (file and
// weights), as `--model` does it. The file comes from AMPSCOPE_BENCH_PT2 (bench/export_bench.py
// writes one with 105 MB of weights); without it the benchmark is skipped.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "lm_program.h"
#include "model/model.h"
#include "run/pass.h"

namespace {

void BM_LoadExportProgram(benchmark::State& st) {
    const char* path = std::getenv("AMPSCOPE_BENCH_PT2");
    if (!path) {
        st.SkipWithError("AMPSCOPE_BENCH_PT2 not set (bench/export_bench.py sets it)");
        return;
    }
    for (auto _ : st) benchmark::DoNotOptimize(ampscope::detail::load_model(path, 0));
}
BENCHMARK(BM_LoadExportProgram)->Unit(benchmark::kMillisecond)->Iterations(5);

/// One pass of a language-model program (bench/lm_bench.py writes it and its token probes to
/// AMPSCOPE_BENCH_LM_PT2 / AMPSCOPE_BENCH_LM_PROBES) over its probes, plain and instrumented,
/// in one process on one loaded model: run with --benchmark_enable_random_interleaving so that
/// the instrumented/plain ratio is not a ratio of two moments of a noisy machine.
void BM_LmPass(benchmark::State& st, ampscope::Precision precision, bool inspect) {
    using namespace ampscope::detail;
    auto* lm = ampscope::bench::lm_program(st);
    if (!lm) return;
    auto& model = *lm->model;
    const auto& probes = lm->probes;
    PassOptions o;
    o.precision = precision;
    o.inspect = inspect;
    o.batch_size = int(probes.samples.size());
    run_pass(model, probes, at::Device(at::kCPU), o, nullptr, false);  // warm-up
    for (auto _ : st) benchmark::DoNotOptimize(run_pass(model, probes, at::Device(at::kCPU), o, nullptr, false));
}
BENCHMARK_CAPTURE(BM_LmPass, fp32_plain, ampscope::Precision::Fp32, false)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_LmPass, fp32_instrumented, ampscope::Precision::Fp32, true)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_LmPass, bf16_plain, ampscope::Precision::Bf16, false)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_LmPass, bf16_instrumented, ampscope::Precision::Bf16, true)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_LmPass, fp16_plain, ampscope::Precision::Fp16, false)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_LmPass, fp16_instrumented, ampscope::Precision::Fp16, true)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
