// SPDX-License-Identifier: MIT
// The run store: round trips, migrations, hostile files, concurrency, crash marking.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "ampscope/engine/errors.h"
#include "ampscope/storage/json_io.h"
#include "ampscope/storage/store.h"

using namespace ampscope;
using namespace ampscope::storage;
namespace fs = std::filesystem;

namespace {

class TempDir {
public:
    TempDir() {
        char tmpl[] = "/tmp/ampscope-store-XXXXXX";
        path_ = mkdtemp(tmpl);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

/// A synthetic but complete run: two passes with layers, a comparison with flips.
RunResult make_run(int samples = 6, int layers = 5, const std::string& model = "demo:mlp") {
    RunResult r;
    r.run_id = make_uuid();
    r.tool_version = version();
    r.spec.model = model;
    r.spec.precisions = {Precision::Fp16};
    r.spec.keep_fp32 = {"blocks.1.*"};
    r.criteria.atol = 2e-3;
    r.criteria.heads = {{"logits", 0, 2, 1e-3, 1e-2}};
    r.criteria.fixed_at = now_iso8601();
    r.started_at = r.criteria.fixed_at;
    r.backend.device = "cpu";
    r.backend.torch_version = "2.11.0";
    r.backend.notes = {"a note"};
    r.model = {model, "demo", "abc", "def", "eval", 123, {"", "fc1"}};
    r.probes.source = "demo";
    r.probes.sha256 = "123";
    r.probes.count = samples;
    r.probes.tags = {{"ordinary", samples - 1}, {"edge", 1}};
    r.probes.input_shapes = {{4}};
    r.labels.assign(size_t(samples), 1);
    for (int i = 0; i < samples; ++i) r.samples.push_back({"s" + std::to_string(i), i == 0 ? "edge" : "ordinary"});
    for (auto p : {Precision::Fp32, Precision::Fp16}) {
        PassResult pass;
        pass.precision = p;
        pass.num_outputs = 2;
        for (int i = 0; i < samples * 2; ++i) pass.outputs.push_back(float(i) * 0.25f + (p == Precision::Fp16 ? 1e-3f : 0.f));
        if (p == Precision::Fp16) {
            pass.outputs[0] = std::numeric_limits<float>::quiet_NaN();
            pass.nonfinite_samples = {"s0"};
            pass.origin = Origin{"forward", "fc1", "aten::linear", 0, {"s0"}, {}};
            pass.keep_fp32 = {"blocks.1.*"};
        }
        pass.quality = 0.5;
        pass.seconds = 0.01;
        for (int l = 0; l < layers; ++l) {
            LayerStat s;
            s.index = l;
            s.module = "fc" + std::to_string(l);
            s.op = "aten::linear";
            s.dtype = "Half";
            s.shape = {samples, 2};
            s.origin = l == 0 && p == Precision::Fp16;
            s.stats.count = 12;
            s.stats.absmax = 70000.0 + l;
            s.stats.fp16_overflow = 3;
            s.stats.mean = 0.1 * l;
            pass.layers.push_back(s);
        }
        r.passes.push_back(pass);
    }
    Comparison c;
    c.precision = Precision::Fp16;
    c.verdict = Verdict::Rejected;
    c.max_abs_delta = 1e-3;
    for (const auto& s : r.samples) c.deltas.push_back({s.id, s.tag, 1e-3, 1e-2, s.id != "s0", false, 1});
    c.flips.push_back({"s1", "ordinary", 1, 0, 1e-5, 2e-5});
    c.criteria = {{"finite_outputs", false, "1 of 6", {"s0"}}, {"decision_flips", false, "1 flip", {"s1"}}};
    c.ref_decisions.assign(size_t(samples), 1);
    c.amp_decisions.assign(size_t(samples), 1);
    c.amp_decisions[1] = 0;
    r.comparisons.push_back(c);
    r.verdict = Verdict::Rejected;
    r.finished_at = now_iso8601();
    return r;
}

void record(Store& s, const RunResult& r) {
    RunWriter w(s);
    w.run_started(r);
    for (const auto& p : r.passes) w.pass_finished(p);
    for (const auto& c : r.comparisons) w.comparison_finished(c);
    w.run_finished(r);
}

std::string js(const RunResult& r) { return json::run_to_json(r, true); }

void raw_exec(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    std::string m = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << m;
}

}  // namespace

TEST(Store, RecordedRunReadsBackFieldForField) {
    TempDir d;
    Store s(d.file("runs.sqlite"));
    const auto r = make_run();
    record(s, r);
    EXPECT_EQ(js(s.load_run(r.run_id)), js(r));
    EXPECT_EQ(s.status(r.run_id), "completed");
    const auto rows = s.list_runs();
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].verdict, "rejected");
    EXPECT_EQ(rows[0].precisions, "fp32,fp16");
    EXPECT_EQ(s.layers(r.run_id, Precision::Fp16).size(), 5u);
    EXPECT_EQ(s.schema_version(), kSchemaVersion);
}

