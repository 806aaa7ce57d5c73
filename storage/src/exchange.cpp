// SPDX-License-Identifier: MIT
// Export of runs to a self-contained file and import of files from others (untrusted).
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "ampscope/engine/errors.h"
#include "ampscope/storage/output_file.h"
#include "ampscope/storage/replay_record.h"
#include "ampscope/storage/store.h"
#include "legacy_layers.h"
#include "schema.h"
#include "sqlite.h"

namespace ampscope::storage {

using sql::Stmt;
namespace fs = std::filesystem;

namespace {

constexpr uint32_t kExportApplicationId = 0x414D5053;  // "AMPS": PRAGMA application_id of export files

uint32_t big_endian(const unsigned char* p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

/// The files the exported runs read when they ran (model, probes; a replay's checkpoint, batch,
/// state and param-group files and its bundle's incident.json): an export never replaces them,
/// even with --force.
std::vector<ProtectedFile> recorded_inputs(const Store& from, const std::vector<std::string>& uuids) {
    std::vector<ProtectedFile> out;
    auto add = [&out](const std::string& path, const std::string& role) {
        if (!path.empty() && path != "demo" && path.rfind("demo:", 0) != 0) out.push_back({path, role});
    };
    for (const auto& u : uuids) {
        Stmt q(StoreAccess::db(from),
               "SELECT kind, COALESCE(model_source,''), COALESCE(probes_source,'') FROM runs WHERE uuid=?1");
        q.bind(1, u);
        if (!q.step()) continue;
        const std::string run = " of run " + u.substr(0, 8), kind = q.text(0);
        add(q.text(1), "the model" + run);
        add(q.text(2), (kind == "replay" ? "the batch" : "the probe file") + run);
        if (kind != "replay") continue;
        const auto r = checked_replay(from, u);  // an invalid stored replay is refused here, named
        add(r.spec.checkpoint, "the checkpoint" + run);
        add(r.spec.optimizer_state, "the optimizer state" + run);
        add(r.spec.scaler_state, "the scaler state" + run);
        add(r.spec.param_groups, "the param groups file" + run);
        if (r.spec.incident && !r.spec.incident->bundle.empty())
            add((fs::path(r.spec.incident->bundle) / "incident.json").string(), "the incident bundle" + run);
    }
    return out;
}

/// Refuses an output path that would destroy something: the open database, a file an exported
/// run read, a folder, a device, or an existing file that is not an ampscope export (unless
/// forced). The guard every output path goes through (output_file.h); the target is held.
OutputTarget check_export_target(const Store& from, const std::vector<std::string>& uuids, const std::string& file,
                                 bool force) {
    if (file.empty()) throw InputError("-o", "", "empty output path; expected a file name for the export");
    auto inputs = protected_database(from.path(), "the run database being exported from");
    for (auto& in : recorded_inputs(from, uuids)) inputs.push_back(std::move(in));
    return check_output_target(file, "-o", OutputKind::Export, inputs, force);
}

/// A private folder for building the export, removed with what it holds (std::filesystem's
/// remove_all: the binaries bind it to libstdc++'s, not LibTorch's copy; tests/cli check that).
struct BuildDir {
    std::string dir;
    BuildDir() {
        std::error_code ec;
        std::string templ = (fs::temp_directory_path(ec) / "ampscope-export-XXXXXX").string();
        if (ec || !mkdtemp(templ.data()))
            throw StoreError("cannot create a temporary folder for the export in " + templ + ": " +
                             std::strerror(errno));
        dir = templ;
    }
    ~BuildDir() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    BuildDir(const BuildDir&) = delete;
    BuildDir& operator=(const BuildDir&) = delete;
};

/// The export database built at `file`: every run of `uuids` with its notes and review.
void build_export(const Store& from, const std::vector<std::string>& uuids, const std::string& file) {
    Store out(file);
    for (const auto& u : uuids) {
        if (from.kind(u) == "replay") {  // its JSON is the record (replay_record.h)
            copy_replay(from, out, u);
            continue;
        }
        RunResult r;
        try {
            r = from.load_run(u);
        } catch (const StoreError& e) {
            const std::string m = e.what();
            throw StoreError((m.rfind(from.path(), 0) == 0 ? "" : from.path() + ": ") + m +
                             "; not exported (`ampscope-cli show " + u.substr(0, 8) + "` shows what is intact)");
        }
        out.insert_run(r, from.status(u), from.error(u), from.annotations(u), from.review(u));
    }
    sql::exec(StoreAccess::db(out), "PRAGMA application_id=" + std::to_string(kExportApplicationId));
    sql::exec(StoreAccess::db(out), "PRAGMA journal_mode=DELETE");  // one self-contained file
}

}  // namespace

bool is_export_file(const std::string& file) {
    unsigned char h[100] = {0};
    {
        std::ifstream in(file, std::ios::binary);
        if (!in.read(reinterpret_cast<char*>(h), sizeof h)) return false;
    }
    if (std::memcmp(h, "SQLite format 3", 16) != 0) return false;
    const uint32_t version = big_endian(h + 60), app = big_endian(h + 68);
    if (app == kExportApplicationId) return true;
    // Exports of earlier versions: ampscope's schema in rollback-journal mode (run databases
    // are in WAL mode: header bytes 18 and 19 are 2).
    if (app != 0 || h[18] != 1 || h[19] != 1 || version < 1 || version > uint32_t(kSchemaVersion)) return false;
    try {
        Store s(file, Store::Mode::ReadOnly);
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

void export_runs(const Store& from, const std::vector<std::string>& uuids, const std::string& file, bool force) {
    if (uuids.empty()) throw InputError("RUN", "", "no runs to export");
    for (const auto& u : uuids)
        if (from.kind(u) == "train")
            throw InputError(u, "RUN", "is a training run; exporting training runs is not supported yet");
    const OutputTarget target = check_export_target(from, uuids, file, force);
    // Built in a private folder, then copied into the folder checked above (held open): SQLite
    // opens files by path, which a folder or link swapped in meanwhile would redirect.
    BuildDir build;
    const std::string db = build.dir + "/export.sqlite";
    build_export(from, uuids, db);
    const int fd = ::open(db.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw StoreError(db + ": cannot read the export back: " + std::strerror(errno));
    try {
        copy_to_target(target, fd, "-o");
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
}

namespace {

/// A column and the SQLite types its values may have (typeof).
struct TypeCheck {
    const char* table;
    const char* column;
    const char* allowed;
};
/// The types every value of these columns must have.
const TypeCheck kTypeChecks[] = {{"runs", "uuid", "'text'"},
                                 {"runs", "header_json", "'text'"},
                                 {"runs", "status", "'text'"},
                                 {"samples", "idx", "'integer'"},
                                 {"samples", "sample_id", "'text'"},
                                 {"passes", "seq", "'integer'"},
                                 {"passes", "num_outputs", "'integer'"},
                                 {"passes", "outputs", "'blob'"},
                                 {"passes", "quality", "'real','integer','null','text'"},
                                 {"layers", "idx", "'integer'"},
                                 {"layers", "flags", "'integer'"},
                                 {"layers", "stats", "'blob'"},
                                 {"layers", "absmax", "'real','integer','null'"},
                                 {"layers", "module", "'text'"},
                                 {"layers", "shape", "'blob'"},
                                 {"deltas", "sample_idx", "'integer'"},
                                 {"deltas", "abs", "'real','integer'"},
                                 {"flips", "sample_idx", "'integer'"},
                                 {"annotations", "text", "'text'"},
                                 {"comparisons", "verdict", "'text'"},
                                 {"layer_chunks", "data", "'blob'"},
                                 {"layer_chunks", "rows", "'integer'"},
                                 {"layer_chunks", "first_idx", "'integer'"},
                                 {"run_ranks", "rank", "'integer'"},
                                 {"run_ranks", "host", "'text'"},
                                 {"run_ranks", "device", "'text'"},
                                 {"run_ranks", "first_sample", "'integer'"},
                                 {"run_ranks", "samples", "'integer'"},
                                 {"run_ranks", "seconds", "'real','integer'"},
                                 {"run_ranks", "bytes", "'integer'"},
                                 {"fp8_operands", "seq", "'integer'"},
                                 {"fp8_operands", "module", "'text'"},
                                 {"fp8_operands", "operand", "'text'"},
                                 {"fp8_operands", "scheme", "'text'"},
                                 {"fp8_operands", "element", "'text'"},
                                 {"fp8_operands", "elements", "'integer'"},
                                 {"fp8_operands", "underflow", "'integer'"},
                                 {"fp8_operands", "subnormal", "'integer'"},
                                 {"fp8_operands", "saturated", "'integer'"},
                                 {"fp8_operands", "amax", "'real','integer','null'"},
                                 {"fp8_operands", "op", "'text'"},
                                 {"fp8_operands", "nonfinite", "'integer'"},
                                 {"fp8_operands", "nonzero", "'integer'"},
                                 {"fp8_operands", "nonfinite_out", "'integer'"},
                                 {"fp8_operands", "scales", "'integer'"},
                                 {"fp8_operands", "scale_min", "'real','integer','null'"},
                                 {"fp8_operands", "scale_max", "'real','integer','null'"},
                                 {"fp8_operands", "tensor_scale", "'real','integer','null'"},
                                 {"fp8_operands", "sqnr_db", "'real','integer','null'"},
                                 {"fp8_operands", "signal", "'real','integer','null'"},
                                 {"fp8_operands", "noise", "'real','integer','null'"},
                                 {"fp8_real_gemm", "ran", "'integer'"},
                                 {"fp8_real_gemm", "reason", "'text'"},
                                 {"fp8_real_gemm", "kernel", "'text'"},
                                 {"fp8_real_gemm", "differing", "'integer'"},
                                 {"fp8_real_gemm", "max_abs_diff", "'real','integer','null'"},
                                 {"fp8_real_gemm", "decisions_differ", "'integer'"},
                                 {"fp8_real_gemm", "flips", "'integer'"},
                                 {"fp8_real_gemm", "seconds", "'real','integer'"},
                                 {"fp8_real_gemm", "outputs", "'blob'"}};

/// Refuses files whose schema is not ampscope's: unknown triggers or views, missing tables or
/// columns, values of the wrong type, a failing integrity check.
void validate(Store& s, const std::string& file) {
    sqlite3* db = StoreAccess::db(s);
    {
        Stmt q(db, "PRAGMA quick_check");
        if (!q.step() || q.text(0) != "ok") throw StoreError(file + ": damaged database (quick_check failed)");
    }
    const auto& expected = schema::expected_tables();  // the tables a file may hold
    const auto& ours = schema::migrations();
    std::set<std::string> tables;
    {
        Stmt q(db, "SELECT type, name, COALESCE(sql,'') FROM sqlite_master");
        while (q.step()) {
            const auto type = q.text(0), name = q.text(1), sqltext = q.text(2);
            if (type == "view") throw StoreError(file + ": contains a view '" + name + "'; ampscope files have none");
            if (type == "trigger") {
                bool known = false;
                for (const auto& m : ours)
                    known = known || (name == "runs_criteria_immutable" && m.find(sqltext) != std::string::npos);
                if (!known) throw StoreError(file + ": contains an unknown trigger '" + name + "'; refusing to use it");
            }
            if (type == "table" && !expected.count(name) && name.rfind("sqlite_", 0) != 0)
                throw StoreError(file + ": contains an unknown table '" + name + "'");
            if (type == "table") tables.insert(name);
        }
    }
    s.check_layout();
    // the first builds' 26-column layers table: each row is checked as it is read (legacy_layers.h)
    const bool legacy_layers = legacy::has_legacy_layers(db);
    for (const auto& c : kTypeChecks) {
        if (!tables.count(c.table)) continue;  // a table of a later schema version than the file's
        if (legacy_layers && std::string(c.table) == "layers") continue;
        const std::string q = std::string("SELECT count(*) FROM ") + c.table + " WHERE typeof(" + c.column +
                              ") NOT IN (" + c.allowed + ")";
        Stmt st(db, q.c_str());
        if (st.step() && st.i64(0) > 0)
            throw StoreError(file + ": " + std::to_string(st.i64(0)) + " value(s) of " + c.table + "." + c.column +
                             " have the wrong type (expected " + c.allowed + ")");
    }
    Stmt big(db,
             ("SELECT count(*) FROM passes p WHERE p.num_outputs < 0 OR p.num_outputs > " +
              std::to_string(kMaxOutputsPerSample) +
              " OR length(p.outputs) != 4 * p.num_outputs * (SELECT count(*) FROM samples s WHERE s.run_id = p.run_id)")
                 .c_str());
    if (big.step() && big.i64(0) > 0)
        throw StoreError(file + ": " + std::to_string(big.i64(0)) +
                         " pass(es) whose outputs do not match their sample count");
}

}  // namespace

ImportResult import_file(Store& into, const std::string& file) {
    {
        std::ifstream in(file, std::ios::binary);
        if (!in) throw InputError(file, "", "cannot open file for reading");
        char head[16] = {0};
        in.read(head, 16);
        if (in.gcount() < 16 || std::string(head, 15) != "SQLite format 3")
            throw InputError(file, "", "not an ampscope export (not an SQLite database)");
    }
    struct Loaded {
        RunResult run;
        std::string status, error;
        std::vector<Annotation> notes;
        Review review;
    };
    std::vector<Loaded> runs;
    std::vector<std::string> replays;
    try {
        Store src(file, Store::Mode::ReadOnly);
        validate(src, file);
        RunFilter all;
        all.limit = 1 << 30;
        for (const auto& row : src.list_runs(all)) {
            if (row.kind == "replay") {
                checked_replay(src, row.uuid);  // valid (every field typed, its own run id), or refused here
                replays.push_back(row.uuid);
                continue;
            }
            if (row.kind != "compare")
                throw StoreError(file + ": run " + row.uuid + " is of kind '" + row.kind +
                                 "'; this ampscope imports comparison runs only");
            Loaded l;
            l.run = src.load_run(row.uuid);
            l.status = row.status == "running" ? "interrupted" : row.status;
            l.error = row.error;
            l.notes = src.annotations(row.uuid);
            l.review = src.review(row.uuid);
            runs.push_back(std::move(l));
        }
    } catch (const sql::Error& e) {
        throw StoreError(file + ": unreadable: " + e.what());
    } catch (const std::out_of_range& e) {
        throw StoreError(file + ": inconsistent content: " + e.what());
    } catch (const StoreError& e) {
        const std::string m = e.what();
        if (m.rfind(file, 0) == 0) throw;
        throw StoreError(file + ": " + m);
    }
    ImportResult res;
    if (!replays.empty()) {
        Store src(file, Store::Mode::ReadOnly);
        for (const auto& u : replays) (copy_replay(src, into, u) ? res.added : res.skipped)++;
    }
    for (const auto& l : runs) {
        try {  // each run in its own transaction: a refused one leaves the earlier ones
            if (into.insert_run(l.run, l.status, l.error, l.notes, l.review))
                ++res.added;
            else
                ++res.skipped;
        } catch (const sql::Error& e) {
            throw StoreError(file + ": run " + l.run.run_id + " cannot be imported (inconsistent content: " + e.what() +
                             "); " + std::to_string(res.added) + " earlier run(s) were imported");
        }
    }
    return res;
}

}  // namespace ampscope::storage
