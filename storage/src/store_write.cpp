// SPDX-License-Identifier: MIT
// Writing runs: the RunSink that records while a run progresses, and whole-run inserts.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/hash.h"
#include "ampscope/storage/store.h"
#include "json_map.h"
#include "rank_rows.h"
#include "fp8_rows.h"
#include "layer_chunk.h"
#include "real_column.h"
#include "serialize.h"
#include "sqlite.h"
#include "token_rows.h"

namespace ampscope::storage {

std::string host_name();

using nlohmann::json;
using sql::Stmt;

namespace {

std::string precisions_of(const RunSpec& s) {
    std::string out = "fp32";
    for (auto p : s.precisions) out += "," + to_string(p);
    return out;
}

int64_t insert_header(sqlite3* db, const RunResult& r, const std::string& status, int64_t pid) {
    const auto header_json = ser::header(r);
    const std::string header = header_json.dump();
    Sha256 h;
    h.update(header_json.at("criteria").dump());
    Stmt s(db,
           "INSERT INTO runs(uuid, kind, status, model_source, model_sha256, weights_sha256, probes_source, "
           "probes_sha256, probe_count, device, precisions, mode, criteria_sha256, criteria_fixed_at, header_json, "
           "tool_version, started_at, pid, host) "
           "VALUES(?1,'compare',?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18)");
    s.bind(1, r.run_id)
        .bind(2, status)
        .bind(3, r.model.source)
        .bind(4, r.model.sha256)
        .bind(5, r.model.weights_sha256)
        .bind(6, r.probes.source)
        .bind(7, r.probes.sha256)
        .bind(8, int64_t(r.samples.size()))
        .bind(9, r.backend.device)
        .bind(10, precisions_of(r.spec))
        .bind(11, to_string(r.spec.mode))
        .bind(12, h.hex())
        .bind(13, r.criteria.fixed_at)
        .bind(14, header)
        .bind(15, r.tool_version)
        .bind(16, r.started_at)
        .bind(17, pid)
        .bind(18, host_name());
    s.run();
    const int64_t id = sqlite3_last_insert_rowid(db);
    Stmt smp(db, "INSERT INTO samples(run_id, idx, sample_id, tag) VALUES(?1,?2,?3,?4)");
    for (size_t i = 0; i < r.samples.size(); ++i) {
        smp.bind(1, id).bind(2, int64_t(i)).bind(3, r.samples[i].id).bind(4, r.samples[i].tag);
        smp.run();
    }
    insert_ranks(db, id, r.ranks, r.samples.size());
    return id;
}

/// A pass's scores are one SQLite value: more than SQLite's length limit (1e9 bytes unless
/// built otherwise) cannot be stored. Said before the insert, with what would fit.
void check_pass_size(sqlite3* db, const PassResult& p, size_t samples) {
    const size_t bytes = p.outputs.size() * sizeof(float);
    const auto limit = size_t(sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1));
    if (bytes <= limit) return;
    const size_t per_sample = size_t(std::max(p.num_outputs, 1)) * sizeof(float);
    auto mb = [](size_t b) { return std::to_string((b + 500000) / 1000000) + " MB"; };
    throw StoreError(
        "the " + to_string(p.precision) + " pass's scores take " + mb(bytes) + " (" + std::to_string(samples) +
            " samples x " + std::to_string(p.num_outputs) + " scores x 4 bytes) and the database stores at most " +
            mb(limit) + " per pass, so this run cannot be recorded: use at most " + std::to_string(limit / per_sample) +
            " samples of this model's output, or run without a database (a JSON output keeps the result)",
        {{"no_db", ""}});
}

void insert_pass(sqlite3* db, int64_t run_id, int seq, const PassResult& p, size_t samples) {
    check_pass_size(db, p, samples);
    Stmt s(db,
           "INSERT INTO passes(run_id, seq, precision, keep_fp32, num_outputs, outputs, nonfinite_json, origin_json, "
           "quality, seconds) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)");
    s.bind(1, run_id)
        .bind(2, seq)
        .bind(3, to_string(p.precision))
        .bind(4, json(p.keep_fp32).dump())
        .bind(5, p.num_outputs)
        .bind_blob_static(6, p.outputs.data(), p.outputs.size() * sizeof(float))  // p outlives the insert: no copy
        .bind(7, json(p.nonfinite_samples).dump());
    if (p.origin)
        s.bind(8, jmap::origin(p.origin).dump());
    else
        s.bind_null(8);
    real::bind_optional(s, 9, p.quality);  // NaN as 'nan' (real_column.h)
    s.bind(10, p.seconds);
    s.run();
    const int64_t pass_id = sqlite3_last_insert_rowid(db);
    Stmt l(db, "INSERT INTO layer_chunks VALUES(?1,?2,?3,?4)");
    for (size_t b = 0; b < p.layers.size(); b += chunk::kChunkRows) {
        const size_t e = std::min(p.layers.size(), b + chunk::kChunkRows);
        const std::string data = chunk::encode(p.layers, b, e);
        l.bind(1, pass_id)
            .bind(2, int64_t(p.layers[b].index))
            .bind(3, int64_t(e - b))
            .bind_blob_static(4, data.data(), data.size());
        l.exec_row();
    }
    insert_fp8_operands(db, pass_id, p.fp8_operands);
    if (p.real_gemm) insert_real_gemm(db, pass_id, *p.real_gemm);
}

void insert_comparison(sqlite3* db, int64_t run_id, int seq, const Comparison& c,
                       const std::vector<SampleInfo>& samples) {
    Stmt s(db,
           "INSERT INTO comparisons(run_id, seq, precision, verdict, max_abs_delta, max_rel_delta) "
           "VALUES(?1,?2,?3,?4,?5,?6)");
    s.bind(1, run_id)
        .bind(2, seq)
        .bind(3, to_string(c.precision))
        .bind(4, to_string(c.verdict))
        .bind(5, c.max_abs_delta)
        .bind(6, c.max_rel_delta);
    s.run();
    const int64_t cid = sqlite3_last_insert_rowid(db);
    std::map<std::string, int64_t> index;
    for (size_t i = 0; i < samples.size(); ++i) index[samples[i].id] = int64_t(i);
    Stmt d(db, "INSERT INTO deltas VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9)");
    for (size_t i = 0; i < c.deltas.size(); ++i) {
        const auto& x = c.deltas[i];
        d.bind(1, cid)
            .bind(2, index.at(x.sample))
            .bind(3, x.abs)
            .bind(4, x.rel)
            .bind(5, x.finite)
            .bind(6, x.within_tolerance)
            .bind(7, x.worst_index);
        if (i < c.ref_decisions.size())
            d.bind(8, c.ref_decisions[i]).bind(9, c.amp_decisions[i]);
        else
            d.bind_null(8).bind_null(9);
        d.run();
    }
    Stmt f(db,
           "INSERT INTO flips(comparison_id, seq, sample_idx, ref, amp, ref_margin, amp_margin, position) "
           "VALUES(?1,?2,?3,?4,?5,?6,?7,?8)");
    for (size_t i = 0; i < c.flips.size(); ++i) {
        const auto& x = c.flips[i];
        f.bind(1, cid)
            .bind(2, int64_t(i))
            .bind(3, index.at(x.sample))
            .bind(4, x.ref)
            .bind(5, x.amp)
            .bind(6, x.ref_margin)
            .bind(7, x.amp_margin);
        if (x.position >= 0)
            f.bind(8, x.position);
        else
            f.bind_null(8);
        f.run();
    }
    Stmt k(db, "INSERT INTO criteria_results VALUES(?1,?2,?3,?4,?5,?6)");
    for (size_t i = 0; i < c.criteria.size(); ++i) {
        const auto& x = c.criteria[i];
        k.bind(1, cid)
            .bind(2, int64_t(i))
            .bind(3, x.name)
            .bind(4, x.passed)
            .bind(5, x.detail)
            .bind(6, json(x.samples).dump());
        k.run();
    }
    if (c.tokens) insert_tokens(db, cid, *c.tokens, index);
}

void finish(sqlite3* db, int64_t run_id, const std::string& status, const std::string& verdict,
            const std::string& error, const std::string& finished_at, const std::vector<std::string>& warnings) {
    Stmt s(db,
           "UPDATE runs SET status=?2, verdict=NULLIF(?3,''), error=NULLIF(?4,''), finished_at=?5, warnings_json=?6 "
           "WHERE id=?1");
    s.bind(1, run_id)
        .bind(2, status)
        .bind(3, verdict)
        .bind(4, error)
        .bind(5, finished_at)
        .bind(6, json(warnings).dump());
    s.run();
}

void insert_annotation(sqlite3* db, int64_t run_id, const Annotation& a) {
    Stmt s(db,
           "INSERT INTO annotations(run_id, uuid, author, created_at, target_kind, target, text) "
           "VALUES(?1,?2,?3,?4,?5,?6,?7)");
    s.bind(1, run_id)
        .bind(2, a.uuid)
        .bind(3, a.author)
        .bind(4, a.created_at)
        .bind(5, a.target_kind)
        .bind(6, a.target)
        .bind(7, a.text);
    s.run();
}

int64_t run_pk(sqlite3* db, const std::string& uuid) {
    Stmt s(db, "SELECT id FROM runs WHERE uuid=?1");
    s.bind(1, uuid);
    if (!s.step()) throw InputError("", "RUN", "no run '" + uuid + "'");
    return s.i64(0);
}

void require_writable(const Store& s) {
    if (s.read_only()) throw StoreError(s.path() + ": opened read-only (the file is not writable)");
}

}  // namespace

