// SPDX-License-Identifier: MIT
#pragma once
// The layers.stats column: TensorStats as 11 int64 counters followed by 6 float64 values, in
// the host's byte order (SQLite stores the bytes as given; files move between x86-64 and
// aarch64 hosts, both little-endian).

#include <cstdint>
#include <cstring>

#include "ampscope/engine/types.h"

namespace ampscope::storage {

struct PackedStats {
    int64_t i[11];
    double d[6];
};
static_assert(sizeof(PackedStats) == 136, "layers.stats is 136 bytes");

inline PackedStats pack(const TensorStats& t) {
    return {{t.count, t.nan, t.posinf, t.neginf, t.zeros, t.fp16_overflow, t.fp16_subnormal, t.fp16_underflow,
             t.bf16_overflow, t.bf16_subnormal, t.bf16_underflow},
            {t.min, t.max, t.absmax, t.min_nonzero_abs, t.mean, t.rms}};
}

/// Counters a file may hold: none negative, none above the element count, NaN/+Inf/-Inf
/// disjoint. Anything else is a damaged or hostile file (and would overflow sums later).
inline bool plausible(const PackedStats& p) {
    if (p.i[0] < 0) return false;
    for (int k = 1; k < 11; ++k)
        if (p.i[k] < 0 || p.i[k] > p.i[0]) return false;
    return static_cast<unsigned __int128>(p.i[1]) + static_cast<unsigned __int128>(p.i[2]) +
               static_cast<unsigned __int128>(p.i[3]) <=
           static_cast<unsigned __int128>(p.i[0]);
}

inline TensorStats unpack(const PackedStats& p) {
    TensorStats t;
    t.count = p.i[0];
    t.nan = p.i[1];
    t.posinf = p.i[2];
    t.neginf = p.i[3];
    t.zeros = p.i[4];
    t.fp16_overflow = p.i[5];
    t.fp16_subnormal = p.i[6];
    t.fp16_underflow = p.i[7];
    t.bf16_overflow = p.i[8];
    t.bf16_subnormal = p.i[9];
    t.bf16_underflow = p.i[10];
    t.min = p.d[0];
    t.max = p.d[1];
    t.absmax = p.d[2];
    t.min_nonzero_abs = p.d[3];
    t.mean = p.d[4];
    t.rms = p.d[5];
    return t;
}

}  // namespace ampscope::storage
