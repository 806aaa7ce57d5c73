// SPDX-License-Identifier: MIT
// What names a run: its id (a random UUID), the time (ISO 8601 UTC) and the tool's version.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

#include "ampscope/engine/run.h"

namespace ampscope {

std::string version() {
    return AMPSCOPE_VERSION;
}

std::string now_iso8601() {
    const auto now = std::chrono::system_clock::now();
    const auto t = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, int(ms));
    return buf;
}

std::string make_uuid() {
    std::random_device rd;
    std::mt19937_64 gen((uint64_t(rd()) << 32) ^ rd() ^
                        uint64_t(std::chrono::high_resolution_clock::now().time_since_epoch().count()));
    uint64_t a = gen(), b = gen();
    a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
    b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 1
    char buf[40];
    std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", unsigned(a >> 32), unsigned((a >> 16) & 0xffff),
                  unsigned(a & 0xffff), unsigned(b >> 48), (unsigned long long)(b & 0xffffffffffffULL));
    return buf;
}

}  // namespace ampscope