// ---- RunWriter ------------------------------------------------------------------------------

void RunWriter::run_started(const RunResult& header) {
    require_writable(store_);
    sql::Transaction t(store_.db_);
    run_id_ = insert_header(store_.db_, header, "running", int64_t(getpid()));
    t.commit();
    uuid_ = header.run_id;
    samples_ = header.samples;
    passes_ = 0;
    comparisons_ = 0;
}

void RunWriter::pass_finished(const PassResult& pass) {
    sql::Transaction t(store_.db_);
    insert_pass(store_.db_, run_id_, passes_++, pass, samples_.size());
    t.commit();
}

void RunWriter::comparison_finished(const Comparison& cmp) {
    sql::Transaction t(store_.db_);
    insert_comparison(store_.db_, run_id_, comparisons_++, cmp, samples_);
    t.commit();
}

void RunWriter::run_finished(const RunResult& r) {
    sql::Transaction t(store_.db_);
    if (!r.ranks.empty()) replace_ranks(store_.db_, run_id_, r.ranks, samples_.size());  // with its passes' times
    finish(store_.db_, run_id_, "completed", to_string(r.verdict), "", r.finished_at, r.warnings);
    t.commit();
}

void RunWriter::run_failed(const std::string& status, const std::string& message) {
    if (run_id_ < 0) return;
    sql::Transaction t(store_.db_);
    finish(store_.db_, run_id_, status, "", message, now_iso8601(), {});
    t.commit();
}