TEST(Store, FiltersAndPrefixResolution) {
    TempDir d;
    Store s(d.file("runs.sqlite"));
    auto a = make_run(4, 2, "demo:mlp"), b = make_run(4, 2, "demo:transformer");
    record(s, a);
    record(s, b);
    RunFilter f;
    f.model = "transformer";
    ASSERT_EQ(s.list_runs(f).size(), 1u);
    EXPECT_EQ(s.list_runs(f)[0].uuid, b.run_id);
    f = {};
    f.precision = "bf16";
    EXPECT_TRUE(s.list_runs(f).empty());
    f.precision = "fp16";
    EXPECT_EQ(s.list_runs(f).size(), 2u);
    EXPECT_EQ(s.resolve(a.run_id.substr(0, 12)), a.run_id);
    EXPECT_THROW(s.resolve("zzzz"), InputError);
}

TEST(Store, CriteriaCannotBeEditedAfterTheRunStarted) {
    TempDir d;
    Store s(d.file("runs.sqlite"));
    auto r = make_run();
    record(s, r);
    char* err = nullptr;
    const int rc = sqlite3_exec(s.handle(), "UPDATE runs SET criteria_fixed_at='2000-01-01'", nullptr, nullptr, &err);
    EXPECT_NE(rc, SQLITE_OK);
    EXPECT_NE(std::string(err ? err : "").find("criteria are fixed"), std::string::npos);
    sqlite3_free(err);
}

TEST(Store, AnnotationsAndReview) {
    TempDir d;
    Store s(d.file("runs.sqlite"));
    auto r = make_run();
    record(s, r);
    s.annotate(r.run_id, {"", "ann", "", "run", "", "looks bad"});
    s.annotate(r.run_id, {"", "bob", "", "sample", "s1", "this one flips"});
    s.annotate(r.run_id, {"", "bob", "", "layer", "0", "overflow born here"});
    EXPECT_THROW(s.annotate(r.run_id, {"", "bob", "", "sample", "nope", "x"}), InputError);
    EXPECT_THROW(s.annotate(r.run_id, {"", "bob", "", "layer", "99", "x"}), InputError);
    const auto notes = s.annotations(r.run_id);
    ASSERT_EQ(notes.size(), 3u);
    EXPECT_EQ(notes[2].target, "fp16:0");
    s.set_review(r.run_id, "accepted", "carol");
    EXPECT_EQ(s.review(r.run_id).status, "accepted");
    EXPECT_EQ(s.review(r.run_id).by, "carol");
    EXPECT_THROW(s.set_review(r.run_id, "maybe", "carol"), InputError);
    s.delete_run(r.run_id);
    EXPECT_TRUE(s.list_runs().empty());
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(s.handle(), "SELECT (SELECT count(*) FROM layers) + (SELECT count(*) FROM layer_chunks)", -1, &st, nullptr);
    sqlite3_step(st);
    EXPECT_EQ(sqlite3_column_int(st, 0), 0);  // cascaded
    sqlite3_finalize(st);
}

