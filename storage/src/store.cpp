// SPDX-License-Identifier: MIT
// Opening, migrating and reading the run store.
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
#include "layer_chunk.h"
#include "layer_stats.h"
#include "schema.h"
#include "serialize.h"
#include "sqlite.h"

namespace ampscope::storage {

using nlohmann::json;
using sql::Stmt;

std::string default_db_path(const std::string& flag) {
    if (!flag.empty()) return flag;
    if (const char* e = std::getenv("AMPSCOPE_DB"); e && *e) return e;
    std::string base;
    if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) base = x;
    else if (const char* h = std::getenv("HOME"); h && *h) base = std::string(h) + "/.local/share";
    else base = ".";
    return base + "/ampscope/runs.sqlite";
}

std::string host_name() {
    char buf[256] = {0};
    gethostname(buf, sizeof buf - 1);
    return buf;
}

Store::Store(const std::string& path, Mode mode) : path_(path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const bool exists = fs::exists(path, ec);
    read_only_ = mode == Mode::ReadOnly;
    if (!read_only_ && exists && access(path.c_str(), W_OK) != 0) read_only_ = true;  // not writable: read-only
    if (!exists) {
        if (read_only_) throw StoreError(path + ": no such file");
        if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path(), ec);
    } else if (fs::is_directory(path, ec)) {
        throw StoreError(path + ": is a directory; expected an ampscope run database file");
    }
    const int flags = read_only_ ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    if (sqlite3_open_v2(path.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
        std::string m = db_ ? sqlite3_errmsg(db_) : "cannot open";
        sqlite3_close(db_);
        db_ = nullptr;
        throw StoreError(path + ": cannot open database: " + m);
    }
    // Files may come from others: defensive mode, no trust in schema-defined functions.
    sqlite3_db_config(db_, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
    sqlite3_db_config(db_, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
    sqlite3_db_config(db_, SQLITE_DBCONFIG_ENABLE_TRIGGER, 1, nullptr);
    sqlite3_busy_timeout(db_, 15000);
    try {
        sql::exec(db_, "PRAGMA foreign_keys=ON");
        const int v = schema_version();
        if (v > kSchemaVersion)
            throw StoreError(path + ": written by a newer ampscope (schema version " + std::to_string(v) +
                             "); this ampscope reads schema versions up to " + std::to_string(kSchemaVersion) +
                             ": update ampscope to open it");
        if (!read_only_) {
            sql::exec(db_, "PRAGMA journal_mode=WAL");
            sql::exec(db_, "PRAGMA synchronous=NORMAL");
            sql::exec(db_, "PRAGMA cache_size=-65536");
            migrate();
            check_layout();
            mark_dead_runs_interrupted();
        }
    } catch (const sql::Error& e) {
        sqlite3_close(db_);
        db_ = nullptr;
        std::string m = e.what();
        if (m.find("not a database") != std::string::npos || m.find("malformed") != std::string::npos)
            throw StoreError(path + ": not an ampscope run database (not a readable SQLite file): " + m);
        throw StoreError(path + ": " + m);
    } catch (...) {
        sqlite3_close(db_);
        db_ = nullptr;
        throw;
    }
}

Store::~Store() { sqlite3_close(db_); }

int Store::schema_version() const {
    Stmt s(db_, "PRAGMA user_version");
    return s.step() ? int(s.i64(0)) : 0;
}

void Store::migrate() {
    const auto& m = schema::migrations();
    int v = schema_version();
    while (v < int(m.size())) {
        sql::Transaction t(db_);
        sql::exec(db_, m[size_t(v)]);
        sql::exec(db_, "PRAGMA user_version=" + std::to_string(v + 1));
        t.commit();
        ++v;
    }
}

void Store::check_layout() const {
    // Tables must have the columns this version reads and writes. Tables added by later
    // migrations are not required of an older file opened read-only (an import).
    const int v = schema_version();
    for (const auto& [table, cols] : schema::expected_tables()) {
        if (v < 2 && (table == "training_steps" || table == "checkpoints")) continue;
        if (v < 3 && table == "benchmarks") continue;
        if (v < 4 && table == "layer_chunks") continue;
        Stmt q(db_, ("PRAGMA table_info(" + table + ")").c_str());
        std::vector<std::string> have;
        while (q.step()) have.push_back(q.text(1));
        for (const auto& c : cols)
            if (std::find(have.begin(), have.end(), c) == have.end())
                throw StoreError(path_ + ": table '" + table + "' lacks column '" + c + "' of schema version " +
                                 std::to_string(v) + " (a database from a development build?); "
                                 "use a new database file or export the runs with the build that wrote it");
    }
}

void Store::mark_dead_runs_interrupted() {
    Stmt q(db_, "SELECT id, pid, host FROM runs WHERE status='running'");
    std::vector<int64_t> dead;
    const auto me = host_name();
    while (q.step()) {
        const int64_t pid = q.i64(1);
        if (q.text(2) != me) continue;  // another machine's run: cannot tell
        if (pid > 0 && (kill(pid_t(pid), 0) == 0 || errno != ESRCH)) continue;  // still alive
        dead.push_back(q.i64(0));
    }
    for (auto id : dead) {
        Stmt u(db_, "UPDATE runs SET status='interrupted', error='the recording process ended before the run finished' "
                    "WHERE id=?1 AND status='running'");
        u.bind(1, id).run();
    }
}

std::vector<RunRow> Store::list_runs(const RunFilter& f) const {
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
    s.bind(1, f.model).bind(2, f.precision).bind(3, f.device).bind(4, f.verdict).bind(5, f.status)
        .bind(6, f.since).bind(7, f.until).bind(8, int64_t(f.limit));
    std::vector<RunRow> out;
    while (s.step()) {
        RunRow r;
        r.uuid = s.text(0); r.kind = s.text(1); r.status = s.text(2); r.verdict = s.text(3); r.model = s.text(4);
        r.probes = s.text(5); r.device = s.text(6); r.precisions = s.text(7); r.mode = s.text(8);
        r.started_at = s.text(9); r.finished_at = s.text(10); r.review_status = s.text(11); r.error = s.text(12);
        r.samples = int(s.i64(13)); r.annotations = int(s.i64(14));
        out.push_back(std::move(r));
    }
    return out;
}

std::string Store::resolve(const std::string& prefix) const {
    if (prefix.empty()) throw InputError("RUN", "", "empty run id");
    Stmt s(db_, "SELECT uuid FROM runs WHERE substr(uuid, 1, length(?1)) = ?1 LIMIT 2");
    s.bind(1, prefix);
    std::vector<std::string> found;
    while (s.step()) found.push_back(s.text(0));
    if (found.empty()) throw InputError(path_, "RUN", "no run '" + prefix + "' in this database (see `ampscope-cli list`)");
    if (found.size() > 1) throw InputError(path_, "RUN", "'" + prefix + "' matches several runs; give more of the id");
    return found[0];
}

std::vector<LayerStat> read_layers(sqlite3* db, int64_t pass_id) {
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
        Stmt c(db, "SELECT data FROM layer_chunks WHERE pass_id=?1 ORDER BY first_idx");
        c.bind(1, pass_id);
        const std::string where = "pass " + std::to_string(pass_id);
        while (c.step()) {
            if (c.type(0) != SQLITE_BLOB) throw StoreError("layer statistics of " + where + " are malformed: not a blob");
            chunk::decode(c.blob_ptr(0), size_t(c.bytes(0)), out, where);
        }
        if (!out.empty()) return out;
    }
    // Rows written before schema v4, one per layer.
    Stmt s(db, "SELECT idx, module, op, dtype, shape, flags, stats FROM layers WHERE id BETWEEN ?1 AND ?2 ORDER BY id");
    s.bind(1, int64_t(pass_id << 32)).bind(2, int64_t(pass_id << 32 | int64_t(0xffffffff)));
    while (s.step()) {
        LayerStat l;
        l.index = int(s.i64(0)); l.module = s.text(1); l.op = s.text(2); l.dtype = s.text(3);
        const int nb = s.bytes(4);
        if (s.type(4) != SQLITE_BLOB && nb != 0) throw StoreError("layer shape of pass " + std::to_string(pass_id) + " is malformed");
        if (nb % int(sizeof(int64_t)) != 0) throw StoreError("layer shape of pass " + std::to_string(pass_id) + " is malformed");
        l.shape.resize(size_t(nb) / sizeof(int64_t));
        if (nb) std::memcpy(l.shape.data(), s.blob_ptr(4), size_t(nb));
        const int64_t flags = s.i64(5);
        l.autocast = flags & 1; l.inputs_finite = (flags >> 1) & 1; l.origin = (flags >> 2) & 1;
        if (s.bytes(6) != int(sizeof(PackedStats))) throw StoreError("layer statistics of pass " + std::to_string(pass_id) + " are malformed");
        PackedStats p;
        std::memcpy(&p, s.blob_ptr(6), sizeof p);
        l.stats = unpack(p);
        out.push_back(std::move(l));
    }
    return out;
}

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

RunResult Store::load_run(const std::string& uuid) const {
    if (kind(uuid) == "train")
        throw InputError(path_, "RUN", "run " + uuid + " is a training run; its steps are read with training_steps()");
    RunResult r;
    int64_t id = -1;
    {
        Stmt s(db_, "SELECT id, header_json, COALESCE(verdict,''), started_at, COALESCE(finished_at,''), warnings_json "
                    "FROM runs WHERE uuid=?1");
        s.bind(1, uuid);
        if (!s.step()) throw InputError(path_, "RUN", "no run '" + uuid + "'");
        id = s.i64(0);
        try {
            ser::read_header(json::parse(s.text(1)), r);
            r.warnings = json::parse(s.text(5)).get<std::vector<std::string>>();
        } catch (const json::exception& e) {
            throw StoreError(path_ + ": run " + uuid + ": malformed header: " + e.what());
        }
        const auto v = s.text(2);
        r.verdict = v == "accepted" ? Verdict::Accepted : v == "invalid_reference" ? Verdict::InvalidReference : Verdict::Rejected;
        r.started_at = s.text(3);
        r.finished_at = s.text(4);
    }
    r.run_id = uuid;
    {
        Stmt s(db_, "SELECT sample_id, tag FROM samples WHERE run_id=?1 ORDER BY idx");
        s.bind(1, id);
        while (s.step()) r.samples.push_back({s.text(0), s.text(1)});
    }
    {
        Stmt s(db_, "SELECT id, precision, keep_fp32, num_outputs, outputs, nonfinite_json, origin_json, quality, seconds "
                    "FROM passes WHERE run_id=?1 ORDER BY seq");
        s.bind(1, id);
        while (s.step()) {
            PassResult p;
            p.precision = parse_precision(s.text(1)).value_or(Precision::Fp32);
            p.keep_fp32 = json::parse(s.text(2)).get<std::vector<std::string>>();
            p.num_outputs = int(s.i64(3));
            const size_t n = size_t(s.bytes(4)) / sizeof(float);
            if (size_t(s.bytes(4)) != n * sizeof(float) || (p.num_outputs > 0 && n != r.samples.size() * size_t(p.num_outputs)))
                throw StoreError(path_ + ": run " + uuid + ": pass outputs have " + std::to_string(s.bytes(4)) +
                                 " bytes; expected " + std::to_string(r.samples.size() * size_t(p.num_outputs) * 4));
            p.outputs.resize(n);
            if (n) std::memcpy(p.outputs.data(), s.blob_ptr(4), n * sizeof(float));
            p.nonfinite_samples = json::parse(s.text(5)).get<std::vector<std::string>>();
            p.origin = s.is_null(6) ? std::nullopt : ser::read_origin(json::parse(s.text(6)));
            if (!s.is_null(7)) p.quality = s.f64(7);
            p.seconds = s.f64(8);
            p.layers = read_layers(db_, s.i64(0));
            r.passes.push_back(std::move(p));
        }
    }
    {
        Stmt s(db_, "SELECT id, precision, verdict, max_abs_delta, max_rel_delta FROM comparisons WHERE run_id=?1 ORDER BY seq");
        s.bind(1, id);
        while (s.step()) {
            Comparison c;
            const int64_t cid = s.i64(0);
            c.precision = parse_precision(s.text(1)).value_or(Precision::Fp16);
            c.verdict = s.text(2) == "accepted" ? Verdict::Accepted : Verdict::Rejected;
            c.max_abs_delta = s.f64(3);
            c.max_rel_delta = s.f64(4);
            Stmt d(db_, "SELECT sample_idx, abs, rel, finite, within, worst_index, ref_decision, amp_decision "
                        "FROM deltas WHERE comparison_id=?1 ORDER BY sample_idx");
            d.bind(1, cid);
            bool decisions = false;
            while (d.step()) {
                const auto i = size_t(d.i64(0));
                if (i >= r.samples.size()) throw StoreError(path_ + ": run " + uuid + ": delta for unknown sample index");
                SampleDelta x;
                x.sample = r.samples[i].id; x.tag = r.samples[i].tag;
                x.abs = d.f64(1); x.rel = d.f64(2); x.finite = d.i64(3); x.within_tolerance = d.i64(4);
                x.worst_index = int(d.i64(5));
                c.deltas.push_back(x);
                if (!d.is_null(6)) {
                    decisions = true;
                    c.ref_decisions.push_back(int(d.i64(6)));
                    c.amp_decisions.push_back(int(d.i64(7)));
                }
            }
            if (!decisions) { c.ref_decisions.clear(); c.amp_decisions.clear(); }
            Stmt f(db_, "SELECT sample_idx, ref, amp, ref_margin, amp_margin FROM flips WHERE comparison_id=?1 ORDER BY seq");
            f.bind(1, cid);
            while (f.step()) {
                const auto i = size_t(f.i64(0));
                if (i >= r.samples.size()) throw StoreError(path_ + ": run " + uuid + ": flip for unknown sample index");
                c.flips.push_back({r.samples[i].id, r.samples[i].tag, int(f.i64(1)), int(f.i64(2)), f.f64(3), f.f64(4)});
            }
            Stmt k(db_, "SELECT name, passed, detail, samples_json FROM criteria_results WHERE comparison_id=?1 ORDER BY seq");
            k.bind(1, cid);
            while (k.step())
                c.criteria.push_back({k.text(0), k.i64(1) != 0, k.text(2), json::parse(k.text(3)).get<std::vector<std::string>>()});
            r.comparisons.push_back(std::move(c));
        }
    }
    return r;
}

std::vector<LayerStat> Store::layers(const std::string& uuid, Precision p) const {
    Stmt s(db_, "SELECT p.id FROM passes p JOIN runs r ON r.id = p.run_id WHERE r.uuid=?1 AND p.precision=?2");
    s.bind(1, uuid).bind(2, to_string(p));
    return s.step() ? read_layers(db_, s.i64(0)) : std::vector<LayerStat>{};
}

std::vector<Annotation> Store::annotations(const std::string& uuid) const {
    Stmt s(db_, "SELECT a.uuid, a.author, a.created_at, a.target_kind, a.target, a.text FROM annotations a "
                "JOIN runs r ON r.id = a.run_id WHERE r.uuid=?1 ORDER BY a.created_at, a.id");
    s.bind(1, uuid);
    std::vector<Annotation> out;
    while (s.step()) out.push_back({s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5)});
    return out;
}

