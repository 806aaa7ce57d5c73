// SPDX-License-Identifier: MIT
// Writes the database seeds of the store, import and layer_chunk fuzz targets through the
// storage API (tests/fuzz/make_corpus.py runs it): a run database with every kind of row
// (comparison runs from RunWriter and insert_run, a training run, annotations, a review, a
// benchmark, a run left `running`), an .ampscope export of it, the same database at schema v3
// (per-layer rows instead of chunks), and one layer chunk blob. Small pages keep files small.
//   fuzz_make_db OUTDIR
#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "ampscope/storage/store.h"
#include "layer_chunk.h"
#include "layer_stats.h"

using namespace ampscope;
using storage::Store;

namespace {

void exec(sqlite3* db, const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::fprintf(stderr, "make_db: %s: %s\n", sql.c_str(), err ? err : "?");
        std::exit(1);
    }
}

/// Rewrites the file with 512-byte pages and no WAL: a few KB per table instead of 4 KB.
void compact(const std::string& path) {
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    exec(db, "PRAGMA journal_mode=DELETE");
    exec(db, "PRAGMA page_size=512");
    exec(db, "VACUUM");
    sqlite3_close(db);
}

TensorStats stats(double absmax, int64_t nan = 0) {
    TensorStats s;
    s.count = 64;
    s.nan = nan;
    s.zeros = 3;
    s.min = -absmax;
    s.max = absmax;
    s.absmax = absmax;
    s.min_nonzero_abs = 1e-7;
    s.mean = 0.01;
    s.rms = absmax / 3;
    s.fp16_overflow = absmax > 65504 ? 2 : 0;
    s.fp16_subnormal = 1;
    s.bf16_underflow = 1;
    return s;
}

PassResult pass(Precision p, bool broken) {
    PassResult r;
    r.precision = p;
    r.num_outputs = 2;
    r.outputs = {0.5f, -0.5f, 1.25f, 1.0f, -2.0f, 3.0f};
    if (broken) {
        r.outputs[4] = 1.0f / 0.0f;
        r.nonfinite_samples = {"s2"};
        r.origin = Origin{"forward", "encoder.0.mlp", "aten::linear", 1, {"s2"}, ""};
        r.keep_fp32 = {"head", "encoder.*.norm"};
    }
    r.quality = 1.0;
    r.seconds = 0.25;
    const char* dtype = p == Precision::Fp32 ? "float32" : p == Precision::Fp16 ? "float16" : "bfloat16";
    r.layers = {
        {0, "encoder.0", "aten::linear", dtype, {3, 8}, true, false, p != Precision::Fp32, stats(12.5)},
        {1,
         "encoder.0.mlp",
         "aten::gelu",
         dtype,
         {3, 8},
         true,
         broken,
         p != Precision::Fp32,
         stats(7e4, broken ? 2 : 0)},
        {2, "", "aten::mean", "float32", {3, 2}, !broken, false, false, stats(1.5)},
    };
    return r;
}

Comparison comparison(Precision p, bool rejected) {
    Comparison c;
    c.precision = p;
    c.verdict = rejected ? Verdict::Rejected : Verdict::Accepted;
    c.max_abs_delta = rejected ? 1.0 / 0.0 : 1e-3;
    c.max_rel_delta = 2e-3;
    c.deltas = {{"s0", "ordinary", 1e-4, 2e-4, true, true, 0},
                {"s1", "boundary", 1e-3, 1e-3, true, true, 1},
                {"s2", "edge", rejected ? 1.0 / 0.0 : 0, 0, !rejected, !rejected, 0}};
    if (rejected) c.flips = {{"s1", "boundary", 0, 1, 0.25, 0.0}};
    c.criteria = {{"finite_outputs", !rejected, rejected ? "1 sample non-finite" : "",
                   rejected ? std::vector<std::string>{"s2"} : std::vector<std::string>{}},
                  {"score_tolerance", true, "", {}},
                  {"decision_flips", !rejected, rejected ? "1 flip > 0 allowed" : "", {}}};
    c.ref_decisions = {0, 0, 1};
    c.amp_decisions = {0, rejected ? 1 : 0, 1};
    return c;
}

