// SPDX-License-Identifier: MIT
// The run store: round trips, hostile files, concurrency, crash marking, read-only files.
// Schema versions and migrations: store_migration_test.cpp.
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <iterator>
#include <thread>

#include "ampscope/storage/output_file.h"
#include "store_test_util.h"

using namespace store_test;

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

/// A language-model comparison: flips by position, per-token figures with the KL divergence of
/// every position and the boundary positions (schema v7), also through export and import.
TEST(Store, SequenceComparisonReadsBack) {
    TempDir d;
    auto r = make_run();
    r.criteria.max_flip_rate = 0.25;
    r.criteria.mask_input = "attention_mask";
    auto& c = r.comparisons[0];
    c.flips[0].position = 3;
    TokenStats t;
    t.length = 2;
    t.vocab = 50;
    t.positions = 11;
    t.masked = 1;
    t.mean_kld = 1.5e-4;
    t.p99_kld = 9e-4;
    t.max_kld = 1e-3;
    t.same_top = 10.0 / 11;
    t.top5_overlap = 0.9;
    t.rms_dp = 0.01;
    t.label_tokens = 6;
    t.ref_ce = 3.9;
    t.amp_ce = 3.91;
    t.ref_ppl = std::exp(3.9);
    t.amp_ppl = std::exp(3.91);
    for (int i = 0; i < 12; ++i) t.kld.push_back(i == 5 ? NAN : float(i) * 1e-4f);
    t.boundary = {{"s2", 1, 1e-6}, {"s0", 0, 2e-3}};
    c.tokens = t;
    {
        Store s(d.file("a.sqlite"));
        record(s, r);
        const auto back = s.load_run(r.run_id);
        EXPECT_EQ(js(back), js(r));
        ASSERT_TRUE(back.comparisons[0].tokens);
        EXPECT_EQ(back.comparisons[0].tokens->kld.size(), 12u);
        EXPECT_EQ(back.comparisons[0].flips[0].position, 3);
        EXPECT_EQ(back.criteria.mask_input, "attention_mask");
        EXPECT_FALSE(back.comparisons.size() > 1 && back.comparisons[1].tokens);
        export_runs(s, {r.run_id}, d.file("x.ampscope"));
    }
    Store b(d.file("b.sqlite"));
    EXPECT_EQ(import_file(b, d.file("x.ampscope")).added, 1);
    EXPECT_EQ(js(b.load_run(r.run_id)), js(r));
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
    const RawDb raw(s.path());
    const int rc = sqlite3_exec(raw.get(), "UPDATE runs SET criteria_fixed_at='2000-01-01'", nullptr, nullptr, &err);
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
    s.set_review(r.run_id, ReviewStatus::Accepted, "carol");
    EXPECT_EQ(s.review(r.run_id).status, ReviewStatus::Accepted);
    EXPECT_EQ(s.review(r.run_id).by, "carol");
    s.delete_run(r.run_id);
    EXPECT_TRUE(s.list_runs().empty());
    sqlite3_stmt* st = nullptr;
    const RawDb raw(s.path());
    sqlite3_prepare_v2(raw.get(), "SELECT (SELECT count(*) FROM layers) + (SELECT count(*) FROM layer_chunks)", -1, &st,
                       nullptr);
    sqlite3_step(st);
    EXPECT_EQ(sqlite3_column_int(st, 0), 0);  // cascaded
    sqlite3_finalize(st);
}

/// The review is stored by its name; a stored name outside the vocabulary (a file not written by
/// ampscope: the schema's CHECK bypassed) is refused naming the column, wherever it is read.
TEST(Store, AStoredReviewOutsideTheVocabularyIsRefused) {
    TempDir d;
    Store s(d.file("runs.sqlite"));
    auto r = make_run();
    record(s, r);
    s.set_review(r.run_id, ReviewStatus::Rejected, "carol");
    {
        const RawDb raw(s.path());
        sqlite3_stmt* st = nullptr;
        sqlite3_prepare_v2(raw.get(), "SELECT review_status FROM runs", -1, &st, nullptr);
        ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))), "rejected");
        sqlite3_finalize(st);
        ASSERT_EQ(sqlite3_exec(raw.get(), "PRAGMA ignore_check_constraints=ON; UPDATE runs SET review_status='maybe'",
                               nullptr, nullptr, nullptr),
                  SQLITE_OK);
    }
    for (const auto& read : std::vector<std::function<void()>>{[&] { s.review(r.run_id); }, [&] { s.list_runs(); }}) {
        const auto m = error_of(read);
        EXPECT_NE(m.find("review_status"), std::string::npos) << m;
        EXPECT_NE(m.find("'maybe'; expected open, accepted or rejected"), std::string::npos) << m;
    }
}

