// SPDX-License-Identifier: MIT
#pragma once
// Quantize-dequantize of one GEMM operand in an FP8 or block-scaled format (issue 30), as the
// recipes' emulation does it: the operand as the format holds it, returned in FP32. Each scheme
// repeats torchao 0.18's operations one for one (same ATen ops, same order), so the result is
// bitwise torchao's; tests/engine/fp8_test.cpp proves it against torchao in Python. Without
// statistics, on the CPU, the same values come from the loops of precision/fp8_kernels.h.
//  - Tensorwise: scale = fmax / max(amax, 1e-12) (computed in FP64 as 1/amax * fmax, then FP32),
//    element = clamp(x * scale, +-fmax) cast to the format, value = element / scale
//    (torchao.float8 tensorwise; a given scale instead for delayed scaling).
//  - Rowwise: the same with one amax per slice along the reduction axis, the scale rounded down
//    to a power of two (torchao's "rowwise" recipe).
//  - Mx: blocks of 32 along the axis; the E8M0 exponent floor(log2(amax)) - emax taken from
//    amax's exponent bits (never a cast to E8M0, which rounds), clamped to [-127, 128]; a NaN
//    block gets the NaN code; element = clamp(x / max(2^e, 2^-126), +-fmax) cast; value =
//    element * 2^e (torchao MXTensor.to_mx default FLOOR mode, then dequantize).
//  - Nvfp4: per-tensor scale amax / (448 * 6); per 16-block an E4M3 scale clamp(amax_b / 6 /
//    tensor_scale, 2^-6, 448); element = E2M1(clamp(x * (1 / tensor_scale / block scale), +-6))
//    rounded to nearest even; value = element * (tensor_scale * block scale) (torchao
//    NVFP4Tensor.to_nvfp4 with per_tensor_scale, then dequantize).
// Where ampscope departs from torchao, on purpose:
//  - a length along the axis that is not a multiple of the block (Mx 32, Nvfp4 16): the operand
//    is padded with zeros to the next multiple and the padding dropped afterwards (torchao
//    refuses such shapes); zeros change no block's amax.
//  - Nvfp4 with an all-zero operand (amax 0): the per-tensor scale is 1, so zeros stay zeros
//    (torchao divides by a zero per-tensor scale and returns NaN everywhere).

#include "ampscope/engine/fp8.h"

#include <utility>

namespace at {
class Tensor;
}

namespace ampscope::detail {

/// The operand `x` (any floating dtype, any shape; Mx and Nvfp4 need at least one dimension)
/// quantized as `spec` says and dequantized, in FP32 and x's shape. `stats`, when given, receives
/// the operand's statistics (QuantStats).
at::Tensor quantize_dequantize(const at::Tensor& x, const QuantSpec& spec, QuantStats* stats = nullptr);

/// A 2-D operand [rows, K] as a real scaled GEMM takes it (torch._scaled_mm, issue 30): the same
/// elements as quantize_dequantize gives along K, in the float8 dtype, and the multiplier scales
/// (element = x * scale): FP32, 0-dim for Tensorwise, [rows, 1] for Rowwise. Tensorwise and
/// Rowwise only (std::invalid_argument otherwise).
std::pair<at::Tensor, at::Tensor> to_fp8(const at::Tensor& x, const QuantSpec& spec);

/// `c` as E4M3FN / E5M2 holds it, back in FP32: round to nearest even, |c| at most the format's
/// largest finite value (clamped before, as the recipes do), NaN kept. The same values as a cast
/// to float8_e4m3fn / float8_e5m2 and back, without a tensor operation.
float round_e4m3(float c);
float round_e5m2(float c);
/// `v` as E2M1 holds it (NVFP4's elements: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives):
/// round to nearest, ties to the even code, saturating at 6 (torchao's f32_to_f4_unpacked then
/// f4_unpacked_to_f32); NaN stays NaN.
float round_e2m1(float v);

/// max |x| in FP32 (NaN when x holds one; 0 when empty): QuantStats::amax without the rest.
double operand_amax(const at::Tensor& x);

}  // namespace ampscope::detail
