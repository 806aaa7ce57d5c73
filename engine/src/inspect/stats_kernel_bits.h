// SPDX-License-Identifier: MIT
#pragma once
// What the two halves of the CPU statistics kernel share (internal to inspect/): the IEEE bit
// thresholds, the block sizes, order-preserving keys, and the AVX2 fast path
// (stats_kernel_avx2.cpp) that stats_kernel.cpp dispatches to where the CPU has it.

#include <cstdint>
#include <cstring>

#include "inspect/stats_kernel.h"

namespace ampscope::detail::kernel {

constexpr uint32_t kExpMask = 0x7f800000u;
constexpr uint32_t kFp16MaxBits = 0x477fe000u;        // 65504
constexpr uint32_t kFp16MinNormalBits = 0x38800000u;  // 2^-14
constexpr uint32_t kFp16MinSubBits = 0x33800000u;     // 2^-24
constexpr uint32_t kBf16MaxBits = 0x7f7f0000u;        // 3.3895e38
constexpr uint32_t kBf16MinNormalBits = 0x00800000u;  // 2^-126
constexpr uint32_t kBf16MinSubBits = 0x00010000u;     // 2^-133

/// Monotone map float bits -> unsigned key (negative values reversed).
inline uint32_t key_of(uint32_t b) {
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
inline uint32_t bits_of_key(uint32_t k) {
    return (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
}
inline float as_float(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

constexpr int kBlock = 4096;                   // 16 KiB of floats: stays in L1 between passes
constexpr int kChunk = 1024;                   // float lanes are summed into double per chunk
constexpr uint32_t kFastLoBits = 0x21800000u;  // 2^-60: squares stay normal floats
constexpr uint32_t kFastHiBits = 0x5b800000u;  // 2^56: 1024 squares stay below float max

inline uint32_t bits_of(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

/// The AVX2/FMA/F16C fast path (stats_kernel.h says when a block takes it). Builds without it
/// (other CPUs, sanitizers) have stubs: cpu_has_avx2() is false there and nothing else is called.
bool cpu_has_avx2();
/// One block of at most kBlock values.
void f32_block(const float* v, int n, KernelAcc& a);
void f16_block(const uint16_t* h, int n, KernelAcc& a);
void bf16_block(const uint16_t* h, int n, KernelAcc& a);
/// Number of 16-bit patterns whose magnitude bits exceed `finite_max` (NaN and Inf).
int64_t count_above16(const uint16_t* h, int64_t n, uint16_t finite_max);

}  // namespace ampscope::detail::kernel
