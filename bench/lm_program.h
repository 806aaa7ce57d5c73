// SPDX-License-Identifier: MIT
#pragma once
// The language-model program bench/lm_bench.py writes (AMPSCOPE_BENCH_LM_PT2) with its token
// probes (AMPSCOPE_BENCH_LM_PROBES), loaded once for every benchmark that passes over it.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>

#include "model/model.h"
#include "probes/probes.h"

namespace ampscope::bench {

struct LmProgram {
    std::unique_ptr<detail::Model> model;
    detail::ProbeSet probes;
};

/// The program, or null with the benchmark skipped when lm_bench.py did not set the variables.
inline LmProgram* lm_program(benchmark::State& st) {
    const char* pt2 = std::getenv("AMPSCOPE_BENCH_LM_PT2");
    const char* probes = std::getenv("AMPSCOPE_BENCH_LM_PROBES");
    if (!pt2 || !probes) {
        st.SkipWithError("AMPSCOPE_BENCH_LM_PT2 / AMPSCOPE_BENCH_LM_PROBES not set (bench/lm_bench.py sets them)");
        return nullptr;
    }
    static LmProgram p = [&] {
        LmProgram l;
        l.model = detail::load_model(pt2, 0);
        l.probes = detail::load_probes(probes, *l.model, 0);
        return l;
    }();
    return &p;
}

}  // namespace ampscope::bench
