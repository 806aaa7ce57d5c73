// SPDX-License-Identifier: MIT
// Export of runs to a self-contained file and import of files from others (untrusted).
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

namespace {

constexpr uint32_t kExportApplicationId = 0x414D5053;  // "AMPS": PRAGMA application_id of export files

uint32_t big_endian(const unsigned char* p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

/// Removes a temporary database file and its journals unless released.
class TempFile {
public:
    explicit TempFile(std::string path) : path_(std::move(path)) {}
    ~TempFile() {
        if (path_.empty()) return;
        for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path_ + suffix).c_str());
    }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    const std::string& path() const { return path_; }
    void release() { path_.clear(); }

private:
    std::string path_;
};

/// Refuses an output path that would destroy something: the open database, a folder, a device,
/// or an existing file that is not an ampscope export (unless forced). The guard every output
/// path goes through (output_file.h).
void check_export_target(const Store& from, const std::string& file, bool force) {
    if (file.empty()) throw InputError("-o", "", "empty output path; expected a file name for the export");
    check_output_file(file, "-o", OutputKind::Export, protected_database(from.path(), "the run database being exported from"), force);
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
    check_export_target(from, file, force);
    for (const auto& u : uuids)
        if (from.kind(u) == "train") throw InputError(u, "RUN", "is a training run; exporting training runs is not supported yet");
    TempFile tmp(make_temp_next_to(file, "-o"));
    {
        Store out(tmp.path());
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
                throw StoreError((m.rfind(from.path(), 0) == 0 ? "" : from.path() + ": ") + m + "; not exported (`ampscope-cli show " +
                                 u.substr(0, 8) + "` shows what is intact)");
            }
            out.insert_run(r, from.status(u), from.error(u), from.annotations(u), from.review(u));
        }
        sql::exec(StoreAccess::db(out), "PRAGMA application_id=" + std::to_string(kExportApplicationId));
        sql::exec(StoreAccess::db(out), "PRAGMA journal_mode=DELETE");  // one self-contained file
    }
    if (std::rename(tmp.path().c_str(), write_target(file).c_str()) != 0)
        throw InputError(file, "-o", std::string("cannot write the export file: ") + std::strerror(errno));
    tmp.release();
}

namespace {

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
                for (const auto& m : ours) known = known || (name == "runs_criteria_immutable" && m.find(sqltext) != std::string::npos);
                if (!known) throw StoreError(file + ": contains an unknown trigger '" + name + "'; refusing to use it");
            }
            if (type == "table" && !expected.count(name) && name.rfind("sqlite_", 0) != 0)
                throw StoreError(file + ": contains an unknown table '" + name + "'");
            if (type == "table") tables.insert(name);
        }
    }
    s.check_layout();
    struct TypeCheck {
        const char* table;
        const char* column;
        const char* allowed;
    };
    static const TypeCheck checks[] = {{"runs", "uuid", "'text'"},
                                       {"runs", "header_json", "'text'"},
                                       {"runs", "status", "'text'"},
                                       {"samples", "idx", "'integer'"},
                                       {"samples", "sample_id", "'text'"},
                                       {"passes", "seq", "'integer'"},
                                       {"passes", "num_outputs", "'integer'"},
                                       {"passes", "outputs", "'blob'"},
                                       {"passes", "quality", "'real','integer','null'"},
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
                                       {"layer_chunks", "first_idx", "'integer'"}};
    // the first builds' 26-column layers table: each row is checked as it is read (legacy_layers.h)
    const bool legacy_layers = legacy::has_legacy_layers(db);
    for (const auto& c : checks) {
        if (!tables.count(c.table)) continue;  // a table of a later schema version than the file's
        if (legacy_layers && std::string(c.table) == "layers") continue;
        const std::string q = std::string("SELECT count(*) FROM ") + c.table + " WHERE typeof(" + c.column + ") NOT IN (" + c.allowed + ")";
        Stmt st(db, q.c_str());
        if (st.step() && st.i64(0) > 0)
            throw StoreError(file + ": " + std::to_string(st.i64(0)) + " value(s) of " + c.table + "." + c.column +
                             " have the wrong type (expected " + c.allowed + ")");
    }
    Stmt big(db, ("SELECT count(*) FROM passes p WHERE p.num_outputs < 0 OR p.num_outputs > " + std::to_string(kMaxOutputsPerSample) +
                  " OR length(p.outputs) != 4 * p.num_outputs * (SELECT count(*) FROM samples s WHERE s.run_id = p.run_id)")
                     .c_str());
    if (big.step() && big.i64(0) > 0)
        throw StoreError(file + ": " + std::to_string(big.i64(0)) + " pass(es) whose outputs do not match their sample count");
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
                replay_from_json(replay_json(src, row.uuid), file + ": run " + row.uuid);  // readable, or refused here
                replays.push_back(row.uuid);
                continue;
            }
            if (row.kind != "compare")
                throw StoreError(file + ": run " + row.uuid + " is of kind '" + row.kind + "'; this ampscope imports comparison runs only");
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
            throw StoreError(file + ": run " + l.run.run_id + " cannot be imported (inconsistent content: " + e.what() + "); " +
                             std::to_string(res.added) + " earlier run(s) were imported");
        }
    }
    return res;
}

}  // namespace ampscope::storage