std::string Store::find_validation(const std::string& model_sha256, const std::string& probes_sha256,
                                   const std::string& device, Precision precision) const {
    Stmt s(db_, "SELECT r.uuid FROM runs r JOIN comparisons c ON c.run_id = r.id WHERE r.kind='compare' AND "
                "r.status='completed' AND r.weights_sha256=?1 AND r.probes_sha256=?2 AND r.device=?3 AND c.precision=?4 "
                "AND c.verdict='accepted' ORDER BY r.started_at DESC LIMIT 1");
    s.bind(1, model_sha256).bind(2, probes_sha256).bind(3, device).bind(4, to_string(precision));
    return s.step() ? s.text(0) : std::string();
}

std::vector<Store::BenchmarkRow> Store::benchmarks(const std::string& run_uuid) const {
    std::vector<BenchmarkRow> out;
    if (schema_version() < 3) return out;
    Stmt s(db_, "SELECT b.uuid, b.created_at, b.result_json, b.validated FROM benchmarks b JOIN runs r ON r.id = b.run_id "
                "WHERE r.uuid=?1 ORDER BY b.created_at");
    s.bind(1, run_uuid);
    while (s.step()) out.push_back({s.text(0), s.text(1), s.text(2), s.i64(3) != 0});
    return out;
}

