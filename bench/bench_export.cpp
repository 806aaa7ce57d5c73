// SPDX-License-Identifier: MIT
// Loading a torch.export program (.pt2): read, checked, parsed, weights copied, hashed (file and
// weights), as `--model` does it. The file comes from AMPSCOPE_BENCH_PT2 (bench/export_bench.py
// writes one with 105 MB of weights); without it the benchmark is skipped.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "model/model.h"

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

}  // namespace
