// SPDX-License-Identifier: MIT
// Opening the run store: which files may be created, written or only read; schema version
// checks; forward-only migrations; runs of dead processes marked interrupted.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "ampscope/storage/store.h"
#include "legacy_layers.h"
#include "schema.h"
#include "sqlite.h"

namespace ampscope::storage {

using sql::Stmt;

namespace {

/// Beyond this a user_version is no ampscope schema at all, newer or not.
constexpr int64_t kMaxPlausibleSchema = 1000;

enum class Content { Empty, Ours, Foreign };

/// What a file holds, read without writing anything. Throws StoreError for schema versions
/// that no ampscope writes, and for files that claim a version but hold no run table.
Content inspect(sqlite3* db, const std::string& path, std::string& foreign_tables) {
    int64_t v = 0;
    {
        Stmt s(db, "PRAGMA user_version");
        if (s.step()) v = s.i64(0);
    }
    if (v < 0 || v > kMaxPlausibleSchema)
        throw StoreError(path + ": impossible schema version " + std::to_string(v) +
                         " (PRAGMA user_version; expected 0 to " + std::to_string(kSchemaVersion) +
                         "): not an ampscope run database, or a damaged one");
    if (v > kSchemaVersion)
        throw StoreError(path + ": written by a newer ampscope (schema version " + std::to_string(v) +
                         "); this ampscope reads schema versions up to " + std::to_string(kSchemaVersion) +
                         ": update ampscope to open it");
    std::set<std::string> tables;
    {
        Stmt s(
            db,
            "SELECT name FROM sqlite_master WHERE type IN ('table','view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'");
        while (s.step()) tables.insert(s.text(0));
    }
    if (tables.empty()) {
        if (v == 0) return Content::Empty;
        throw StoreError(path + ": schema version " + std::to_string(v) +
                         " but no tables: not an ampscope run database, or a damaged one");
    }
    if (v >= 1 && tables.count("runs")) return Content::Ours;
    for (const auto& t : tables) {
        if (foreign_tables.size() > 60) {
            foreign_tables += ", ...";
            break;
        }
        foreign_tables += (foreign_tables.empty() ? "" : ", ") + t;
    }
    if (v >= 1)
        throw StoreError(path + ": not an ampscope run database (schema version " + std::to_string(v) +
                         " but no 'runs' table; it holds " + foreign_tables + ")");
    return Content::Foreign;
}

/// Whether no new file can be created next to `path` (its -shm and -wal), and none exists.
bool cannot_create_beside(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(path + "-shm", ec)) return false;
    const fs::path p(path);
    const std::string dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
    return access(dir.c_str(), W_OK) != 0;
}

/// The SQLite URI that opens `path` read-only as an immutable file (no locks, no -shm).
std::string immutable_uri(const std::string& path) {
    static const char* hex = "0123456789ABCDEF";
    std::string uri = "file:";
    for (const unsigned char c : path) {
        if (c == '%' || c == '?' || c == '#') {
            uri += '%';
            uri += hex[c >> 4];
            uri += hex[c & 15];
        } else {
            uri += char(c);
        }
    }
    return uri + "?immutable=1";
}

/// The private copy's folder, removed (with the copy and SQLite's files beside it) when it goes
/// out of scope, unless released. POSIX calls, not std::filesystem::remove_all/copy_file: the
/// CLI links LibTorch, whose libtorch.so exports its own std::filesystem symbols, and the
/// dynamic linker bound remove_all to those (a crash).
struct TempDir {
    std::string dir;
    ~TempDir() {
        if (dir.empty()) return;
        for (const char* f : {"/runs.sqlite", "/runs.sqlite-wal", "/runs.sqlite-shm", "/runs.sqlite-journal"})
            ::unlink((dir + f).c_str());
        ::rmdir(dir.c_str());
    }
    std::string release() { return std::exchange(dir, std::string()); }
};

bool copy_bytes(const std::string& from, const std::string& to) {
    std::ifstream in(from, std::ios::binary);
    std::ofstream out(to, std::ios::binary | std::ios::trunc);
    if (!in || !out) return false;
    out << in.rdbuf();
    out.flush();
    return bool(out) && !in.bad();
}

/// A read-only database in a folder where SQLite cannot create its -shm file, with a -wal file
/// beside it that holds committed changes (a writer that crashed or is still open elsewhere):
/// read as immutable, SQLite would ignore the -wal and show the database as it was before
/// those changes, silently. The database and its -wal are copied to a private folder, where
/// SQLite reads both. Returns the copy's path ("" when there is no -wal to read).
std::string snapshot_with_wal(const std::string& path, TempDir& tmp) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const std::string wal = path + "-wal";
    if (!fs::exists(wal, ec) || fs::file_size(wal, ec) == 0 || ec) return "";
    std::string templ = (fs::temp_directory_path(ec) / "ampscope-ro-XXXXXX").string();
    if (!mkdtemp(templ.data()))
        throw StoreError(
            path +
            ": its -wal file holds changes that can only be read from a copy, and no private folder could be "
            "made for one: " +
            std::strerror(errno));
    tmp.dir = templ;
    const std::string copy = templ + "/runs.sqlite";
    if (!copy_bytes(path, copy) || !copy_bytes(wal, copy + "-wal"))
        throw StoreError(path + ": its -wal file holds changes that can only be read from a copy, and the copy in " +
                         templ + " failed: " + std::strerror(errno));
    return copy;
}

}  // namespace

