// SPDX-License-Identifier: MIT
#pragma once
// A thin RAII layer over the SQLite C API (storage-internal).

#include <sqlite3.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ampscope/storage/errors.h"

namespace ampscope::storage {

class Store;

/// The connection of a Store, for the storage library's own files (never in its public API;
/// defined in store.cpp, so that this header needs no Store).
struct StoreAccess {
    static sqlite3* db(const Store& s);
};

}  // namespace ampscope::storage

namespace ampscope::storage::sql {

/// An SQLite failure. A StoreError, so that a damaged or hostile file that only fails deep
/// inside a read or an import (malformed pages, violated constraints) still reaches the user
/// as a database problem (exit 2), never as an untyped runtime error.
class Error : public StoreError {
public:
    using StoreError::StoreError;
};

[[noreturn]] inline void fail(sqlite3* db, const std::string& what) {
    throw Error(what + ": " + (db ? sqlite3_errmsg(db) : "sqlite error"));
}

class Stmt {
public:
    Stmt(sqlite3* db, const char* sql) : db_(db) {
        if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK) fail(db, std::string("prepare '") + sql + "'");
    }
    ~Stmt() { sqlite3_finalize(s_); }
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;

    Stmt& bind(int i, int64_t v) {
        check(sqlite3_bind_int64(s_, i, v));
        return *this;
    }
    Stmt& bind(int i, int v) { return bind(i, int64_t(v)); }
    Stmt& bind(int i, bool v) { return bind(i, int64_t(v)); }
    Stmt& bind(int i, double v) {
        check(sqlite3_bind_double(s_, i, v));
        return *this;
    }
    Stmt& bind(int i, const std::string& v) {
        check(sqlite3_bind_text(s_, i, v.data(), int(v.size()), SQLITE_TRANSIENT));
        return *this;
    }
    Stmt& bind(int i, const char* v) { return bind(i, std::string(v)); }
    /// Binds without copying: `v` must outlive the next step().
    Stmt& bind_static(int i, const std::string& v) {
        check(sqlite3_bind_text(s_, i, v.data(), int(v.size()), SQLITE_STATIC));
        return *this;
    }
    Stmt& bind_blob_static(int i, const void* p, size_t n) {
        check(sqlite3_bind_blob(s_, i, p, int(n), SQLITE_STATIC));
        return *this;
    }
    Stmt& bind_blob(int i, const void* p, size_t n) {
        check(sqlite3_bind_blob(s_, i, p, int(n), SQLITE_TRANSIENT));
        return *this;
    }
    Stmt& bind_null(int i) {
        check(sqlite3_bind_null(s_, i));
        return *this;
    }

    /// true while a row is available
    bool step() {
        const int rc = sqlite3_step(s_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        fail(db_, "step");
    }
    void run() {
        while (step()) {
        }
        reset();
    }
    /// Executes an INSERT/UPDATE and resets, keeping bindings (the next row rebinds all).
    void exec_row() {
        if (sqlite3_step(s_) != SQLITE_DONE) fail(db_, "step");
        sqlite3_reset(s_);
    }
    void reset() {
        sqlite3_reset(s_);
        sqlite3_clear_bindings(s_);
    }

    int type(int c) const { return sqlite3_column_type(s_, c); }
    bool is_null(int c) const { return type(c) == SQLITE_NULL; }
    int64_t i64(int c) const { return sqlite3_column_int64(s_, c); }
    double f64(int c) const { return sqlite3_column_double(s_, c); }
    std::string text(int c) const {
        auto* p = sqlite3_column_text(s_, c);
        return p ? std::string(reinterpret_cast<const char*>(p), size_t(sqlite3_column_bytes(s_, c))) : std::string();
    }
    std::vector<unsigned char> blob(int c) const {
        auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(s_, c));
        return p ? std::vector<unsigned char>(p, p + sqlite3_column_bytes(s_, c)) : std::vector<unsigned char>();
    }
    int bytes(int c) const { return sqlite3_column_bytes(s_, c); }
    const void* blob_ptr(int c) const { return sqlite3_column_blob(s_, c); }
    sqlite3_stmt* raw() { return s_; }

private:
    void check(int rc) {
        if (rc != SQLITE_OK) fail(db_, "bind");
    }
    sqlite3* db_;
    sqlite3_stmt* s_ = nullptr;
};

inline void exec(sqlite3* db, const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::string m = err ? err : "exec failed";
        sqlite3_free(err);
        throw Error(m + " (in: " + sql.substr(0, 80) + ")");
    }
}

/// BEGIN IMMEDIATE ... COMMIT, rolled back when an exception leaves the scope.
class Transaction {
public:
    explicit Transaction(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE"); }
    ~Transaction() {
        if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    void commit() {
        exec(db_, "COMMIT");
        done_ = true;
    }

private:
    sqlite3* db_;
    bool done_ = false;
};

}  // namespace ampscope::storage::sql
