// SPDX-License-Identifier: MIT
#pragma once
// Shared helpers of the libFuzzer targets (tests/fuzz): a private scratch folder, input bytes
// written to a file (the parsers read paths), and the error policy.
//
// Error policy: a parser may refuse bad input by throwing. Refusals are the expected outcome
// for most fuzzed inputs and are not findings. Findings are what the sanitizers and libFuzzer
// report: memory errors, undefined behaviour, aborts, exceptions that are not std::exception,
// hangs (-timeout), leaks, huge allocations (-malloc_limit_mb).
// With AMPSCOPE_FUZZ_STRICT=1 in the environment, a refusal must also use one of the project's
// typed errors (InputError, StoreError, ...): any other std::exception aborts with its type and
// message, to audit the error contract (what the CLI maps to exit code 2 rather than 1).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "ampscope/engine/errors.h"

namespace fuzz {

/// A folder of this process's own under $TMPDIR (removed at exit).
inline const std::string& scratch() {
    static const std::string dir = [] {
        const char* t = std::getenv("TMPDIR");
        std::string tmpl = std::string(t && *t ? t : "/tmp") + "/ampscope-fuzz-XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        if (!mkdtemp(buf.data())) {
            std::perror("mkdtemp");
            std::abort();
        }
        std::string d(buf.data());
        static std::string at_exit_dir = d;
        std::atexit([] {
            std::error_code ec;
            std::filesystem::remove_all(at_exit_dir, ec);
        });
        return d;
    }();
    return dir;
}

inline std::string scratch_path(const std::string& name) {
    return scratch() + "/" + name;
}

inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    if (!out) {
        std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
        std::abort();
    }
}

/// Removes a database file and its SQLite side files.
inline void remove_db(const std::string& path) {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal", ".partial", ".partial-wal", ".partial-shm"})
        std::filesystem::remove(path + suffix, ec);
}

inline bool strict() {
    static const bool on = [] {
        const char* s = std::getenv("AMPSCOPE_FUZZ_STRICT");
        return s && *s && std::string(s) != "0";
    }();
    return on;
}

/// A finding the sanitizers cannot see (a broken invariant of a parser's result).
[[noreturn]] inline void finding(const std::string& what) {
    std::fprintf(stderr, "\n==FUZZ FINDING== %s\n", what.c_str());
    std::fflush(stderr);
    std::abort();
}

/// Runs f; the project's typed errors are expected refusals; other std::exceptions are
/// refusals too unless AMPSCOPE_FUZZ_STRICT is set (see the policy above). `Typed...` are
/// further exception types the caller's library documents (e.g. storage::StoreError).
template <class... Typed, class F>
void guarded(F&& f) {
    try {
        try {
            f();
        } catch (const ampscope::InputError&) {
        } catch (const ampscope::ModelError&) {
        } catch (const ampscope::BackendError&) {
        }
    } catch (const std::exception& e) {
        if ((dynamic_cast<const Typed*>(&e) || ...)) return;
        if (strict()) finding(std::string("untyped error ") + typeid(e).name() + ": " + e.what());
    }
}

}  // namespace fuzz
