// SPDX-License-Identifier: MIT
#pragma once
// The loops of a simulated pass's quantize-dequantize (precision/fp8.cpp, issue 30) on raw FP32
// buffers: amaxes, then scale, clamp, round to the element format and back. No LibTorch headers,
// so that this unit alone is compiled with -O3 (its loops vectorize) and OpenMP (its loops split
// across LibTorch's own OpenMP threads on a large operand). Every value is the one the ATen
// operations of fp8.cpp give: IEEE single operations in the same order, NaN kept as the cast keeps
// it (a stretch where a scaled value is NaN is done again with the exact element functions).

#include <cstdint>

#include "ampscope/engine/fp8.h"

namespace ampscope::detail::fp8k {

/// max |x| over n floats; NaN when any is NaN (at::max(at::abs(x))); 0 when n is 0.
float abs_max(const float* x, int64_t n);

/// max |x| of each block of `block` along the `rows` rows of length k (the last block of a row
/// shorter when k is not a multiple): out[r * ceil(k / block) + j].
void block_abs_max(const float* x, int64_t rows, int64_t k, int64_t block, float* out);

/// NVFP4's 2-D tiles: in `amax` [rows, nb] (block_abs_max's layout), each block's value replaced
/// by the maximum over its group of `tile` rows (NaN kept), the tile's amax.
void tile_max(float* amax, int64_t rows, int64_t nb, int64_t tile);

/// q = round(clamp(x * s, +-fmax)) / s: one scale for all n (tensorwise), or scales[r] for row r
/// of length k (rowwise: quantize_rows).
void quantize_scaled(Fp8Element e, const float* x, float* q, int64_t n, float s, float fmax);
void quantize_rows(Fp8Element e, const float* x, float* q, int64_t rows, int64_t k, const float* scales, float fmax);

/// Blocks of `block` along rows of length k (block_abs_max's layout), block b: q = round(clamp(y,
/// +-fmax)) * deq[b] with y = x / div[b] where div is given, else x * mult[b]. E2M1: fmax 6.
void quantize_blocks(Fp8Element e, const float* x, float* q, int64_t rows, int64_t k, int64_t block, const float* mult,
                     const float* div, const float* deq, float fmax);

}  // namespace ampscope::detail::fp8k