TEST(Store, ExportImportRoundTripIsIdempotent) {
    TempDir d;
    Store a(d.file("a.sqlite"));
    auto r1 = make_run(), r2 = make_run(3, 1);
    record(a, r1);
    record(a, r2);
    a.annotate(r1.run_id, {"", "ann", "", "sample", "s2", "check"});
    a.set_review(r1.run_id, "rejected", "dan");
    export_runs(a, {r1.run_id, r2.run_id}, d.file("x.ampscope"));
    EXPECT_FALSE(fs::exists(d.file("x.ampscope-wal")));
    Store b(d.file("b.sqlite"));
    auto res = import_file(b, d.file("x.ampscope"));
    EXPECT_EQ(res.added, 2);
    res = import_file(b, d.file("x.ampscope"));
    EXPECT_EQ(res.added, 0);
    EXPECT_EQ(res.skipped, 2);
    EXPECT_EQ(js(b.load_run(r1.run_id)), js(r1));
    EXPECT_EQ(js(b.load_run(r2.run_id)), js(r2));
    ASSERT_EQ(b.annotations(r1.run_id).size(), 1u);
    EXPECT_EQ(b.annotations(r1.run_id)[0].uuid, a.annotations(r1.run_id)[0].uuid);
    EXPECT_EQ(b.review(r1.run_id).status, "rejected");
    EXPECT_EQ(b.list_runs().size(), 2u);
}