RunResult run(const std::string& uuid, bool rejected) {
    RunResult r;
    r.run_id = uuid;
    r.tool_version = "0.1.0";
    r.started_at = "2025-01-02T03:04:05.678Z";
    r.finished_at = "2025-01-02T03:04:06.789Z";
    r.spec.model = "demo:mlp";
    r.spec.probes = "probes.pt";
    r.spec.keep_fp32 = {"head"};
    r.criteria.heads = {{"logits", 0, 2, 1e-3, 1e-2}};
    r.criteria.fixed_at = r.started_at;
    r.verdict = rejected ? Verdict::Rejected : Verdict::Accepted;
    r.backend.torch_version = "2.11.0";
    r.backend.notes = {"seed corpus"};
    r.model.source = "demo:mlp";
    r.model.kind = "demo";
    r.model.sha256 = std::string(64, 'a');
    r.model.weights_sha256 = std::string(64, 'b');
    r.model.parameters = 1234;
    r.model.modules = {"", "encoder", "encoder.0", "head"};
    r.probes.source = "probes.pt";
    r.probes.sha256 = std::string(64, 'c');
    r.probes.count = 3;
    r.probes.tags = {{"ordinary", 1}, {"boundary", 1}, {"edge", 1}};
    r.probes.input_shapes = {{8}};
    r.probes.has_labels = true;
    r.samples = {{"s0", "ordinary"}, {"s1", "boundary"}, {"s2", "edge"}};
    r.labels = {0, 0, 1};
    r.passes = {pass(Precision::Fp32, false), pass(Precision::Fp16, rejected), pass(Precision::Bf16, false)};
    r.comparisons = {comparison(Precision::Fp16, rejected), comparison(Precision::Bf16, false)};
    r.warnings = {"a warning"};
    return r;
}

/// The same database as schema v3 wrote it: layer rows instead of chunks, no grad_underflow.
void downgrade_to_v3(const std::string& path) {
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db, "SELECT pass_id, data FROM layer_chunks", -1, &q, nullptr);
    sqlite3_stmt* ins = nullptr;
    sqlite3_prepare_v2(
        db,
        "INSERT INTO layers(id, pass_id, idx, module, op, dtype, shape, flags, absmax, nonfinite, stats) "
        "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)",
        -1, &ins, nullptr);
    while (sqlite3_step(q) == SQLITE_ROW) {
        const int64_t pass_id = sqlite3_column_int64(q, 0);
        std::vector<LayerStat> layers;
        storage::chunk::decode(sqlite3_column_blob(q, 1), size_t(sqlite3_column_bytes(q, 1)), layers, "seed");
        for (const auto& l : layers) {
            const auto p = storage::pack(l.stats);
            sqlite3_bind_int64(ins, 1, pass_id << 32 | l.index);
            sqlite3_bind_int64(ins, 2, pass_id);
            sqlite3_bind_int64(ins, 3, l.index);
            sqlite3_bind_text(ins, 4, l.module.c_str(), -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(ins, 5, l.op.c_str(), -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(ins, 6, l.dtype.c_str(), -1, SQLITE_TRANSIENT);
            sqlite3_bind_blob(ins, 7, l.shape.data(), int(l.shape.size() * sizeof(int64_t)), SQLITE_TRANSIENT);
            sqlite3_bind_int64(ins, 8, int64_t(l.autocast) | int64_t(l.inputs_finite) << 1 | int64_t(l.origin) << 2);
            sqlite3_bind_double(ins, 9, l.stats.absmax);
            sqlite3_bind_int64(ins, 10, l.stats.nonfinite());
            sqlite3_bind_blob(ins, 11, &p, sizeof p, SQLITE_TRANSIENT);
            if (sqlite3_step(ins) != SQLITE_DONE) {
                std::fprintf(stderr, "make_db: %s\n", sqlite3_errmsg(db));
                std::exit(1);
            }
            sqlite3_reset(ins);
        }
    }
    sqlite3_finalize(q);
    sqlite3_finalize(ins);
    exec(db, "DROP TABLE layer_chunks; ALTER TABLE training_steps DROP COLUMN grad_underflow; PRAGMA user_version=3");
    sqlite3_close(db);
}

}  // namespace