/// Figures that may be non-finite read back as NaN / +inf / -inf (SQLite stores a NaN double as
/// NULL): the cross-entropies of an incident's AMP pass (NULL was read as 0, a perplexity of 1.0),
/// a pass's quality (NULL reads as "not evaluated"), a training step's losses and norms; also
/// from an export file.
TEST(Store, NonFiniteFiguresReadBackAsSuch) {
    TempDir d;
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    auto r = make_run();
    r.passes[0].quality = inf;
    r.passes[1].quality = nan;
    TokenStats t;
    t.length = 2;
    t.vocab = 4;
    t.positions = 12;
    t.label_tokens = 6;
    t.ref_ce = 2e5;  // finite, its perplexity overflows
    t.amp_ce = nan;
    t.ref_ppl = inf;
    t.amp_ppl = nan;
    t.kld.assign(12, 0.f);
    r.comparisons[0].tokens = t;
    {
        Store s(d.file("a.sqlite"));
        record(s, r);
        const auto back = s.load_run(r.run_id);
        EXPECT_EQ(js(back), js(r));
        ASSERT_TRUE(back.comparisons[0].tokens);
        EXPECT_TRUE(std::isnan(back.comparisons[0].tokens->amp_ce));
        EXPECT_TRUE(std::isnan(back.comparisons[0].tokens->amp_ppl)) << back.comparisons[0].tokens->amp_ppl;
        EXPECT_EQ(back.comparisons[0].tokens->ref_ppl, inf);
        ASSERT_TRUE(back.passes[1].quality) << "a NaN quality read back as not evaluated";
        EXPECT_TRUE(std::isnan(*back.passes[1].quality));
        EXPECT_EQ(back.passes[0].quality, inf);
        export_runs(s, {r.run_id}, d.file("x.ampscope"));
    }
    Store x(d.file("x.ampscope"), Store::Mode::ReadOnly);
    EXPECT_EQ(js(x.load_run(r.run_id)), js(r));

    Store s(d.file("t.sqlite"));
    {
        TrainWriter w(s);
        TrainResult h;
        h.run_id = make_uuid();
        h.spec.model = "demo:mlp";
        h.spec.data = "demo";
        h.model.source = "demo:mlp";
        h.started_at = now_iso8601();
        w.train_started(h);
        TrainStep st;
        st.loss_ref = 1.5;
        st.loss_amp = nan;
        st.grad_norm = inf;
        st.divergence = nan;
        w.step_finished(st);
        st.step = 1;
        st.loss_amp = -inf;
        st.grad_norm = 2.0;
        st.divergence = 0.5;
        w.step_finished(st);
        const auto steps = s.training_steps(h.run_id);
        ASSERT_EQ(steps.size(), 2u);
        EXPECT_TRUE(std::isnan(steps[0].loss_amp)) << steps[0].loss_amp;
        EXPECT_EQ(steps[0].grad_norm, inf);
        EXPECT_TRUE(std::isnan(steps[0].divergence)) << steps[0].divergence;
        EXPECT_EQ(steps[1].loss_amp, -inf);
        EXPECT_EQ(steps[1].loss_ref, 1.5);
    }
}

/// Databases written before NaN was stored as such: the NULL SQLite made of a NaN figure that is
/// always written reads as NaN (it was read as 0).
TEST(Store, OldNullFiguresReadAsNaN) {
    TempDir d;
    auto r = make_run();
    TokenStats t;
    t.length = 2;
    t.vocab = 4;
    t.label_tokens = 6;
    t.ref_ce = 1.0;
    t.amp_ce = 1.0;
    t.kld.assign(12, 0.f);
    r.comparisons[0].tokens = t;
    {
        Store s(d.file("a.sqlite"));
        record(s, r);
    }
    raw_exec(d.file("a.sqlite"), "UPDATE token_stats SET amp_ce=NULL");
    Store s(d.file("a.sqlite"));
    const auto back = s.load_run(r.run_id);
    EXPECT_TRUE(std::isnan(back.comparisons[0].tokens->amp_ce)) << back.comparisons[0].tokens->amp_ce;
    EXPECT_TRUE(std::isnan(back.comparisons[0].tokens->amp_ppl)) << back.comparisons[0].tokens->amp_ppl;
    EXPECT_EQ(back.comparisons[0].tokens->ref_ppl, std::exp(1.0));
}