/// Rewrites a file's layer chunks as the one-row-per-layer table of schema versions 1 to 3:
/// 11 int64 counters then 6 float64 in the stats blob, shape as int64 blob, id pass<<32|idx.
void move_layers_to_rows(const std::string& path) {
    std::vector<std::pair<int64_t, std::vector<LayerStat>>> by_pass;
    {
        Store s(path);
        for (const auto& row : s.list_runs()) {
            const auto run = s.load_run(row.uuid);
            sqlite3_stmt* q = nullptr;
            ASSERT_EQ(sqlite3_prepare_v2(s.handle(), "SELECT p.id FROM passes p JOIN runs r ON r.id=p.run_id WHERE r.uuid=? ORDER BY p.seq", -1, &q, nullptr), SQLITE_OK);
            sqlite3_bind_text(q, 1, row.uuid.c_str(), -1, SQLITE_TRANSIENT);
            for (size_t k = 0; sqlite3_step(q) == SQLITE_ROW; ++k) {
                ASSERT_LT(k, run.passes.size());
                by_pass.emplace_back(sqlite3_column_int64(q, 0), run.passes[k].layers);
            }
            sqlite3_finalize(q);
        }
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "BEGIN; DELETE FROM layer_chunks", nullptr, nullptr, nullptr);
    sqlite3_stmt* ins = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "INSERT INTO layers VALUES(?,?,?,?,?,?,?,?,?,?,?)", -1, &ins, nullptr), SQLITE_OK);
    for (const auto& [pid, layers] : by_pass) {
        for (const auto& l : layers) {
            const auto& t = l.stats;
            const int64_t ints[11] = {t.count, t.nan, t.posinf, t.neginf, t.zeros, t.fp16_overflow, t.fp16_subnormal,
                                      t.fp16_underflow, t.bf16_overflow, t.bf16_subnormal, t.bf16_underflow};
            const double dbl[6] = {t.min, t.max, t.absmax, t.min_nonzero_abs, t.mean, t.rms};
            std::string blob(reinterpret_cast<const char*>(ints), sizeof ints);
            blob.append(reinterpret_cast<const char*>(dbl), sizeof dbl);
            sqlite3_bind_int64(ins, 1, pid << 32 | l.index);
            sqlite3_bind_int64(ins, 2, pid);
            sqlite3_bind_int64(ins, 3, l.index);
            sqlite3_bind_text(ins, 4, l.module.c_str(), -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(ins, 5, l.op.c_str(), -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(ins, 6, l.dtype.c_str(), -1, SQLITE_TRANSIENT);
            sqlite3_bind_blob(ins, 7, l.shape.data(), int(l.shape.size() * 8), SQLITE_TRANSIENT);
            sqlite3_bind_int64(ins, 8, int64_t(l.autocast) | int64_t(l.inputs_finite) << 1 | int64_t(l.origin) << 2);
            sqlite3_bind_double(ins, 9, t.absmax);
            sqlite3_bind_int64(ins, 10, t.nonfinite());
            sqlite3_bind_blob(ins, 11, blob.data(), int(blob.size()), SQLITE_TRANSIENT);
            ASSERT_EQ(sqlite3_step(ins), SQLITE_DONE);
            sqlite3_reset(ins);
        }
    }
    sqlite3_finalize(ins);
    ASSERT_EQ(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
}

TEST(Store, MigratesFromEveryOlderVersion) {
    for (int from = 0; from < kSchemaVersion; ++from) {
        TempDir d;
        const auto path = d.file("old.sqlite");
        auto r = make_run();
        {
            Store s(path);
            record(s, r);
        }
        if (from == 0) {
            // version 0: an empty SQLite file (what a first open creates)
            fs::remove(path);
            raw_exec(path, "PRAGMA user_version=0");
            Store s(path);
            EXPECT_EQ(s.schema_version(), kSchemaVersion);
            EXPECT_TRUE(s.list_runs().empty());
            continue;
        }
        // rebuild the file at version `from`: layer statistics as rows of `layers` (how versions
        // before 4 wrote them), and drop what later migrations added
        if (from < 4) move_layers_to_rows(path);
        std::string drop = "ALTER TABLE training_steps DROP COLUMN grad_underflow; ";
        if (from < 4) drop += "DROP TABLE layer_chunks; ";
        if (from < 3) drop += "DROP TABLE benchmarks; DROP INDEX IF EXISTS comparisons_verdict; ";
        if (from < 2) drop += "DROP TABLE checkpoints; DROP TABLE training_steps; ";
        raw_exec(path, drop + "PRAGMA user_version=" + std::to_string(from));
        Store s(path);
        EXPECT_EQ(s.schema_version(), kSchemaVersion) << "from " << from;
        EXPECT_EQ(js(s.load_run(r.run_id)), js(r)) << "from " << from;
        sqlite3_stmt* st = nullptr;
        ASSERT_EQ(sqlite3_prepare_v2(s.handle(), "SELECT count(*) FROM training_steps", -1, &st, nullptr), SQLITE_OK);
        sqlite3_finalize(st);
        ASSERT_EQ(sqlite3_prepare_v2(s.handle(), "SELECT count(*) FROM benchmarks", -1, &st, nullptr), SQLITE_OK);
        sqlite3_finalize(st);
    }
}

TEST(Store, RefusesANewerSchema) {
    TempDir d;
    const auto path = d.file("new.sqlite");
    { Store s(path); }
    raw_exec(path, "PRAGMA user_version=99");
    try {
        Store s(path);
        FAIL();
    } catch (const StoreError& e) {
        EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("up to " + std::to_string(kSchemaVersion)), std::string::npos) << e.what();
    }
}

TEST(Store, HostileFilesAreRefusedWithAReason) {
    TempDir d;
    auto exported = [&](const std::string& name) {
        Store a(d.file(name + ".src"));
        record(a, make_run());
        export_runs(a, {a.list_runs()[0].uuid}, d.file(name));
        return d.file(name);
    };
    Store into(d.file("into.sqlite"));
    auto expect_refused = [&](const std::string& file, const std::string& needle) {
        try {
            import_file(into, file);
            ADD_FAILURE() << "accepted " << file;
        } catch (const std::exception& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
        EXPECT_TRUE(into.list_runs().empty()) << "nothing may be half-imported";
    };
    auto f = exported("trigger.ampscope");
    raw_exec(f, "CREATE TRIGGER evil AFTER INSERT ON samples BEGIN DELETE FROM runs; END;");
    expect_refused(f, "unknown trigger 'evil'");
    f = exported("view.ampscope");
    raw_exec(f, "CREATE VIEW v AS SELECT * FROM runs");
    expect_refused(f, "view 'v'");
    f = exported("types.ampscope");
    raw_exec(f, "DROP TRIGGER runs_criteria_immutable; UPDATE layer_chunks SET rows='abc'");
    expect_refused(f, "layer_chunks.rows");
    f = exported("chunk.ampscope");
    raw_exec(f, "UPDATE layer_chunks SET data=substr(data, 1, length(data) - 9)");
    expect_refused(f, "chunk.ampscope: layer statistics of pass");
    f = exported("chunk2.ampscope");
    raw_exec(f, "UPDATE layer_chunks SET data=zeroblob(20000000)");
    expect_refused(f, "unknown chunk format");
    f = exported("blob.ampscope");
    raw_exec(f, "UPDATE passes SET outputs=zeroblob(50000000) WHERE seq=0");
    expect_refused(f, "outputs do not match");
    f = exported("trunc.ampscope");
    {
        const auto size = fs::file_size(f);
        fs::resize_file(f, size / 2);
    }
    expect_refused(f, "trunc.ampscope");
    f = d.file("text.ampscope");
    std::ofstream(f) << "hello, not a database\n";
    expect_refused(f, "not an SQLite database");
    f = exported("newer.ampscope");
    raw_exec(f, "PRAGMA user_version=7");
    expect_refused(f, "newer ampscope");
}

TEST(Store, ImportsAFileOfSchemaVersion3) {
    // Files exported by an older ampscope are opened read-only, unmigrated: layer rows of `layers`.
    TempDir d;
    Store a(d.file("a.sqlite"));
    auto r = make_run();
    record(a, r);
    const auto f = d.file("old.ampscope");
    export_runs(a, {r.run_id}, f);
    move_layers_to_rows(f);
    raw_exec(f, "DROP TABLE layer_chunks; PRAGMA user_version=3");
    Store into(d.file("into.sqlite"));
    EXPECT_EQ(import_file(into, f).added, 1);
    EXPECT_EQ(js(into.load_run(r.run_id)), js(r));
}

TEST(Store, RefusesATableLayoutItDoesNotWrite) {
    TempDir d;
    const auto path = d.file("odd.sqlite");
    { Store s(path); }
    raw_exec(path, "DROP TABLE layers; CREATE TABLE layers(pass_id INTEGER, idx INTEGER)");
    try {
        Store s(path);
        FAIL();
    } catch (const StoreError& e) {
        EXPECT_NE(std::string(e.what()).find("table 'layers' lacks column"), std::string::npos) << e.what();
    }
}

TEST(Store, ReadOnlyWhenNotWritable) {
    if (geteuid() == 0) GTEST_SKIP() << "root can write any file";
    TempDir d;
    const auto path = d.file("ro.sqlite");
    { Store s(path); record(s, make_run()); }
    chmod(path.c_str(), 0444);
    Store s(path);
    EXPECT_TRUE(s.read_only());
    EXPECT_EQ(s.list_runs().size(), 1u);
}

TEST(Store, ExplicitReadOnlyRefusesWrites) {
    TempDir d;
    const auto path = d.file("ro.sqlite");
    auto r = make_run();
    { Store s(path); record(s, r); }
    Store s(path, Store::Mode::ReadOnly);
    EXPECT_TRUE(s.read_only());
    EXPECT_THROW(s.set_review(r.run_id, "accepted", "x"), StoreError);
}

TEST(Store, DeadRunsAreMarkedInterruptedOnNextOpen) {
    TempDir d;
    const auto path = d.file("runs.sqlite");
    auto r = make_run();
    pid_t child = fork();
    if (child == 0) {
        Store s(path);
        RunWriter w(s);
        w.run_started(r);
        w.pass_finished(r.passes[0]);
        _exit(0);  // dies without finishing the run
    }
    int status = 0;
    waitpid(child, &status, 0);
    Store s(path);
    EXPECT_EQ(s.status(r.run_id), "interrupted");
    EXPECT_EQ(s.load_run(r.run_id).passes.size(), 1u);  // the finished unit is kept
}

TEST(Store, LiveRunsAreNotMarkedInterrupted) {
    TempDir d;
    const auto path = d.file("runs.sqlite");
    Store writer_store(path);
    RunWriter w(writer_store);
    auto r = make_run();
    w.run_started(r);
    Store other(path);  // e.g. the GUI opening while this process records
    EXPECT_EQ(other.status(r.run_id), "running");
}

TEST(Store, ReaderLoopsWhileAWriterRecords) {
    TempDir d;
    const auto path = d.file("runs.sqlite");
    { Store init(path); }
    std::atomic<bool> done{false};
    std::atomic<int> reads{0};
    std::string failure;
    std::thread reader([&] {
        try {
            Store s(path, Store::Mode::ReadOnly);
            while (!done) {
                for (const auto& row : s.list_runs()) s.load_run(row.uuid);
                ++reads;
            }
        } catch (const std::exception& e) {
            failure = e.what();
        }
    });
    {
        Store s(path);
        for (int i = 0; i < 30; ++i) record(s, make_run(50, 200));
    }
    done = true;
    reader.join();
    EXPECT_EQ(failure, "");
    EXPECT_GT(reads.load(), 0);
}

// ---- hostile and unusual files (issue #15) ----

namespace {
std::string error_of(const std::function<void()>& f) {
    try { f(); } catch (const std::exception& e) { return e.what(); }
    return "(no error)";
}
}  // namespace

TEST(StoreHostile, ImpossibleSchemaVersionsAreRefusedByValue) {
    TempDir d;
    const auto path = d.file("v.sqlite");
    { Store s(path); record(s, make_run()); }
    for (const char* v : {"-1", "-2147483648", "2147483647", "1001"}) {
        raw_exec(path, std::string("PRAGMA user_version=") + v);
        for (auto mode : {Store::Mode::Create, Store::Mode::ReadWrite, Store::Mode::ReadOnly}) {
            const auto m = error_of([&] { Store s(path, mode); });
            EXPECT_NE(m.find(path), std::string::npos) << m;
            EXPECT_NE(m.find("impossible schema version " + std::string(v)), std::string::npos) << m;
        }
    }
    raw_exec(path, "PRAGMA user_version=5");
    EXPECT_EQ(Store(path).list_runs().size(), 1u);  // nothing was written meanwhile
}

TEST(StoreHostile, ReadingModesNeverCreateAFile) {
    TempDir d;
    const auto path = d.file("missing.sqlite");
    for (auto mode : {Store::Mode::ReadWrite, Store::Mode::ReadOnly})
        EXPECT_NE(error_of([&] { Store s(path, mode); }).find("file not found"), std::string::npos);
    EXPECT_FALSE(fs::exists(path));
    EXPECT_NE(error_of([] { Store s(""); }).find("empty database path"), std::string::npos);
    std::ofstream(d.file("empty.sqlite")).close();  // 0 bytes: an empty database, read as holding no runs
    Store ro(d.file("empty.sqlite"), Store::Mode::ReadOnly);
    EXPECT_TRUE(ro.list_runs().empty());
    EXPECT_THROW(ro.resolve("abc"), InputError);
    EXPECT_EQ(fs::file_size(d.file("empty.sqlite")), 0u);
}

TEST(StoreHostile, AForeignDatabaseIsNotWrittenUnlessAsked) {
    TempDir d;
    const auto path = d.file("people.sqlite");
    raw_exec(path, "CREATE TABLE people(name TEXT); INSERT INTO people VALUES('ada')");
    const auto before = fs::file_size(path);
    for (auto mode : {Store::Mode::Create, Store::Mode::ReadWrite, Store::Mode::ReadOnly}) {
        const auto m = error_of([&] { Store s(path, mode); });
        EXPECT_NE(m.find(path + ": not an ampscope run database"), std::string::npos) << m;
        EXPECT_NE(m.find("people"), std::string::npos) << m;
    }
    EXPECT_EQ(fs::file_size(path), before);
    EXPECT_FALSE(fs::exists(path + "-wal"));
    Store s(path, Store::Mode::Create, /*init_foreign=*/true);
    record(s, make_run());
    EXPECT_EQ(s.list_runs().size(), 1u);
}

TEST(StoreHostile, ADamagedLayerChunkLeavesTheRestReadable) {
    TempDir d;
    const auto path = d.file("runs.sqlite");
    auto r = make_run();
    { Store s(path); record(s, r); }
    raw_exec(path, "UPDATE layer_chunks SET data=X'00010203' WHERE pass_id=(SELECT max(pass_id) FROM layer_chunks)");
    Store s(path);
    EXPECT_THROW(s.load_run(r.run_id), StoreError);  // strict: export refuses
    std::vector<std::string> damaged;
    const auto got = s.load_run(r.run_id, &damaged);
    ASSERT_EQ(damaged.size(), 1u);
    EXPECT_NE(damaged[0].find("pass fp16"), std::string::npos) << damaged[0];
    ASSERT_EQ(got.passes.size(), 2u);
    EXPECT_EQ(got.passes[0].layers.size(), r.passes[0].layers.size());  // the fp32 pass is intact
    EXPECT_TRUE(got.passes[1].layers.empty());
    EXPECT_EQ(got.comparisons.size(), 1u);
    const auto m = error_of([&] { export_runs(s, {r.run_id}, d.file("out.ampscope")); });
    EXPECT_NE(m.find("not exported"), std::string::npos) << m;
    EXPECT_EQ(std::distance(fs::directory_iterator(d.file("")), fs::directory_iterator()), 3);  // db, -wal, -shm only
}

TEST(StoreHostile, MalformedJsonColumnsNameTheFileRunAndColumn) {
    TempDir d;
    const auto path = d.file("runs.sqlite");
    auto r = make_run();
    { Store s(path); record(s, r); }
    raw_exec(path, "DROP TRIGGER runs_criteria_immutable; UPDATE runs SET header_json='{oops'");
    auto m = error_of([&] { Store(path).load_run(r.run_id); });
    EXPECT_NE(m.find(path + ": run " + r.run_id + ": column runs.header_json"), std::string::npos) << m;
    const auto path2 = d.file("runs2.sqlite");
    { Store s(path2); record(s, r); }
    raw_exec(path2, "UPDATE passes SET keep_fp32='[1, 2]'");
    m = error_of([&] { Store(path2).load_run(r.run_id); });
    EXPECT_NE(m.find("column passes.keep_fp32"), std::string::npos) << m;
}

TEST(StoreHostile, ExportNeverReplacesTheOpenDatabase) {
    TempDir d;
    const auto path = d.file("runs.sqlite");
    auto r = make_run();
    Store s(path);
    record(s, r);
    fs::create_symlink(path, d.file("link.sqlite"));
    for (const auto& target : {path, d.file("link.sqlite"), d.file("./runs.sqlite"), path + "-wal"}) {
        const auto m = error_of([&] { export_runs(s, {r.run_id}, target, /*force=*/true); });
        EXPECT_NE(m.find("run database being exported from"), std::string::npos) << m;
    }
    std::ofstream(d.file("notes.txt")) << "keep me\n";
    EXPECT_NE(error_of([&] { export_runs(s, {r.run_id}, d.file("notes.txt")); }).find("not an ampscope export"), std::string::npos);
    for (int i = 0; i < 2; ++i) export_runs(s, {r.run_id}, d.file("a.ampscope"));  // an export may be replaced
    EXPECT_TRUE(is_export_file(d.file("a.ampscope")));
    EXPECT_FALSE(is_export_file(path));
    export_runs(s, {r.run_id}, d.file("notes.txt"), /*force=*/true);
    EXPECT_TRUE(is_export_file(d.file("notes.txt")));
    EXPECT_EQ(s.list_runs().size(), 1u);
}