std::string Store::record_benchmark(const std::string& validation_run, bool validated, const std::string& model_sha256,
                                    const std::string& probes_sha256, const std::string& device,
                                    const std::string& result_json) {
    if (read_only_) throw StoreError(path_ + ": opened read-only (the file is not writable)");
    const std::string uuid = make_uuid();
    Stmt s(db_, "INSERT INTO benchmarks(uuid, run_id, validated, model_sha256, probes_sha256, device, created_at, result_json) "
                "VALUES(?1, (SELECT id FROM runs WHERE uuid=?2), ?3, ?4, ?5, ?6, ?7, ?8)");
    s.bind(1, uuid).bind(2, validation_run).bind(3, validated).bind(4, model_sha256).bind(5, probes_sha256).bind(6, device)
        .bind(7, now_iso8601()).bind(8, result_json);
    s.run();
    return uuid;
}

std::string Store::kind(const std::string& uuid) const {
    Stmt s(db_, "SELECT kind FROM runs WHERE uuid=?1");
    s.bind(1, uuid);
    return s.step() ? s.text(0) : std::string();
}

std::string Store::header_json(const std::string& uuid) const {
    Stmt s(db_, "SELECT header_json FROM runs WHERE uuid=?1");
    s.bind(1, uuid);
    return s.step() ? s.text(0) : std::string();
}

