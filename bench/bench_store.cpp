// SPDX-License-Identifier: MIT
// Run store: writing 2 million per-op statistics rows through the sink, reading one pass's
// 200k-row layer table as the GUI does.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>

#include "ampscope/storage/store.h"

namespace {

using namespace ampscope;

RunResult header(int samples) {
    RunResult r;
    r.run_id = make_uuid();
    r.criteria.fixed_at = now_iso8601();
    r.started_at = r.criteria.fixed_at;
    for (int i = 0; i < samples; ++i) r.samples.push_back({"s" + std::to_string(i), "ordinary"});
    return r;
}

PassResult pass_with_layers(int rows, Precision p) {
    PassResult pass;
    pass.precision = p;
    pass.num_outputs = 1;
    pass.outputs.assign(4, 0.5f);
    pass.layers.resize(size_t(rows));
    for (int i = 0; i < rows; ++i) {
        auto& l = pass.layers[size_t(i)];
        l.index = i;
        l.module = "blocks." + std::to_string(i % 48) + ".mlp.up";
        l.op = "aten::linear";
        l.dtype = "Half";
        l.shape = {64, 128};
        l.stats.count = 8192;
        l.stats.absmax = 1.5 * i;
        l.stats.mean = 0.1;
        l.stats.rms = 0.7;
    }
    return pass;
}

std::string fresh(const char* name) {
    const std::string path = std::string("/tmp/ampscope-bench-") + name + ".sqlite";
    for (auto s : {"", "-wal", "-shm"}) std::filesystem::remove(path + s);
    return path;
}

void BM_StoreWriteLayers(benchmark::State& st) {
    const int per_pass = 500000;  // 4 passes of 500k = 2M rows per iteration
    std::vector<PassResult> passes;
    for (auto p : {Precision::Fp32, Precision::Fp16, Precision::Bf16, Precision::Fp16})
        passes.push_back(pass_with_layers(per_pass, p));
    for (auto _ : st) {
        st.PauseTiming();
        storage::Store s(fresh("write"));
        storage::RunWriter w(s);
        w.run_started(header(4));
        st.ResumeTiming();
        for (const auto& p : passes) w.pass_finished(p);
    }
    st.SetItemsProcessed(int64_t(st.iterations()) * 4 * per_pass);
}
BENCHMARK(BM_StoreWriteLayers)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

void BM_StoreReadLayers(benchmark::State& st) {
    const auto path = fresh("read");
    std::string uuid;
    {
        storage::Store s(path);
        storage::RunWriter w(s);
        auto h = header(4);
        uuid = h.run_id;
        w.run_started(h);
        w.pass_finished(pass_with_layers(200000, Precision::Fp16));
    }
    storage::Store s(path, storage::Store::Mode::ReadOnly);
    for (auto _ : st) benchmark::DoNotOptimize(s.layers(uuid, Precision::Fp16));
    st.SetItemsProcessed(int64_t(st.iterations()) * 200000);
}
BENCHMARK(BM_StoreReadLayers)->Unit(benchmark::kMillisecond)->UseRealTime();

/// Writes the GUI fixture: one run with 10,000 samples and 5,000 layer rows per pass
/// (bench/run.sh then times the GUI opening and painting it).
void BM_MakeGuiFixture(benchmark::State& st) {
    const char* path = std::getenv("AMPSCOPE_GUI_FIXTURE");
    for (auto _ : st) {
        if (!path) continue;
        for (auto s : {"", "-wal", "-shm"}) std::filesystem::remove(std::string(path) + s);
        storage::Store store(path);
        storage::RunWriter w(store);
        auto h = header(10000);
        h.spec.precisions = {Precision::Fp16, Precision::Bf16};
        w.run_started(h);
        std::vector<PassResult> passes;
        for (auto p : {Precision::Fp32, Precision::Fp16, Precision::Bf16}) {
            auto pass = pass_with_layers(5000, p);
            pass.num_outputs = 4;
            pass.outputs.resize(10000 * 4);
            for (size_t i = 0; i < pass.outputs.size(); ++i)
                pass.outputs[i] = float(i % 97) * 0.01f + (p == Precision::Fp32 ? 0.f : 1e-3f * float(i % 7));
            w.pass_finished(pass);
            passes.push_back(pass);
        }
        for (size_t c = 1; c < passes.size(); ++c) {
            Comparison cmp;
            cmp.precision = passes[c].precision;
            for (size_t i = 0; i < h.samples.size(); ++i) {
                cmp.deltas.push_back(
                    {h.samples[i].id, h.samples[i].tag, 1e-4 * double(i % 50 + 1), 1e-3, true, i % 10 != 0, 0});
                cmp.ref_decisions.push_back(int(i % 4));
                cmp.amp_decisions.push_back(int(i % 4) ^ (i % 200 == 0));
                if (i % 200 == 0)
                    cmp.flips.push_back({h.samples[i].id, h.samples[i].tag, int(i % 4), int(i % 4) ^ 1, 1e-5, 1e-5});
            }
            w.comparison_finished(cmp);
        }
        h.finished_at = now_iso8601();
        w.run_finished(h);
    }
}
BENCHMARK(BM_MakeGuiFixture)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
