// SPDX-License-Identifier: MIT
#pragma once
// The statistics block kernel over float32 values (no LibTorch: its own translation unit,
// compiled for vectorisation). Classification uses the IEEE bit patterns: exact thresholds,
// NaN/Inf-safe, and integer min/max that compilers vectorise.

#include <cstdint>

#include "ampscope/engine/types.h"

namespace ampscope::detail {

struct KernelAcc {
    int64_t count = 0, nan = 0, posinf = 0, neginf = 0, zeros = 0;
    int64_t h_over = 0, h_sub = 0, h_under = 0, b_over = 0, b_sub = 0, b_under = 0;
    uint32_t min_key = 0xffffffffu, max_key = 0;  ///< order-preserving keys of finite values
    uint32_t amax_bits = 0, minnz_bits = 0x7f800000u;
    double sum = 0, sumsq = 0;
    void add(const KernelAcc& o);
    bool any_finite() const { return min_key != 0xffffffffu; }
    float min() const;
    float max() const;
};

/// The statistics of what a accumulated.
TensorStats to_stats(const KernelAcc& a);

/// Widens IEEE half / bfloat16 bit patterns to float, branch-free (vectorised).
void half_to_float(const uint16_t* h, float* out, int n);
void bf16_to_float(const uint16_t* h, float* out, int n);

/// Accumulates n values (n <= 2^30) into a: the exact, portable path (double sums).
void stats_block(const float* v, int n, KernelAcc& a);

/// Accumulates n values of each storage type into a, block by block. Where the CPU has
/// AVX2/FMA/F16C, a block whose values are finite and within [2^-60, 2^56] in magnitude
/// takes a fast path: one integer pass for the magnitude range (which decides whether any
/// range counter can be non-zero), one float pass for min, max, sum and sum of squares with
/// 32 float lanes of at most 32 elements each (relative error of sum and sum of squares
/// below 33 * 2^-24, as torch's own cascade sum), block sums in double. A block with NaN/Inf
/// or finite magnitudes above 2^56 (a causal mask's -inf or finfo.min) takes a masked float
/// pass: non-finite values left out, the huge ones summed in lanes of their own scaled by
/// 2^-96 (exact), each part within the same bound; in half and bfloat16 its counters, min and
/// max are taken on the 16-bit patterns and its values widened in registers (no widened copy).
/// Every other block (finite values all below 2^-60), and every CPU without those
/// instructions, takes the exact path.
void stats_f32(const float* v, int64_t n, KernelAcc& a);
void stats_f16(const uint16_t* h, int64_t n, KernelAcc& a);
void stats_bf16(const uint16_t* h, int64_t n, KernelAcc& a);

/// Forces the exact, portable path that CPUs without AVX2/FMA/F16C take (tests run the
/// statistics on both paths). Default: on when the environment has AMPSCOPE_STATS_PORTABLE=1
/// (read once, at first use).
void set_stats_portable(bool on);
/// Whether blocks may take the AVX2 fast path now (the CPU has it and it is not forced off).
bool stats_fast_path();

/// Number of NaN and +-Inf values (for per-row counts, asked only when a tensor has some).
int64_t count_nonfinite_f32(const float* v, int64_t n);
int64_t count_nonfinite_f16(const uint16_t* h, int64_t n);
int64_t count_nonfinite_bf16(const uint16_t* h, int64_t n);

}  // namespace ampscope::detail