std::vector<TrainStep> Store::training_steps(const std::string& uuid) const {
    Stmt s(db_, "SELECT t.step, t.loss_ref, t.loss_amp, t.scale, t.found_inf, t.skipped, t.effective_updates, t.grad_norm, "
                "t.lr, t.divergence, COALESCE(t.nonfinite_stage,''), t.origin_json, COALESCE(t.grad_underflow, -1) FROM training_steps t "
                "JOIN runs r ON r.id = t.run_id WHERE r.uuid=?1 ORDER BY t.step");
    s.bind(1, uuid);
    std::vector<TrainStep> out;
    while (s.step()) {
        TrainStep st;
        st.step = int(s.i64(0)); st.loss_ref = s.f64(1); st.loss_amp = s.f64(2); st.scale = s.f64(3);
        st.found_inf = s.i64(4); st.skipped = s.i64(5); st.effective_updates = int(s.i64(6)); st.grad_norm = s.f64(7);
        st.lr = s.f64(8); st.divergence = s.f64(9); st.nonfinite_stage = s.text(10);
        if (!s.is_null(11)) st.origin = ser::read_origin(json::parse(s.text(11)));
        st.grad_underflow = s.i64(12);
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
    return {s.text(0), s.text(1), s.text(2)};
}

}  // namespace ampscope::storage
