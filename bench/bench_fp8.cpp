// SPDX-License-Identifier: MIT
// The simulated FP8 and block-scaled passes against a plain BF16 pass of the same model (issue
// 30: target <= 1.5x): what simulating a recipe costs on a machine without FP8 hardware. Both
// sides are plain passes (no inspection), so the figure is the quantize-dequantize and the
// emulated GEMM alone. demo:transformer here; GPT-2-small with the program bench/lm_bench.py
// writes (AMPSCOPE_BENCH_LM_PT2 / AMPSCOPE_BENCH_LM_PROBES; lm_bench.py --fp8).
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>

#include "lm_program.h"
#include "model/model.h"
#include "probes/probes.h"
#include "run/pass.h"

namespace {

using ampscope::Precision;

void timed_passes(benchmark::State& st, ampscope::detail::Model& model, const ampscope::detail::ProbeSet& probes,
                  Precision precision, int batch_size, bool all_gemms = false) {
    using namespace ampscope::detail;
    PassOptions o;
    o.precision = precision;
    o.fp8_all_gemms = all_gemms;
    o.inspect = false;
    o.batch_size = batch_size;
    run_pass(model, probes, at::Device(at::kCPU), o, nullptr, false);  // warm-up
    for (auto _ : st) benchmark::DoNotOptimize(run_pass(model, probes, at::Device(at::kCPU), o, nullptr, false));
}

/// One pass of demo:transformer over its probe set in `precision` (bf16: the reference).
void BM_RecipePass(benchmark::State& st, Precision precision) {
    using namespace ampscope::detail;
    static auto model = load_model("demo:transformer", 0);
    static auto probes = load_probes("demo", *model, 0);
    timed_passes(st, *model, probes, precision, 40);
}
// bench/report.py: each recipe's CPU-time median over bf16's, interleaved repetitions (bench/run.sh).
BENCHMARK_CAPTURE(BM_RecipePass, bf16, Precision::Bf16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_RecipePass, fp8, Precision::Fp8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_RecipePass, fp8_rowwise, Precision::Fp8Rowwise)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_RecipePass, fp8_delayed, Precision::Fp8Delayed)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_RecipePass, mxfp8, Precision::Mxfp8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_RecipePass, nvfp4, Precision::Nvfp4)->Unit(benchmark::kMillisecond)->UseRealTime();

/// The same on the language-model program of bench/lm_bench.py (skipped without it).
void BM_LmRecipe(benchmark::State& st, Precision precision) {
    if (auto* lm = ampscope::bench::lm_program(st))
        timed_passes(st, *lm->model, lm->probes, precision, int(lm->probes.samples.size()));
}
BENCHMARK_CAPTURE(BM_LmRecipe, bf16, Precision::Bf16)->Unit(benchmark::kMillisecond)->UseRealTime();
// The FP32 pass: the floor of a simulated pass whose GEMMs are FP32 products (lm_bench.py prints it).
BENCHMARK_CAPTURE(BM_LmRecipe, fp32, Precision::Fp32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LmRecipe, fp8, Precision::Fp8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LmRecipe, fp8_rowwise, Precision::Fp8Rowwise)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LmRecipe, fp8_delayed, Precision::Fp8Delayed)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LmRecipe, mxfp8, Precision::Mxfp8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LmRecipe, nvfp4, Precision::Nvfp4)->Unit(benchmark::kMillisecond)->UseRealTime();

/// run --fp8-all-gemms on the language model: GPT-2's Conv1D and attention products quantized too.
void BM_LmAllGemms(benchmark::State& st, Precision precision) {
    if (auto* lm = ampscope::bench::lm_program(st))
        timed_passes(st, *lm->model, lm->probes, precision, int(lm->probes.samples.size()), true);
}
BENCHMARK_CAPTURE(BM_LmAllGemms, fp8, Precision::Fp8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LmAllGemms, mxfp8, Precision::Mxfp8)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