TEST(Store, ExportImportRoundTripIsIdempotent) {
    TempDir d;
    Store a(d.file("a.sqlite"));
    auto r1 = make_run(), r2 = make_run(3, 1);
    record(a, r1);
    record(a, r2);
    a.annotate(r1.run_id, {"", "ann", "", "sample", "s2", "check"});
    a.set_review(r1.run_id, ReviewStatus::Rejected, "dan");
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
    EXPECT_EQ(b.review(r1.run_id).status, ReviewStatus::Rejected);
    EXPECT_EQ(b.list_runs().size(), 2u);
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
    // a precision no build writes: refused by column, not read as fp32 (a second FP32 pass
    // carrying the AMP pass's figures) nor a comparison's as fp16
    f = exported("precision.ampscope");
    raw_exec(f, "UPDATE passes SET precision='fp9' WHERE seq=1");
    expect_refused(f, "passes.precision 'fp9'; expected");
    f = exported("precision2.ampscope");
    raw_exec(f, "UPDATE comparisons SET precision='\x1b[31mbf16'");
    expect_refused(f, "comparisons.precision");
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
    raw_exec(f, "PRAGMA user_version=" + std::to_string(kSchemaVersion + 1));
    expect_refused(f, "newer ampscope");
}

namespace {

/// What Store does with a file this process cannot write: opened read-only, runs read,
/// writes refused with a StoreError naming the file, not a byte changed. "" when all holds.
std::string check_unwritable_file(const std::string& path, const std::string& uuid, const std::string& before) {
    if (access(path.c_str(), W_OK) == 0) return "the file is writable for this process: nothing would be proven";
    Store s(path);  // a recording open (Create mode): must fall back to read-only, not fail
    std::string out;
    if (!s.read_only()) out += "not opened read-only; ";
    if (s.list_runs().size() != 1u || s.load_run(uuid).passes.size() != 2u) out += "its run does not read back; ";
    const auto m = error_of([&] { s.set_review(uuid, ReviewStatus::Accepted, "x"); });
    if (m.find(path + ": opened read-only") == std::string::npos) out += "a write was not refused by name: " + m + "; ";
    std::ifstream in(path, std::ios::binary);
    if (std::string(std::istreambuf_iterator<char>(in), {}) != before) out += "the file was written; ";
    return out;
}

}  // namespace

TEST(Store, ReadOnlyWhenNotWritable) {
    // A file without write permission. Root may write any file, so as root the same check runs
    // in a child process that has first given up root for the unprivileged uid/gid 65534
    // ("nobody"): the real open path on a file that process really cannot write (access() and
    // SQLite both refuse it), not a simulation. The folder stays writable, as in a user's home.
    TempDir d;
    const auto path = d.file("ro.sqlite");
    const auto r = make_run();
    {
        Store s(path);
        record(s, r);
    }
    ASSERT_EQ(chmod(path.c_str(), 0444), 0);
    ASSERT_EQ(chmod(fs::path(path).parent_path().c_str(), 0777), 0);
    std::string before;
    {
        std::ifstream in(path, std::ios::binary);
        before.assign(std::istreambuf_iterator<char>(in), {});
    }
    if (geteuid() != 0) {
        EXPECT_EQ(check_unwritable_file(path, r.run_id, before), "");
        return;
    }
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(fds[0]);
        if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(77);
        std::string res;
        try {
            res = check_unwritable_file(path, r.run_id, before);
        } catch (const std::exception& e) {
            res = std::string("threw: ") + e.what();
        }
        res = "result:" + res;
        [[maybe_unused]] const auto n = write(fds[1], res.data(), res.size());
        _exit(0);
    }
    close(fds[1]);
    std::string got;
    char buf[512];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, size_t(n));
    close(fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
        GTEST_SKIP() << "root without CAP_SETUID cannot drop to uid 65534";
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    EXPECT_EQ(got, "result:");
}