int main(int argc, char** argv) {
    namespace fs = std::filesystem;
    if (argc != 2) {
        std::fprintf(stderr, "usage: fuzz_make_db OUTDIR\n");
        return 2;
    }
    const std::string out = argv[1];
    fs::create_directories(out);
    const std::string db = out + "/runs.sqlite", bundle = out + "/export.ampscope", v3 = out + "/runs-v3.sqlite",
                      empty = out + "/empty.sqlite";
    for (const auto& f : {db, bundle, v3, empty}) fs::remove(f);
    { Store e(empty); }
    compact(empty);
    {
        Store s(db);
        // recorded as it ran
        const auto a = run("0a1b2c3d-0000-4000-8000-000000000001", true);
        storage::RunWriter w(s);
        w.run_started(a);
        for (const auto& p : a.passes) w.pass_finished(p);
        for (const auto& c : a.comparisons) w.comparison_finished(c);
        w.run_finished(a);
        s.annotate(a.run_id, {"", "alice", "", "run", "", "fp16 rejected: one flip"});
        s.annotate(a.run_id, {"", "bob", "", "sample", "s1", "boundary sample"});
        s.annotate(a.run_id, {"", "bob", "", "layer", "fp16:1", "overflow born here"});
        s.set_review(a.run_id, ReviewStatus::Rejected, "carol");
        {  // relies on run a for fp16, unvalidated (no run for bf16)
            BenchResult bench;
            bench.model = a.model;
            bench.probes = a.probes;
            bench.batch = 3;
            bench.figures = {{Precision::Fp32, 1.5, 1.5, 1.5, 0, 1.0, 1.0},
                             {Precision::Fp16, 1.0, 1.0, 1.0, 0, 1.5, 1.0}};
            Validation fp16, bf16;
            fp16.run = a.run_id;
            bf16.precision = Precision::Bf16;
            s.record_benchmark(bench, BenchSpec{}, {fp16, bf16});
        }
        // imported whole, failed
        auto b = run("0a1b2c3d-0000-4000-8000-000000000002", false);
        s.insert_run(b, "failed", "the model raised an error", {}, {});
        // left running (a killed process)
        const auto c = run("0a1b2c3d-0000-4000-8000-000000000003", false);
        storage::RunWriter wc(s);
        wc.run_started(c);
        wc.pass_finished(c.passes[0]);
        // a training run
        TrainResult t;
        t.run_id = "0a1b2c3d-0000-4000-8000-000000000004";
        t.started_at = "2025-01-02T04:00:00.000Z";
        t.finished_at = "2025-01-02T04:01:00.000Z";
        t.model.source = "demo:mlp";
        storage::TrainWriter tw(s);
        tw.train_started(t);
        for (int i = 0; i < 3; ++i) {
            TrainStep st;
            st.step = i;
            st.loss_ref = 1.0 - 0.1 * i;
            st.loss_amp = st.loss_ref + 1e-3;
            st.scale = 65536.0 / (1 << i);
            st.found_inf = st.skipped = i == 0;
            st.effective_updates = i;
            st.grad_norm = i == 0 ? 1.0 / 0.0 : 0.5;
            st.lr = 0.05;
            st.divergence = 1e-4 * i;
            st.grad_underflow = i;
            if (i == 0) {
                st.nonfinite_stage = "gradient";
                st.origin = Origin{"backward", "head", "aten::mm", 4, {}, "MmBackward0"};
            }
            tw.step_finished(st);
        }
        tw.checkpoint_written("ckpt/step-2.pt", 2);
        tw.train_finished(t);
    }
    {
        Store s(db, Store::Mode::ReadOnly);
        storage::export_runs(s, {"0a1b2c3d-0000-4000-8000-000000000001", "0a1b2c3d-0000-4000-8000-000000000002"},
                             bundle);
    }
    compact(db);
    compact(bundle);
    fs::copy_file(db, v3);
    downgrade_to_v3(v3);
    compact(v3);
    // one layer chunk, as the layer_chunks.data column holds it
    {
        const auto p = pass(Precision::Fp16, true);
        std::ofstream(out + "/layers.chunk", std::ios::binary) << storage::chunk::encode(p.layers, 0, p.layers.size());
    }
    for (const auto& f : {empty, db, bundle, v3})
        std::printf("%s: %ju bytes\n", f.c_str(), std::uintmax_t(fs::file_size(f)));
    return 0;
}
