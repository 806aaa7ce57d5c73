// SPDX-License-Identifier: MIT
// Export of runs to a self-contained file and import of files from others (untrusted).
#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "ampscope/engine/errors.h"
#include "ampscope/storage/store.h"
#include "schema.h"
#include "sqlite.h"

namespace ampscope::storage {

using sql::Stmt;

void export_runs(const Store& from, const std::vector<std::string>& uuids, const std::string& file) {
    namespace fs = std::filesystem;
    if (uuids.empty()) throw InputError("RUN", "", "no runs to export");
    const std::string tmp = file + ".partial";
    std::error_code ec;
    fs::remove(tmp, ec);
    {
        Store out(tmp);
        for (const auto& u : uuids) {
            if (from.kind(u) == "train")
                throw InputError(u, "RUN", "is a training run; exporting training runs is not supported yet");
            auto r = from.load_run(u);
            out.insert_run(r, from.status(u), from.error(u), from.annotations(u), from.review(u));
        }
        sql::exec(out.handle(), "PRAGMA journal_mode=DELETE");  // one self-contained file
    }
    fs::remove(tmp + "-wal", ec);
    fs::remove(tmp + "-shm", ec);
    fs::rename(tmp, file, ec);
    if (ec) throw InputError(file, "-o", "cannot write the export file: " + ec.message());
}

namespace {

/// Refuses files whose schema is not ampscope's: unknown triggers or views, missing tables or
/// columns, values of the wrong type, a failing integrity check.
void validate(Store& s, const std::string& file) {
    sqlite3* db = s.handle();
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
    struct TypeCheck { const char* table; const char* column; const char* allowed; };
    static const TypeCheck checks[] = {
        {"runs", "uuid", "'text'"}, {"runs", "header_json", "'text'"}, {"runs", "status", "'text'"},
        {"samples", "idx", "'integer'"}, {"samples", "sample_id", "'text'"},
        {"passes", "seq", "'integer'"}, {"passes", "num_outputs", "'integer'"}, {"passes", "outputs", "'blob'"},
        {"passes", "quality", "'real','integer','null'"}, {"layers", "idx", "'integer'"}, {"layers", "flags", "'integer'"}, {"layers", "stats", "'blob'"},
        {"layers", "absmax", "'real','integer','null'"}, {"layers", "module", "'text'"}, {"layers", "shape", "'blob'"}, {"deltas", "sample_idx", "'integer'"},
        {"deltas", "abs", "'real','integer'"}, {"flips", "sample_idx", "'integer'"}, {"annotations", "text", "'text'"},
        {"comparisons", "verdict", "'text'"}, {"layer_chunks", "data", "'blob'"}, {"layer_chunks", "rows", "'integer'"},
        {"layer_chunks", "first_idx", "'integer'"}};
    for (const auto& c : checks) {
        if (!tables.count(c.table)) continue;  // a table of a later schema version than the file's
        const std::string q = std::string("SELECT count(*) FROM ") + c.table + " WHERE typeof(" + c.column + ") NOT IN (" + c.allowed + ")";
        Stmt st(db, q.c_str());
        if (st.step() && st.i64(0) > 0)
            throw StoreError(file + ": " + std::to_string(st.i64(0)) + " value(s) of " + c.table + "." + c.column +
                             " have the wrong type (expected " + c.allowed + ")");
    }
    Stmt big(db, "SELECT count(*) FROM passes p WHERE p.num_outputs < 0 OR p.num_outputs > 1000000 OR length(p.outputs) != "
                 "4 * p.num_outputs * (SELECT count(*) FROM samples s WHERE s.run_id = p.run_id)");
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
    try {
        Store src(file, Store::Mode::ReadOnly);
        validate(src, file);
        RunFilter all;
        all.limit = 1 << 30;
        for (const auto& row : src.list_runs(all)) {
            if (row.kind != "compare") throw StoreError(file + ": run " + row.uuid + " is of kind '" + row.kind +
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
    for (const auto& l : runs) {
        if (into.insert_run(l.run, l.status, l.error, l.notes, l.review)) ++res.added;
        else ++res.skipped;
    }
    return res;
}

}  // namespace ampscope::storage