std::string default_db_path(const std::string& flag) {
    if (!flag.empty()) return flag;
    if (const char* e = std::getenv("AMPSCOPE_DB"); e && *e) return e;
    std::string base;
    if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x)
        base = x;
    else if (const char* h = std::getenv("HOME"); h && *h)
        base = std::string(h) + "/.local/share";
    else
        base = ".";
    return base + "/ampscope/runs.sqlite";
}

std::string host_name() {
    char buf[256] = {0};
    gethostname(buf, sizeof buf - 1);
    return buf;
}

Store::Store(const std::string& path, Mode mode, bool init_foreign) : path_(path) {
    namespace fs = std::filesystem;
    if (path.empty()) throw StoreError("empty database path; expected the name of a run database file");
    std::error_code ec;
    const bool exists = fs::exists(path, ec);
    read_only_ = mode == Mode::ReadOnly;
    if (!exists) {
        if (mode != Mode::Create)
            throw StoreError(path + ": file not found; expected an existing ampscope run database");
        if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path(), ec);
    } else if (fs::is_directory(path, ec)) {
        throw StoreError(path + ": is a directory; expected an ampscope run database file");
    } else if (!read_only_ && access(path.c_str(), W_OK) != 0) {
        read_only_ = true;  // not writable: read-only
    } else if (mode == Mode::ReadWrite && cannot_create_beside(path)) {
        read_only_ = true;  // its folder is read-only: no journal can be written, so nothing can be
    }
    int flags = read_only_ ? SQLITE_OPEN_READONLY
                : exists   ? SQLITE_OPEN_READWRITE
                           : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    std::string name = path;
    TempDir snapshot;
    if (read_only_ && exists && cannot_create_beside(path)) {
        // A WAL database in a folder where its -shm file cannot be created (a read-only mount,
        // a folder without write permission): SQLite cannot open it read-only the usual way.
        // Nothing can change the file from here, so it is read as immutable, or, when a -wal
        // beside it holds changes (which immutable would ignore), from a private copy of both.
        if (auto copy = snapshot_with_wal(path, snapshot); !copy.empty()) {
            name = copy;
        } else {
            name = immutable_uri(path);
            flags |= SQLITE_OPEN_URI;
        }
    }
    if (sqlite3_open_v2(name.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
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
        open_checked(init_foreign);
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
    snapshot_dir_ = snapshot.release();
}

void Store::open_checked(bool init_foreign) {
    sql::exec(db_, "PRAGMA foreign_keys=ON");
    std::string foreign;
    const Content content = inspect(db_, path_, foreign);  // reads only: nothing is written before this
    if (content == Content::Foreign && (read_only_ || !init_foreign))
        throw StoreError(path_ + ": not an ampscope run database (it holds other tables: " + foreign + ")" +
                         (read_only_ ? std::string()
                                     : std::string("; refusing to add ampscope's tables to it: choose another database "
                                                   "file, or ask for them explicitly (ampscope-cli --init-db)")));
    if (read_only_) {
        empty_ = content == Content::Empty;
        if (!empty_) check_layout();
        return;
    }
    if (content == Content::Ours) check_layout();  // before any write: a layout this build does not write is refused
    sql::exec(db_, "PRAGMA journal_mode=WAL");
    sql::exec(db_, "PRAGMA synchronous=NORMAL");
    sql::exec(db_, "PRAGMA cache_size=-65536");
    migrate();
    check_layout();
    mark_dead_runs_interrupted();
}

Store::~Store() {
    sqlite3_close(db_);
    TempDir copy{snapshot_dir_};  // removes the private copy, if any
}

int Store::schema_version() const {
    Stmt s(db_, "PRAGMA user_version");
    return s.step() ? int(s.i64(0)) : 0;
}

void Store::migrate() {
    if (legacy::has_legacy_layers(db_)) {
        // The first builds' 26-column layers table (schema 2, or 3 after a19053a migrated such a
        // file): converted once, in one transaction, whatever the version says.
        sql::Transaction t(db_);
        if (legacy::has_legacy_layers(db_)) legacy::convert_legacy_layers(db_, path_);
        t.commit();
    }
    const auto& m = schema::migrations();
    while (schema_version() < int(m.size())) {
        // The version is read again inside the write transaction: two processes opening a new
        // file at once migrate it once.
        sql::Transaction t(db_);
        const int v = schema_version();
        if (v < 0 || v >= int(m.size())) break;
        sql::exec(db_, m[size_t(v)]);
        sql::exec(db_, "PRAGMA user_version=" + std::to_string(v + 1));
        t.commit();
    }
}

void Store::check_layout() const {
    // Tables must have the columns this version reads and writes. Tables added by later
    // migrations are not required of an older file (an import, or before migrating).
    const int v = schema_version();
    for (const auto& [table, cols] : schema::expected_tables()) {
        if (v < 2 && (table == "training_steps" || table == "checkpoints")) continue;
        if (v < 3 && table == "benchmarks") continue;
        if (v < 4 && table == "layer_chunks") continue;
        if (v < 7 && (table == "token_stats" || table == "token_boundaries")) continue;
        if (v < 8 && table == "run_ranks") continue;
        if (v < 9 && table == "fp8_operands") continue;
        if (v < 11 && table == "fp8_real_gemm") continue;
        Stmt q(db_, ("PRAGMA table_info(" + table + ")").c_str());
        std::vector<std::string> have;
        while (q.step()) have.push_back(q.text(1));
        // the released 26-column layers table: read as it is, converted by a writable open
        const bool legacy = table == "layers" && v <= 3 && legacy::has_legacy_layers(db_);
        for (const auto& c : legacy ? legacy::layer_columns() : cols)
            if (std::find(have.begin(), have.end(), c) == have.end())
                throw StoreError(path_ + ": table '" + table + "' lacks column '" + c + "' of schema version " +
                                 std::to_string(v) +
                                 " (a database from a development build?); "
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
        if (pid > 0 && pid <= INT32_MAX && (kill(pid_t(pid), 0) == 0 || errno != ESRCH)) continue;  // still alive
        dead.push_back(q.i64(0));
    }
    for (auto id : dead) {
        Stmt u(db_,
               "UPDATE runs SET status='interrupted', error='the recording process ended before the run finished' "
               "WHERE id=?1 AND status='running'");
        u.bind(1, id).run();
    }
}

}  // namespace ampscope::storage
