// SPDX-License-Identifier: MIT
#pragma once
// CLI11 validators for ampscope-cli's option values: a value out of range is a usage error
// (exit 2) whose message names the flag and the allowed range, never a silent wrap.

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <regex>
#include <string>

namespace ampscope::cli::checks {

namespace detail {

inline bool parse_double(const std::string& s, double& v) {
    if (s.empty()) return false;
    char* end = nullptr;
    errno = 0;
    v = std::strtod(s.c_str(), &end);
    // ERANGE on underflow too: a subnormal value (1e-320) is a number; only overflow is out of range
    return end && *end == '\0' && (errno != ERANGE || std::fabs(v) < 1.0);
}

inline bool parse_int(const std::string& s, long long& v) {
    if (s.empty()) return false;
    char* end = nullptr;
    errno = 0;
    v = std::strtoll(s.c_str(), &end, 10);
    return end && *end == '\0' && errno != ERANGE;
}

inline std::string fmt(double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
}

}  // namespace detail

/// A finite number in the interval from `lo` to `hi`; `lo_open`/`hi_open` exclude the bound.
inline CLI::Validator Number(double lo, double hi = std::numeric_limits<double>::infinity(), bool lo_open = false,
                             bool hi_open = false) {
    std::string range = "a finite number ";
    if (std::isinf(hi))
        range += (lo_open ? "> " : ">= ") + detail::fmt(lo);
    else
        range += std::string(lo_open ? "> " : ">= ") + detail::fmt(lo) + " and " + (hi_open ? "< " : "<= ") +
                 detail::fmt(hi);
    return CLI::Validator(
        [=](std::string& s) -> std::string {
            double v = 0;
            const bool ok = detail::parse_double(s, v) && std::isfinite(v) && (lo_open ? v > lo : v >= lo) &&
                            (hi_open ? v < hi : v <= hi);
            return ok ? std::string() : "'" + s + "': expected " + range;
        },
        "X", "Number");
}

/// Any finite number.
inline CLI::Validator Finite() {
    return CLI::Validator(
        [](std::string& s) -> std::string {
            double v = 0;
            return detail::parse_double(s, v) && std::isfinite(v) ? std::string()
                                                                  : "'" + s + "': expected a finite number";
        },
        "X", "Finite");
}

/// An integer from `lo` to `hi` (no wrap of negative values into unsigned options).
inline CLI::Validator Integer(long long lo, long long hi = std::numeric_limits<int>::max()) {
    const std::string range = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
    return CLI::Validator(
        [=](std::string& s) -> std::string {
            long long v = 0;
            const bool ok = detail::parse_int(s, v) && v >= lo && v <= hi;
            return ok ? std::string() : "'" + s + "': expected " + range;
        },
        "N", "Integer");
}

/// A seed: an integer from 0 to 2^64-1.
inline CLI::Validator Seed() {
    return CLI::Validator(
        [](std::string& s) -> std::string {
            static const std::regex re("^[0-9]{1,20}$");
            bool ok = std::regex_match(s, re);
            if (ok) {
                errno = 0;
                (void)std::strtoull(s.c_str(), nullptr, 10);
                ok = errno != ERANGE;
            }
            return ok ? std::string() : "'" + s + "': expected an integer from 0 to 18446744073709551615";
        },
        "N", "Seed");
}

/// cpu | cuda | cuda:N with N from 0 to 127 (c10's device index range).
inline CLI::Validator Device() {
    return CLI::Validator(
        [](std::string& s) -> std::string {
            static const std::regex re("^(cpu|cuda)(:([0-9]{1,3}))?$");
            std::smatch m;
            const bool ok = std::regex_match(s, m, re) && !(m[1] == "cpu" && m[2].matched) &&
                            (!m[3].matched || std::stoi(m[3]) <= 127);
            return ok ? std::string() : "'" + s + "': expected cpu, cuda or cuda:N with N from 0 to 127";
        },
        "DEVICE", "Device");
}

/// A non-empty path (an empty --db would silently mean the default database).
inline CLI::Validator NonEmptyPath() {
    return CLI::Validator(
        [](std::string& s) -> std::string { return s.empty() ? "an empty path; expected a file name" : ""; }, "PATH",
        "NonEmptyPath");
}

/// A non-empty value (an empty one would silently mean "not given"); `expected` says what to give.
inline CLI::Validator NonEmpty(const std::string& expected) {
    return CLI::Validator(
        [expected](std::string& s) -> std::string { return s.empty() ? "an empty value; expected " + expected : ""; },
        "VALUE", "NonEmpty");
}

/// An ISO-8601 date or UTC date-time, YYYY-MM-DD[THH:MM[:SS[.fff]]][Z]; a space instead of T
/// is accepted and normalised (started_at is stored as 2025-01-31T12:00:00.000Z).
inline CLI::Validator IsoTime() {
    return CLI::Validator(
        [](std::string& s) -> std::string {
            static const std::regex re(
                "^([0-9]{4})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
                "([T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\\.[0-9]{1,9})?)?Z?)?$");
            if (!std::regex_match(s, re))
                return "'" + s + "': expected an ISO-8601 date or UTC time, e.g. 2025-01-31 or 2025-01-31T14:05:00Z";
            if (s.size() > 10) s[10] = 'T';
            if (s.back() == 'Z') s.pop_back();
            return std::string();
        },
        "ISO-8601", "IsoTime");
}

}  // namespace ampscope::cli::checks
