// SPDX-License-Identifier: MIT
// Helpers shared by the store tests (store_test.cpp, store_migration_test.cpp).
#pragma once
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>

#include "ampscope/engine/errors.h"
#include "ampscope/storage/json_io.h"
#include "ampscope/storage/store.h"

namespace store_test {

using namespace ampscope;
using namespace ampscope::storage;
namespace fs = std::filesystem;

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
inline RunResult make_run(int samples = 6, int layers = 5, const std::string& model = "demo:mlp") {
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
    r.model.source = model;
    r.model.kind = "demo";
    r.model.sha256 = "abc";
    r.model.weights_sha256 = "def";
    r.model.parameters = 123;
    r.model.modules = {"", "fc1"};
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
        for (int i = 0; i < samples * 2; ++i)
            pass.outputs.push_back(float(i) * 0.25f + (p == Precision::Fp16 ? 1e-3f : 0.f));
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

inline void record(Store& s, const RunResult& r) {
    RunWriter w(s);
    w.run_started(r);
    for (const auto& p : r.passes) w.pass_finished(p);
    for (const auto& c : r.comparisons) w.comparison_finished(c);
    w.run_finished(r);
}

inline std::string js(const RunResult& r) {
    return json::run_to_json(r, true);
}

inline void raw_exec(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    std::string m = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << m;
}

/// A second connection to a database file, for what the store's API does not offer on
/// purpose (raw SQL: editing a file by hand, counting rows, checking integrity).
class RawDb {
public:
    explicit RawDb(const std::string& path) {
        if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
            ADD_FAILURE() << "cannot open " << path;
        sqlite3_busy_timeout(db_, 5000);
    }
    ~RawDb() { sqlite3_close(db_); }
    RawDb(const RawDb&) = delete;
    RawDb& operator=(const RawDb&) = delete;
    sqlite3* get() const { return db_; }

private:
    sqlite3* db_ = nullptr;
};

inline std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "(no error)";
}

/// SQL that takes a database of the current schema back to version `to`: what each later
/// migration added dropped, user_version set. (Layer statistics before version 4 were rows of
/// `layers`: store_migration_test moves them before.)
inline std::string undo_migrations(int to) {
    std::string drop;
    if (to < 11) drop += "DROP TABLE fp8_real_gemm; ";
    if (to < 10)
        drop +=
            "ALTER TABLE training_steps DROP COLUMN fp8_saturated; "
            "ALTER TABLE training_steps DROP COLUMN fp8_saturated_at; ";
    if (to < 9) drop += "DROP TABLE fp8_operands; ";
    if (to < 8) drop += "DROP TABLE run_ranks; ";
    if (to < 7) drop += "DROP TABLE token_boundaries; DROP TABLE token_stats; ALTER TABLE flips DROP COLUMN position; ";
    if (to < 6) drop += "ALTER TABLE training_steps DROP COLUMN growth_tracker; ";
    if (to < 5) drop += "ALTER TABLE training_steps DROP COLUMN grad_underflow; ";
    if (to < 4) drop += "DROP TABLE layer_chunks; ";
    if (to < 3) drop += "DROP TABLE benchmarks; DROP INDEX IF EXISTS comparisons_verdict; ";
    if (to < 2) drop += "DROP TABLE checkpoints; DROP TABLE training_steps; ";
    return drop + "PRAGMA user_version=" + std::to_string(to);
}

}  // namespace store_test
