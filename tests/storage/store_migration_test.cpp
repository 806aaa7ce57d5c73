// SPDX-License-Identifier: MIT
// Schema versions and migrations of the run store: real files written by each released
// schema layout (tests/fixtures/store, built from the old commits), and synthetic ones.
#include <fstream>
#include <iterator>
#include <sstream>

#include "fixture_runs.h"
#include "store_test_util.h"

using namespace store_test;

namespace {

/// One committed fixture: tests/fixtures/store/NAME.db (and NAME.ampscope when exported).
struct FixtureFile {
    const char* name;
    int version;     ///< the schema version that wrote it
    bool train;      ///< holds the training run
    bool bench;      ///< holds the benchmark
    bool underflow;  ///< training steps carry grad_underflow
    bool exported;   ///< NAME.ampscope exists
};

const FixtureFile kFixtures[] = {
    {"v2-4fe01ea", 2, false, false, false, true},      {"v2-236a746", 2, false, false, false, true},
    {"v2-7376c9d", 2, true, false, false, true},       {"v3-a19053a", 3, true, true, false, true},
    {"v3-from-4fe01ea", 3, false, true, false, false}, {"v4-289f193", 4, true, true, false, true},
    {"v5-773949e", 5, true, true, true, true},
};

std::string fixture_path(const FixtureFile& f, const char* ext) {
    return std::string(AMPSCOPE_STORE_FIXTURES) + "/" + f.name + ext;
}

std::string bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A private copy: the committed bytes are never opened in place.
std::string copy_of(const FixtureFile& f, const char* ext, const TempDir& d) {
    const auto to = d.file(std::string(f.name) + ext);
    fs::copy_file(fixture_path(f, ext), to);
    return to;
}

std::string sql_text(Store& s, const std::string& q) {
    sqlite3_stmt* st = nullptr;
    const RawDb raw(s.path());
    EXPECT_EQ(sqlite3_prepare_v2(raw.get(), q.c_str(), -1, &st, nullptr), SQLITE_OK) << q;
    std::string out;
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        const auto* t = sqlite3_column_text(st, 0);
        out += std::string(out.empty() ? "" : "|") + (t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    sqlite3_finalize(st);
    return out;
}

/// The two comparison runs as fixture_runs.h wrote them, value for value.
void expect_compare_runs(const Store& s, const FixtureFile& f, size_t notes_expected = 2) {
    for (bool accepted : {false, true}) {
        const auto want = fixture::compare_run(accepted);
        const auto got = s.load_run(want.run_id);
        EXPECT_EQ(js(got), js(want)) << f.name << " run " << want.run_id;
        ASSERT_EQ(got.passes.size(), 2u) << f.name;
        const auto& l = got.passes[1].layers;
        ASSERT_EQ(l.size(), 3u) << f.name;
        EXPECT_EQ(l[0].shape, (std::vector<int64_t>{4, 8})) << f.name;
        EXPECT_EQ(l[2].shape, (std::vector<int64_t>{4, 2})) << f.name;
        EXPECT_EQ(l[0].stats.absmax, 70010.0) << f.name;
        EXPECT_EQ(l[2].stats.fp16_overflow, 5) << f.name;
        EXPECT_TRUE(l[0].origin) << f.name;
        EXPECT_FALSE(got.passes[0].layers[0].origin) << f.name;
        EXPECT_FALSE(l[2].inputs_finite) << f.name;
        EXPECT_TRUE(l[1].autocast) << f.name;
        EXPECT_EQ(got.passes[0].layers[1].stats.mean, 0.25) << f.name;
    }
    const auto notes = s.annotations(fixture::kRejectedRun);
    ASSERT_EQ(notes.size(), notes_expected) << f.name;
    EXPECT_EQ(notes[0].text, "edge overflow in fc1");
    EXPECT_EQ(notes[1].target_kind, "sample");
    EXPECT_EQ(notes[1].target, "s1");
    EXPECT_EQ(s.review(fixture::kRejectedRun).status, ReviewStatus::Rejected) << f.name;
    EXPECT_EQ(s.review(fixture::kRejectedRun).by, "reviewer-r") << f.name;
    EXPECT_EQ(s.review(fixture::kAcceptedRun).status, ReviewStatus::Accepted) << f.name;
}

/// Everything the fixture holds reads back (training and benchmark where that version had them).
void expect_fixture_runs(const Store& s, const FixtureFile& f) {
    EXPECT_EQ(s.list_runs().size(), f.train ? 3u : 2u) << f.name;
    expect_compare_runs(s, f);
    if (f.train) {
        EXPECT_EQ(s.kind(fixture::kTrainRun), "train");
        const auto steps = s.training_steps(fixture::kTrainRun);
        const auto want = fixture::train_steps();
        ASSERT_EQ(steps.size(), want.size()) << f.name;
        for (size_t i = 0; i < steps.size(); ++i) {
            EXPECT_EQ(steps[i].loss_amp, want[i].loss_amp) << f.name << " step " << i;
            EXPECT_EQ(steps[i].scale, want[i].scale) << f.name << " step " << i;
            EXPECT_EQ(steps[i].skipped, want[i].skipped) << f.name << " step " << i;
            EXPECT_EQ(steps[i].nonfinite_stage, want[i].nonfinite_stage) << f.name << " step " << i;
            EXPECT_EQ(steps[i].grad_underflow, f.underflow ? int64_t(10 * i + 1) : -1) << f.name << " step " << i;
        }
        EXPECT_EQ(s.checkpoints(fixture::kTrainRun), std::vector<std::string>{fixture::kCheckpoint}) << f.name;
        // the header of the training JSON these builds stored, read as values
        const auto t = s.load_training(fixture::kTrainRun);
        EXPECT_EQ(t.spec.data, "demo") << f.name;
        EXPECT_EQ(t.spec.batch_size, 4) << f.name;
        EXPECT_EQ(t.spec.precision, Precision::Fp16) << f.name;
        EXPECT_EQ(t.model.source, "demo:mlp") << f.name;
        EXPECT_EQ(t.model.weights_sha256, fixture::kWeightsSha) << f.name;
        EXPECT_EQ(t.started_at, "2026-11-29T11:00:00.000Z") << f.name;
        EXPECT_EQ(t.steps.size(), 3u) << f.name;
        EXPECT_EQ(t.skipped, 1) << f.name;
        EXPECT_EQ(t.effective_updates, 2) << f.name;
    }
    const auto bench = s.benchmarks(fixture::kAcceptedRun);
    ASSERT_EQ(bench.size(), f.bench ? 1u : 0u) << f.name;
    if (f.bench) {
        // the stored result read as values (kBenchJson: two figures, nothing else)
        ASSERT_EQ(bench[0].result.figures.size(), 2u);
        EXPECT_EQ(bench[0].result.figures[0].precision, Precision::Fp32);
        EXPECT_EQ(bench[0].result.figures[1].precision, Precision::Bf16);
        EXPECT_EQ(bench[0].result.figures[1].median_ms, 1.0);
        EXPECT_EQ(bench[0].result.batch, 0);
        EXPECT_TRUE(bench[0].validated);
    }
}

/// Runs `check` on every fixture; an exception fails that fixture only, naming it.
void for_each_fixture(const std::function<void(const FixtureFile&)>& check) {
    for (const auto& f : kFixtures) {
        SCOPED_TRACE(f.name);
        try {
            check(f);
        } catch (const std::exception& e) {
            ADD_FAILURE() << f.name << ": " << e.what();
        }
    }
}

}  // namespace

TEST(StoreFixtures, EveryReleasedLayoutMigratesAndReadsBack) {
    for_each_fixture([](const FixtureFile& f) {
        TempDir d;
        const auto path = copy_of(f, ".db", d);
        {
            Store s(path);  // a recording open: migrates
            EXPECT_EQ(s.schema_version(), kSchemaVersion) << f.name;
            EXPECT_EQ(sql_text(s, "PRAGMA integrity_check"), "ok") << f.name;
            EXPECT_EQ(sql_text(s, "PRAGMA foreign_key_check"), "") << f.name;
            EXPECT_EQ(sql_text(s, "SELECT count(*) FROM pragma_table_info('layers') WHERE name='autocast'"), "0")
                << f.name;
            expect_fixture_runs(s, f);
            // the migrated file takes new runs, and notes on the old runs' layers
            const auto r = make_run();
            record(s, r);
            EXPECT_EQ(js(s.load_run(r.run_id)), js(r)) << f.name;
            Annotation a;
            a.target_kind = "layer";
            a.target = "2";
            a.text = "a note on an old layer";
            s.annotate(fixture::kRejectedRun, a);
            EXPECT_EQ(s.annotations(fixture::kRejectedRun).back().target, "fp16:2") << f.name;
        }
        // the bench gate reads old runs: the accepted BF16 run validates its own policy, not one with FP32 regions
        BenchPolicy policy{
            fixture::kModelSha, fixture::kWeightsSha, fixture::kProbesSha, "cpu", Precision::Bf16, "eval", {}};
        Store gate(path, Store::Mode::ReadOnly);
        const auto v = gate.find_validation(policy);
        EXPECT_EQ(v.run, fixture::kAcceptedRun) << f.name << ": " << v.refusal;
        EXPECT_EQ(v.criteria.max_flips, 1) << f.name;
        policy.keep_fp32 = {"fc1"};
        EXPECT_NE(gate.find_validation(policy).refusal.find("FP32 regions (validated none, benchmarked [fc1])"),
                  std::string::npos);
        Store again(path, Store::Mode::ReadWrite);  // a second open finds nothing to migrate
        EXPECT_EQ(again.list_runs().size(), f.train ? 4u : 3u) << f.name;
        expect_compare_runs(again, f, 3);  // and the note on a layer
    });
}

TEST(StoreFixtures, EveryReleasedLayoutReadsWhenOpenedReadOnly) {
    // Read-only opens (export, the GUI on an unwritable file) cannot migrate: the old layout is read as it is.
    for_each_fixture([](const FixtureFile& f) {
        TempDir d;
        const auto path = copy_of(f, ".db", d);
        {
            Store s(path, Store::Mode::ReadOnly);
            EXPECT_EQ(s.schema_version(), f.version) << f.name;
            expect_fixture_runs(s, f);
        }
        EXPECT_EQ(bytes_of(path), bytes_of(fixture_path(f, ".db"))) << f.name << " was written";
    });
}

TEST(StoreFixtures, ExportsOfEveryReleasedVersionImport) {
    for_each_fixture([](const FixtureFile& f) {
        if (!f.exported) return;
        TempDir d;
        const auto file = copy_of(f, ".ampscope", d);
        Store into(d.file("into.sqlite"));
        const auto res = import_file(into, file);
        EXPECT_EQ(res.added, 2) << f.name;
        FixtureFile imported = f;
        imported.train = imported.bench = false;  // exports hold the comparison runs only
        expect_fixture_runs(into, imported);
        EXPECT_EQ(import_file(into, file).skipped, 2) << f.name;
    });
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
            const RawDb raw(path);
            ASSERT_EQ(
                sqlite3_prepare_v2(
                    raw.get(), "SELECT p.id FROM passes p JOIN runs r ON r.id=p.run_id WHERE r.uuid=? ORDER BY p.seq",
                    -1, &q, nullptr),
                SQLITE_OK);
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
            const int64_t ints[11] = {t.count,          t.nan,
                                      t.posinf,         t.neginf,
                                      t.zeros,          t.fp16_overflow,
                                      t.fp16_subnormal, t.fp16_underflow,
                                      t.bf16_overflow,  t.bf16_subnormal,
                                      t.bf16_underflow};
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
        raw_exec(path, undo_migrations(from));
        Store s(path);
        EXPECT_EQ(s.schema_version(), kSchemaVersion) << "from " << from;
        EXPECT_EQ(js(s.load_run(r.run_id)), js(r)) << "from " << from;
        sqlite3_stmt* st = nullptr;
        const RawDb raw(path);
        ASSERT_EQ(sqlite3_prepare_v2(raw.get(), "SELECT count(*) FROM training_steps", -1, &st, nullptr), SQLITE_OK);
        sqlite3_finalize(st);
        ASSERT_EQ(sqlite3_prepare_v2(raw.get(), "SELECT count(*) FROM benchmarks", -1, &st, nullptr), SQLITE_OK);
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