// ---- TrainWriter ----------------------------------------------------------------------------

void TrainWriter::train_started(const TrainResult& h) {
    require_writable(store_);
    const std::string header = ser::train_header(h).dump();
    sql::Transaction t(store_.db_);
    Stmt s(store_.db_,
           "INSERT INTO runs(uuid, kind, status, model_source, model_sha256, weights_sha256, probes_source, "
           "device, precisions, mode, header_json, tool_version, started_at, pid, host) "
           "VALUES(?1,'train','running',?2,?3,?4,?5,?6,?7,'train',?8,?9,?10,?11,?12)");
    const std::string precisions = std::string("fp32,") + to_string(h.spec.precision);
    s.bind(1, h.run_id)
        .bind(2, h.model.source)
        .bind(3, h.model.sha256)
        .bind(4, h.model.weights_sha256)
        .bind(5, h.spec.data)
        .bind(6, h.backend.device)
        .bind(7, precisions)
        .bind(8, header)
        .bind(9, version())
        .bind(10, h.started_at)
        .bind(11, int64_t(getpid()))
        .bind(12, host_name());
    s.run();
    run_id_ = sqlite3_last_insert_rowid(store_.db_);
    t.commit();
    uuid_ = h.run_id;
}

void TrainWriter::step_finished(const TrainStep& st) {
    sql::Transaction t(store_.db_);
    Stmt s(store_.db_, "INSERT INTO training_steps VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17)");
    s.bind(1, run_id_)
        .bind(2, st.step)
        .bind(3, st.loss_ref)
        .bind(4, st.loss_amp)
        .bind(5, st.scale)
        .bind(6, st.found_inf)
        .bind(7, st.skipped)
        .bind(8, st.effective_updates)
        .bind(9, st.grad_norm)
        .bind(10, st.lr)
        .bind(11, st.divergence);
    if (st.nonfinite_stage.empty())
        s.bind_null(12);
    else
        s.bind(12, st.nonfinite_stage);
    if (st.origin)
        s.bind(13, jmap::origin(st.origin).dump());
    else
        s.bind_null(13);
    if (st.grad_underflow >= 0)
        s.bind(14, st.grad_underflow);
    else
        s.bind_null(14);
    if (st.growth_tracker >= 0)
        s.bind(15, st.growth_tracker);
    else
        s.bind_null(15);
    if (st.fp8_saturated >= 0)
        s.bind(16, st.fp8_saturated).bind(17, st.fp8_saturated_at);
    else
        s.bind_null(16).bind_null(17);
    s.run();
    t.commit();
    effective_ = st.effective_updates;
}

void TrainWriter::checkpoint_written(const std::string& path, int step) {
    sql::Transaction t(store_.db_);
    Stmt s(store_.db_,
           "INSERT INTO checkpoints(run_id, step, effective_updates, path, created_at) VALUES(?1,?2,?3,?4,?5)");
    s.bind(1, run_id_).bind(2, step).bind(3, effective_).bind(4, path).bind(5, now_iso8601());
    s.run();
    t.commit();
}

void TrainWriter::train_finished(const TrainResult& r) {
    sql::Transaction t(store_.db_);
    finish(store_.db_, run_id_, "completed", "", "", r.finished_at, r.warnings);
    t.commit();
}