TEST(Store, ExplicitReadOnlyRefusesWrites) {
    TempDir d;
    const auto path = d.file("ro.sqlite");
    auto r = make_run();
    {
        Store s(path);
        record(s, r);
    }
    Store s(path, Store::Mode::ReadOnly);
    EXPECT_TRUE(s.read_only());
    EXPECT_THROW(s.set_review(r.run_id, ReviewStatus::Accepted, "x"), StoreError);
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

TEST(StoreHostile, ImpossibleSchemaVersionsAreRefusedByValue) {
    TempDir d;
    const auto path = d.file("v.sqlite");
    {
        Store s(path);
        record(s, make_run());
    }
    for (const char* v : {"-1", "-2147483648", "2147483647", "1001"}) {
        raw_exec(path, std::string("PRAGMA user_version=") + v);
        for (auto mode : {Store::Mode::Create, Store::Mode::ReadWrite, Store::Mode::ReadOnly}) {
            const auto m = error_of([&] { Store s(path, mode); });
            EXPECT_NE(m.find(path), std::string::npos) << m;
            EXPECT_NE(m.find("impossible schema version " + std::string(v)), std::string::npos) << m;
        }
    }
    raw_exec(path, "PRAGMA user_version=" + std::to_string(kSchemaVersion));
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
    {
        Store s(path);
        record(s, r);
    }
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
    {
        Store s(path);
        record(s, r);
    }
    raw_exec(path, "DROP TRIGGER runs_criteria_immutable; UPDATE runs SET header_json='{oops'");
    auto m = error_of([&] { Store(path).load_run(r.run_id); });
    EXPECT_NE(m.find(path + ": run " + r.run_id + ": column runs.header_json"), std::string::npos) << m;
    const auto path2 = d.file("runs2.sqlite");
    {
        Store s(path2);
        record(s, r);
    }
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
    EXPECT_NE(error_of([&] { export_runs(s, {r.run_id}, d.file("notes.txt")); }).find("not an ampscope export"),
              std::string::npos);
    for (int i = 0; i < 2; ++i) export_runs(s, {r.run_id}, d.file("a.ampscope"));  // an export may be replaced
    EXPECT_TRUE(is_export_file(d.file("a.ampscope")));
    EXPECT_FALSE(is_export_file(path));
    export_runs(s, {r.run_id}, d.file("notes.txt"), /*force=*/true);
    EXPECT_TRUE(is_export_file(d.file("notes.txt")));
    EXPECT_EQ(s.list_runs().size(), 1u);
}

// ---- the output guard holds what it checked (issue 28) ----

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

const std::vector<ampscope::storage::ProtectedFile> kNoInputs;

}  // namespace

TEST(OutputGuard, ALinkSwappedInAfterTheCheckIsNeverWrittenThrough) {
    TempDir d;
    const auto victim = d.file("model.pt"), out = d.file("out.json");
    spit(victim, "the model");
    for (bool earlier : {false, true}) {  // the name held nothing / an earlier output when checked
        if (earlier) spit(out, R"({"run_id": "x", "verdict": "accepted", "criteria": {}, "passes": []})");
        check_output_file(out, "--json", OutputKind::RunJson, kNoInputs, false);
        std::remove(out.c_str());
        ASSERT_EQ(::symlink(victim.c_str(), out.c_str()), 0);
        const auto m = error_of([&] { write_output_file(out, "--json", "{}\n"); });
        EXPECT_NE(m.find("while the command worked"), std::string::npos) << m;
        EXPECT_EQ(slurp(victim), "the model");
        std::remove(out.c_str());
    }
}

TEST(OutputGuard, AnotherFileSwappedInIsNotReplaced) {
    TempDir d;
    const auto out = d.file("out.json"), other = d.file("other");
    spit(out, R"({"run_id": "x", "verdict": "accepted", "criteria": {}, "passes": []})");
    check_output_file(out, "--json", OutputKind::RunJson, kNoInputs, false);
    spit(other, "precious");
    ASSERT_EQ(std::rename(other.c_str(), out.c_str()), 0);  // another file (inode) at the name
    EXPECT_NE(error_of([&] { write_output_file(out, "--json", "{}\n"); }).find("replaced by another file"),
              std::string::npos);
    EXPECT_EQ(slurp(out), "precious");
    for (const auto& e : fs::directory_iterator(fs::path(out).parent_path()))
        EXPECT_EQ(e.path().string().find("partial"), std::string::npos) << e.path();
}

TEST(OutputGuard, TheCheckedFileIsReplacedAndALinkToItKept) {
    TempDir d;
    const auto target = d.file("real.json"), link = d.file("link.json");
    spit(target, R"({"run_id": "x", "verdict": "accepted", "criteria": {}, "passes": []})");
    ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
    check_output_file(link, "--json", OutputKind::RunJson, kNoInputs, false);
    write_output_file(link, "--json", "new\n");
    EXPECT_EQ(slurp(target), "new\n");
    EXPECT_TRUE(fs::is_symlink(link));
}

TEST(OutputGuard, NothingIsCreatedInsideAnInputFolder) {
    TempDir d;
    fs::create_directories(d.file("checkpoint-9/sub"));
    const std::vector<ProtectedFile> inputs = {{d.file("checkpoint-9"), "the checkpoint (--checkpoint)"}};
    for (const auto& p :
         {d.file("checkpoint-9/scaler.pt"), d.file("checkpoint-9/sub/x.json"), d.file("checkpoint-9/./y.json")}) {
        const auto m = error_of([&] { check_output_file(p, "--json", OutputKind::ReplayJson, inputs, true); });
        EXPECT_NE(m.find("lies inside the checkpoint (--checkpoint)"), std::string::npos) << m;
    }
    check_output_file(d.file("beside.json"), "--json", OutputKind::ReplayJson, inputs, false);  // beside it: fine
}
