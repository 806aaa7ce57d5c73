// SPDX-License-Identifier: MIT
// Reading the run store: run list, whole runs (damage-tolerant layer statistics), annotations.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "ampscope/engine/errors.h"
#include "ampscope/storage/store.h"
#include "ampscope/engine/rules.h"
#include "ampscope/engine/text.h"
#include "ampscope/storage/json_io.h"
#include "json_map.h"
#include "layer_chunk.h"
#include "legacy_layers.h"
#include "layer_stats.h"
#include "rank_rows.h"
#include "fp8_rows.h"
#include "real_column.h"
#include "token_rows.h"
#include "schema.h"
#include "serialize.h"
#include "sqlite.h"

namespace ampscope::storage {

sqlite3* StoreAccess::db(const Store& s) {
    return s.db_;
}

using nlohmann::json;
using sql::Stmt;

bool Store::still_empty() const {
    if (!empty_) return false;
    Stmt t(
        db_,
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='runs'");  // another process may have initialised it
    return !t.step();
}

std::vector<RunRow> Store::list_runs(const RunFilter& f) const {
    if (still_empty()) return {};
    Stmt s(db_, R"sql(
SELECT r.uuid, r.kind, r.status, COALESCE(r.verdict,''), COALESCE(r.model_source,''), COALESCE(r.probes_source,''),
       COALESCE(r.device,''), COALESCE(r.precisions,''), COALESCE(r.mode,''), r.started_at, COALESCE(r.finished_at,''),
       r.review_status, COALESCE(r.error,''), COALESCE(r.probe_count,0),
       (SELECT count(*) FROM annotations a WHERE a.run_id = r.id)
FROM runs r
WHERE (?1 = '' OR instr(r.model_source, ?1) > 0)
  AND (?2 = '' OR instr(',' || r.precisions || ',', ',' || ?2 || ',') > 0)
  AND (?3 = '' OR r.device = ?3) AND (?4 = '' OR r.verdict = ?4) AND (?5 = '' OR r.status = ?5)
  AND (?6 = '' OR r.started_at >= ?6) AND (?7 = '' OR r.started_at <= ?7)
ORDER BY r.started_at DESC, r.id DESC LIMIT ?8)sql");
    s.bind(1, f.model)
        .bind(2, f.precision)
        .bind(3, f.device)
        .bind(4, f.verdict)
        .bind(5, f.status)
        .bind(6, f.since)
        .bind(7, f.until)
        .bind(8, int64_t(f.limit));
    std::vector<RunRow> out;
    while (s.step()) {
        RunRow r;
        r.uuid = s.text(0);
        r.kind = s.text(1);
        r.status = s.text(2);
        r.verdict = s.text(3);
        r.model = s.text(4);
        r.probes = s.text(5);
        r.device = s.text(6);
        r.precisions = s.text(7);
        r.mode = s.text(8);
        r.started_at = s.text(9);
        r.finished_at = s.text(10);
        r.review_status = parse_review_status(s.text(11), "review_status");
        r.error = s.text(12);
        r.samples = int(s.i64(13));
        r.annotations = int(s.i64(14));
        out.push_back(std::move(r));
    }
    return out;
}

std::string Store::resolve(const std::string& prefix) const {
    if (prefix.empty()) throw InputError("RUN", "", "empty run id");
    if (still_empty()) throw InputError(path_, "RUN", "no run '" + prefix + "': the database is empty");
    Stmt s(db_, "SELECT uuid FROM runs WHERE substr(uuid, 1, length(?1)) = ?1 LIMIT 2");
    s.bind(1, prefix);
    std::vector<std::string> found;
    while (s.step()) found.push_back(s.text(0));
    if (found.empty())
        throw InputError(path_, "RUN", "no run '" + prefix + "' in this database (see `ampscope-cli list`)");
    if (found.size() > 1) throw InputError(path_, "RUN", "'" + prefix + "' matches several runs; give more of the id");
    return found[0];
}

/// Layer statistics of one pass. `where` names the pass in messages. A chunk (or a legacy row)
/// that does not decode throws, or with `damaged` is skipped and described there.
std::vector<LayerStat> read_layers(sqlite3* db, int64_t pass_id, const std::string& where,
                                   std::vector<std::string>* damaged) {
    std::vector<LayerStat> out;
    bool chunks = false;  // a file of schema v3 or older, opened read-only, has no chunks table
    {
        Stmt t(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='layer_chunks'");
        chunks = t.step();
    }
    if (chunks) {
        {
            Stmt n(db, "SELECT sum(rows) FROM layer_chunks WHERE pass_id=?1");
            n.bind(1, pass_id);
            if (n.step()) out.reserve(size_t(std::clamp<int64_t>(n.i64(0), 0, int64_t(1) << 24)));
        }
        Stmt c(db, "SELECT data, first_idx, rows FROM layer_chunks WHERE pass_id=?1 ORDER BY first_idx");
        c.bind(1, pass_id);
        bool any = false;
        while (c.step()) {
            any = true;
            const size_t before = out.size();
            try {
                if (c.type(0) != SQLITE_BLOB)
                    throw StoreError("layer statistics of " + where + " are malformed: not a blob");
                chunk::decode(c.blob_ptr(0), size_t(c.bytes(0)), out, where);
            } catch (const StoreError& e) {
                if (!damaged) throw;
                out.resize(before);  // nothing of a damaged chunk is shown
                damaged->push_back(std::string(e.what()) + " (the chunk of layers from index " +
                                   std::to_string(c.i64(1)) + ", " + std::to_string(c.i64(2)) + " rows, is left out)");
            }
        }
        if (any) return out;
    }
    // Rows written before schema v4, one per layer: packed (8ebd10b on), or the 26 columns of the
    // first builds in a file opened read-only (a writable open has converted them).
    if (legacy::has_legacy_layers(db)) return legacy::read_legacy_layers(db, pass_id, where, damaged);
    Stmt s(db, "SELECT idx, module, op, dtype, shape, flags, stats FROM layers WHERE id BETWEEN ?1 AND ?2 ORDER BY id");
    s.bind(1, int64_t(pass_id << 32)).bind(2, int64_t(pass_id << 32 | int64_t(0xffffffff)));
    int bad = 0;
    while (s.step()) {
        LayerStat l;
        l.index = int(s.i64(0));
        l.module = s.text(1);
        l.op = s.text(2);
        l.dtype = s.text(3);
        const int nb = s.bytes(4);
        const bool ok = (s.type(4) == SQLITE_BLOB || nb == 0) && nb % int(sizeof(int64_t)) == 0 && nb <= 64 * 8 &&
                        s.bytes(6) == int(sizeof(PackedStats)) && s.i64(0) >= 0 && s.i64(0) <= INT32_MAX;
        if (!ok) {
            if (!damaged)
                throw StoreError("layer statistics of " + where + " are malformed (layer row " +
                                 std::to_string(s.i64(0)) + ")");
            ++bad;
            continue;
        }
        l.shape.resize(size_t(nb) / sizeof(int64_t));
        if (nb) std::memcpy(l.shape.data(), s.blob_ptr(4), size_t(nb));
        const int64_t flags = s.i64(5);
        l.autocast = flags & 1;
        l.inputs_finite = (flags >> 1) & 1;
        l.origin = (flags >> 2) & 1;
        PackedStats p;
        std::memcpy(&p, s.blob_ptr(6), sizeof p);
        if (!plausible(p)) {
            if (!damaged)
                throw StoreError("layer statistics of " + where + " are malformed (layer row " +
                                 std::to_string(l.index) + ": counters out of range)");
            ++bad;
            continue;
        }
        l.stats = unpack(p);
        out.push_back(std::move(l));
    }
    if (bad)
        damaged->push_back("layer statistics of " + where + " are malformed: " + std::to_string(bad) +
                           " layer row(s) left out");
    return out;
}

namespace {

/// "FILE: run UUID: column COLUMN": how messages about a stored value name it.
std::string column_of(const std::string& file, const std::string& uuid, const char* column) {
    return file + ": run " + uuid + ": column " + column;
}

/// A JSON array of strings held in a column.
std::vector<std::string> strings_column(const std::string& text, const std::string& file, const std::string& uuid,
                                        const char* column) {
    const auto where = column_of(file, uuid, column);
    const auto j = ser::parse_column(text, where);
    try {
        return j.get<std::vector<std::string>>();
    } catch (const json::exception& e) {
        throw StoreError(where + " is malformed: expected an array of strings (" + e.what() + ")");
    }
}

/// An origin column (NULL: none).
std::optional<Origin> origin_column(const Stmt& s, int col, const std::string& file, const std::string& uuid,
                                    const char* column) {
    if (s.is_null(col)) return std::nullopt;
    const auto where = column_of(file, uuid, column);
    const auto o = ser::parse_column(s.text(col), where);
    try {
        return jmap::read_origin(o);
    } catch (const json::exception& e) {
        throw StoreError(where + " is malformed: " + e.what());
    }
}

}  // namespace

std::string Store::status(const std::string& uuid) const {
    Stmt s(db_, "SELECT status FROM runs WHERE uuid=?1");
    s.bind(1, uuid);
    return s.step() ? s.text(0) : std::string();
}

std::string Store::error(const std::string& uuid) const {
    Stmt s(db_, "SELECT COALESCE(error,'') FROM runs WHERE uuid=?1");
    s.bind(1, uuid);
    return s.step() ? s.text(0) : std::string();
}

RunResult Store::load_run(const std::string& uuid, std::vector<std::string>* damaged) const {
    if (kind(uuid) == "train")
        throw InputError(
            path_, "RUN",
            "run " + uuid +
                " is a training run; expected a comparison run (recorded by ampscope-cli run or File → New run)");
    RunResult r;
    int64_t id = -1;
    {
        Stmt s(db_,
               "SELECT id, header_json, COALESCE(verdict,''), started_at, COALESCE(finished_at,''), warnings_json "
               "FROM runs WHERE uuid=?1");
        s.bind(1, uuid);
        if (!s.step()) throw InputError(path_, "RUN", "no run '" + uuid + "'");
        id = s.i64(0);
        ser::read_header(s.text(1), r, column_of(path_, uuid, "runs.header_json"));
        r.warnings = strings_column(s.text(5), path_, uuid, "runs.warnings_json");
        const auto v = s.text(2);
        r.verdict = v == "accepted"            ? Verdict::Accepted
                    : v == "invalid_reference" ? Verdict::InvalidReference
                                               : Verdict::Rejected;
        r.started_at = s.text(3);
        r.finished_at = s.text(4);
    }
    r.run_id = uuid;
    {
        Stmt s(db_, "SELECT sample_id, tag FROM samples WHERE run_id=?1 ORDER BY idx");
        s.bind(1, id);
        while (s.step()) r.samples.push_back({s.text(0), s.text(1)});
    }
    if (schema_version() >= 8) r.ranks = read_ranks(db_, id, r.samples.size(), path_ + ": run " + uuid);
    load_passes(id, r, damaged);
    load_comparisons(id, r);
    return r;
}

namespace {

/// A stored precision by its name; a name no build writes (a hand-edited or foreign file) refused
/// naming the column, never read as another precision.
Precision stored_precision(const std::string& text, const std::string& where, const char* column) {
    if (auto p = parse_precision(text)) return *p;
    throw StoreError(where + ": " + column + " '" + visible_controls(clip_echo(text, 40)) +
                     "'; expected fp32, fp16, bf16, fp8, fp8-rowwise, mxfp8, nvfp4 or fp8-delayed");
}

}  // namespace

void Store::load_passes(int64_t id, RunResult& r, std::vector<std::string>* damaged) const {
    const auto& uuid = r.run_id;
    Stmt s(db_,
           "SELECT id, precision, keep_fp32, num_outputs, outputs, nonfinite_json, origin_json, quality, seconds "
           "FROM passes WHERE run_id=?1 ORDER BY seq");
    s.bind(1, id);
    while (s.step()) {
        PassResult p;
        p.precision = stored_precision(s.text(1), path_ + ": run " + uuid, "passes.precision");
        p.keep_fp32 = strings_column(s.text(2), path_, uuid, "passes.keep_fp32");
        const int64_t num_outputs = s.i64(3);
        const size_t n = size_t(s.bytes(4)) / sizeof(float);
        if (num_outputs < 0 || num_outputs > kMaxOutputsPerSample)
            throw StoreError(path_ + ": run " + uuid + ": pass of " + std::to_string(num_outputs) +
                             " score(s) per sample; expected 0 to " + std::to_string(kMaxOutputsPerSample));
        if (size_t(s.bytes(4)) != n * sizeof(float) || (num_outputs > 0 && n != r.samples.size() * size_t(num_outputs)))
            throw StoreError(path_ + ": run " + uuid + ": pass outputs have " + std::to_string(s.bytes(4)) +
                             " bytes for " + std::to_string(num_outputs) + " score(s) per sample; expected " +
                             std::to_string(r.samples.size() * size_t(std::max<int64_t>(num_outputs, 0)) * 4));
        p.num_outputs = int(num_outputs);
        p.outputs.resize(n);
        if (n) std::memcpy(p.outputs.data(), s.blob_ptr(4), n * sizeof(float));
        p.nonfinite_samples = strings_column(s.text(5), path_, uuid, "passes.nonfinite_json");
        p.origin = origin_column(s, 6, path_, uuid, "passes.origin_json");
        p.quality = real::optional(s, 7, column_of(path_, uuid, "passes.quality"));
        p.seconds = s.f64(8);
        p.layers = read_layers(db_, s.i64(0), "pass " + to_string(p.precision) + " of run " + uuid, damaged);
        if (schema_version() >= 9)
            p.fp8_operands =
                read_fp8_operands(db_, s.i64(0), path_ + ": run " + uuid + ": pass " + to_string(p.precision));
        if (const auto e = fp8_recipe_problem(p.precision, p.fp8_operands); !e.empty())
            throw StoreError(path_ + ": run " + uuid + ": pass " + to_string(p.precision) + ": column " + e);
        if (schema_version() >= 11)
            p.real_gemm = read_real_gemm(db_, s.i64(0), p.outputs.size(),
                                         path_ + ": run " + uuid + ": pass " + to_string(p.precision));
        r.passes.push_back(std::move(p));
    }
}

void Store::load_comparisons(int64_t id, RunResult& r) const {
    const auto& uuid = r.run_id;
    Stmt s(db_,
           "SELECT id, precision, verdict, max_abs_delta, max_rel_delta FROM comparisons WHERE run_id=?1 ORDER BY seq");
    s.bind(1, id);
    while (s.step()) {
        Comparison c;
        const int64_t cid = s.i64(0);
        c.precision = stored_precision(s.text(1), path_ + ": run " + uuid, "comparisons.precision");
        c.verdict = s.text(2) == "accepted" ? Verdict::Accepted : Verdict::Rejected;
        c.max_abs_delta = s.f64(3);
        c.max_rel_delta = s.f64(4);
        Stmt d(db_,
               "SELECT sample_idx, abs, rel, finite, within, worst_index, ref_decision, amp_decision "
               "FROM deltas WHERE comparison_id=?1 ORDER BY sample_idx");
        d.bind(1, cid);
        bool decisions = false;
        while (d.step()) {
            const int64_t i = d.i64(0);
            if (i < 0 || size_t(i) >= r.samples.size())
                throw StoreError(path_ + ": run " + uuid + ": delta for unknown sample index " + std::to_string(i));
            SampleDelta x;
            x.sample = r.samples[size_t(i)].id;
            x.tag = r.samples[size_t(i)].tag;
            x.abs = d.f64(1);
            x.rel = d.f64(2);
            x.finite = d.i64(3);
            x.within_tolerance = d.i64(4);
            x.worst_index = int(std::clamp<int64_t>(d.i64(5), -1, INT32_MAX));
            c.deltas.push_back(x);
            if (!d.is_null(6)) {
                decisions = true;
                c.ref_decisions.push_back(int(std::clamp<int64_t>(d.i64(6), -1, INT32_MAX)));
                c.amp_decisions.push_back(int(std::clamp<int64_t>(d.i64(7), -1, INT32_MAX)));
            }
        }
        if (!decisions) {
            c.ref_decisions.clear();
            c.amp_decisions.clear();
        }
        const bool v7 = schema_version() >= 7;  // sequence outputs: flip positions, token figures
        Stmt f(db_, v7 ? "SELECT sample_idx, ref, amp, ref_margin, amp_margin, COALESCE(position, -1) FROM flips WHERE "
                         "comparison_id=?1 "
                         "ORDER BY seq"
                       : "SELECT sample_idx, ref, amp, ref_margin, amp_margin, -1 FROM flips WHERE comparison_id=?1 "
                         "ORDER BY seq");
        f.bind(1, cid);
        while (f.step()) {
            const int64_t i = f.i64(0);
            if (i < 0 || size_t(i) >= r.samples.size())
                throw StoreError(path_ + ": run " + uuid + ": flip for unknown sample index " + std::to_string(i));
            c.flips.push_back({r.samples[size_t(i)].id, r.samples[size_t(i)].tag,
                               int(std::clamp<int64_t>(f.i64(1), -1, INT32_MAX)),
                               int(std::clamp<int64_t>(f.i64(2), -1, INT32_MAX)), f.f64(3), f.f64(4),
                               int(std::clamp<int64_t>(f.i64(5), -1, INT32_MAX))});
        }
        if (v7) c.tokens = read_tokens(db_, cid, r.samples, path_ + ": run " + uuid);
        Stmt k(db_,
               "SELECT name, passed, detail, samples_json FROM criteria_results WHERE comparison_id=?1 ORDER BY seq");
        k.bind(1, cid);
        while (k.step())
            c.criteria.push_back({k.text(0), k.i64(1) != 0, k.text(2),
                                  strings_column(k.text(3), path_, uuid, "criteria_results.samples_json")});
        r.comparisons.push_back(std::move(c));
    }
}

std::vector<LayerStat> Store::layers(const std::string& uuid, Precision p, std::vector<std::string>* damaged) const {
    Stmt s(db_, "SELECT p.id FROM passes p JOIN runs r ON r.id = p.run_id WHERE r.uuid=?1 AND p.precision=?2");
    s.bind(1, uuid).bind(2, to_string(p));
    return s.step() ? read_layers(db_, s.i64(0), "pass " + to_string(p) + " of run " + uuid, damaged)
                    : std::vector<LayerStat>{};
}

std::vector<Annotation> Store::annotations(const std::string& uuid) const {
    Stmt s(db_,
           "SELECT a.uuid, a.author, a.created_at, a.target_kind, a.target, a.text FROM annotations a "
           "JOIN runs r ON r.id = a.run_id WHERE r.uuid=?1 ORDER BY a.created_at, a.id");
    s.bind(1, uuid);
    std::vector<Annotation> out;
    while (s.step()) out.push_back({s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5)});
    return out;
}

std::vector<Store::BenchmarkRow> Store::benchmarks(const std::string& run_uuid) const {
    std::vector<BenchmarkRow> out;
    if (schema_version() < 3) return out;
    Stmt s(db_,
           "SELECT b.uuid, b.created_at, b.result_json, b.validated FROM benchmarks b JOIN runs r ON r.id = b.run_id "
           "WHERE r.uuid=?1 ORDER BY b.created_at");
    s.bind(1, run_uuid);
    while (s.step()) {
        const auto column =
            path_ + ": run " + run_uuid + ": benchmark " + s.text(0) + ": column benchmarks.result_json";
        out.push_back({s.text(0), s.text(1), s.i64(3) != 0, ser::read_bench(s.text(2), column)});
    }
    return out;
}

std::string Store::record_benchmark(const BenchResult& r, const BenchSpec& spec, const std::vector<Validation>& vs) {
    if (read_only_) throw StoreError(path_ + ": opened read-only (the file is not writable)");
    const std::string uuid = make_uuid();
    Stmt s(
        db_,
        "INSERT INTO benchmarks(uuid, run_id, validated, model_sha256, probes_sha256, device, created_at, result_json) "
        "VALUES(?1, (SELECT id FROM runs WHERE uuid=?2), ?3, ?4, ?5, ?6, ?7, ?8)");
    s.bind(1, uuid)
        .bind(2, vs.empty() ? std::string() : vs[0].run)
        .bind(3, all_validated(vs))
        .bind(4, r.model.weights_sha256)
        .bind(5, r.probes.sha256)
        .bind(6, r.backend.device)
        .bind(7, now_iso8601())
        .bind(8, ampscope::json::bench_to_json(r, spec, vs));
    s.run();
    return uuid;
}

std::string Store::kind(const std::string& uuid) const {
    Stmt s(db_, "SELECT kind FROM runs WHERE uuid=?1");
    s.bind(1, uuid);
    return s.step() ? s.text(0) : std::string();
}

TrainResult Store::load_training(const std::string& uuid) const {
    if (kind(uuid) != "train") throw InputError(path_, "RUN", "no training run '" + uuid + "'");
    TrainResult t;
    {
        Stmt s(db_, "SELECT header_json, started_at, COALESCE(finished_at,''), warnings_json FROM runs WHERE uuid=?1");
        s.bind(1, uuid);
        if (!s.step()) throw InputError(path_, "RUN", "no run '" + uuid + "'");
        ser::read_train_header(s.text(0), t, column_of(path_, uuid, "runs.header_json"));
        t.started_at = s.text(1);
        t.finished_at = s.text(2);
        for (auto& w : strings_column(s.text(3), path_, uuid, "runs.warnings_json"))
            if (std::find(t.warnings.begin(), t.warnings.end(), w) == t.warnings.end())
                t.warnings.push_back(std::move(w));
    }
    t.run_id = uuid;
    t.steps = training_steps(uuid);
    t.checkpoints = checkpoints(uuid);
    const auto totals = training_totals(t.steps, t.spec.scaler);
    t.iterations = totals.iterations;
    t.effective_updates = totals.effective_updates;
    t.skipped = totals.skipped;
    t.final_scale = totals.final_scale;
    return t;
}

std::vector<TrainStep> Store::training_steps(const std::string& uuid) const {
    // grad_underflow came with schema v5; a file of an older version opened read-only lacks the column
    const std::string underflow = schema_version() >= 5 ? "COALESCE(t.grad_underflow, -1)" : "-1";
    const std::string tracker = schema_version() >= 6 ? "COALESCE(t.growth_tracker, -1)" : "-1";
    const std::string fp8 =
        schema_version() >= 10 ? "COALESCE(t.fp8_saturated, -1), COALESCE(t.fp8_saturated_at, '')" : "-1, ''";
    Stmt s(db_,
           ("SELECT t.step, t.loss_ref, t.loss_amp, t.scale, t.found_inf, t.skipped, t.effective_updates, t.grad_norm, "
            "t.lr, t.divergence, COALESCE(t.nonfinite_stage,''), t.origin_json, " +
            underflow + ", " + tracker + ", " + fp8 +
            " FROM training_steps t "
            "JOIN runs r ON r.id = t.run_id WHERE r.uuid=?1 ORDER BY t.step")
               .c_str());
    s.bind(1, uuid);
    std::vector<TrainStep> out;
    while (s.step()) {
        TrainStep st;
        st.step = int(s.i64(0));
        st.loss_ref = real::figure(s, 1);  // NULL: a NaN (real_column.h)
        st.loss_amp = real::figure(s, 2);
        st.scale = real::figure(s, 3);
        st.found_inf = s.i64(4);
        st.skipped = s.i64(5);
        st.effective_updates = int(s.i64(6));
        st.grad_norm = real::figure(s, 7);
        st.lr = real::figure(s, 8);
        st.divergence = real::figure(s, 9);
        st.nonfinite_stage = s.text(10);
        st.origin = origin_column(s, 11, path_, uuid, "training_steps.origin_json");
        st.grad_underflow = s.i64(12);
        st.growth_tracker = int(s.i64(13));
        st.fp8_saturated = s.i64(14);
        st.fp8_saturated_at = s.text(15);
        out.push_back(std::move(st));
    }
    return out;
}

std::vector<std::string> Store::checkpoints(const std::string& uuid) const {
    Stmt s(db_, "SELECT c.path FROM checkpoints c JOIN runs r ON r.id = c.run_id WHERE r.uuid=?1 ORDER BY c.step");
    s.bind(1, uuid);
    std::vector<std::string> out;
    while (s.step()) out.push_back(s.text(0));
    return out;
}

Review Store::review(const std::string& uuid) const {
    Stmt s(db_, "SELECT review_status, COALESCE(reviewed_by,''), COALESCE(reviewed_at,'') FROM runs WHERE uuid=?1");
    s.bind(1, uuid);
    if (!s.step()) throw InputError(path_, "RUN", "no run '" + uuid + "'");
    return {parse_review_status(s.text(0), "review_status"), s.text(1), s.text(2)};
}

}  // namespace ampscope::storage