void TrainWriter::train_failed(const std::string& status, const std::string& message) {
    if (run_id_ < 0) return;
    sql::Transaction t(store_.db_);
    finish(store_.db_, run_id_, status, "", message, now_iso8601(), {});
    t.commit();
}

// ---- Store writes ---------------------------------------------------------------------------

bool Store::insert_run(const RunResult& r, const std::string& status, const std::string& error,
                       const std::vector<Annotation>& notes, const Review& review) {
    require_writable(*this);
    {
        Stmt s(db_, "SELECT 1 FROM runs WHERE uuid=?1");
        s.bind(1, r.run_id);
        if (s.step()) return false;
    }
    sql::Transaction t(db_);
    const int64_t id = insert_header(db_, r, status, 0);
    for (size_t i = 0; i < r.passes.size(); ++i) insert_pass(db_, id, int(i), r.passes[i], r.samples.size());
    for (size_t i = 0; i < r.comparisons.size(); ++i) insert_comparison(db_, id, int(i), r.comparisons[i], r.samples);
    finish(db_, id, status, status == "completed" ? to_string(r.verdict) : "", error, r.finished_at, r.warnings);
    for (const auto& a : notes) insert_annotation(db_, id, a);
    Stmt rv(db_, "UPDATE runs SET review_status=?2, reviewed_by=NULLIF(?3,''), reviewed_at=NULLIF(?4,'') WHERE id=?1");
    rv.bind(1, id).bind(2, to_string(review.status)).bind(3, review.by).bind(4, review.at);
    rv.run();
    t.commit();
    return true;
}

void Store::annotate(const std::string& uuid, Annotation a) {
    require_writable(*this);
    if (a.text.empty()) throw InputError("TEXT", "", "empty annotation; expected some text");
    const int64_t id = run_pk(db_, uuid);
    if (a.target_kind == "sample") {
        Stmt s(db_, "SELECT 1 FROM samples WHERE run_id=?1 AND sample_id=?2");
        s.bind(1, id).bind(2, a.target);
        if (!s.step()) throw InputError("", "sample", "run " + uuid + " has no sample '" + a.target + "'");
    } else if (a.target_kind == "layer") {
        // target "PRECISION:INDEX" or "INDEX" (first AMP pass with that layer)
        const auto colon = a.target.find(':');
        const std::string prec = colon == std::string::npos ? "" : a.target.substr(0, colon);
        const std::string idx = colon == std::string::npos ? a.target : a.target.substr(colon + 1);
        Stmt s(db_,
               "SELECT id, precision FROM passes WHERE run_id=?1 AND (?2 = '' OR precision = ?2) ORDER BY seq DESC");
        char* end = nullptr;
        const long v = std::strtol(idx.c_str(), &end, 10);
        if (idx.empty() || *end)
            throw InputError("", "layer", "'" + a.target + "' is not a layer index (expected N or PRECISION:N)");
        s.bind(1, id).bind(2, prec);
        std::string found;
        std::vector<std::string> damaged;  // a damaged chunk only hides its own layers
        while (found.empty() && s.step()) {
            for (const auto& l : read_layers(db_, s.i64(0), "pass " + s.text(1) + " of run " + uuid, &damaged))
                if (l.index == v) {
                    found = s.text(1);
                    break;
                }
        }
        if (found.empty()) throw InputError("", "layer", "run " + uuid + " has no layer " + a.target);
        a.target = found + ":" + std::to_string(v);
    } else if (a.target_kind != "run") {
        throw InputError("annotation", "target", "expected run, sample or layer");
    }
    if (a.uuid.empty()) a.uuid = make_uuid();
    if (a.created_at.empty()) a.created_at = now_iso8601();
    if (a.author.empty()) {
        const char* u = std::getenv("USER");
        a.author = u && *u ? u : "unknown";
    }
    sql::Transaction t(db_);
    insert_annotation(db_, id, a);
    t.commit();
}

void Store::set_review(const std::string& uuid, ReviewStatus status, const std::string& by) {
    require_writable(*this);
    const int64_t id = run_pk(db_, uuid);
    std::string who = by;
    if (who.empty()) {
        const char* u = std::getenv("USER");
        who = u && *u ? u : "unknown";
    }
    Stmt s(db_, "UPDATE runs SET review_status=?2, reviewed_by=?3, reviewed_at=?4 WHERE id=?1");
    s.bind(1, id).bind(2, to_string(status)).bind(3, who).bind(4, now_iso8601());
    s.run();
}

void Store::delete_run(const std::string& uuid) {
    require_writable(*this);
    const int64_t id = run_pk(db_, uuid);
    Stmt s(db_, "DELETE FROM runs WHERE id=?1");
    s.bind(1, id);
    s.run();
}

}  // namespace ampscope::storage
