// SPDX-License-Identifier: MIT
// Quantize-dequantize in FP8 and block-scaled formats, one ATen operation for each of torchao
// 0.18's (see fp8.h for the rules and where ampscope departs), and the statistics of each operand.
#include "precision/fp8.h"
#include "precision/fp8_kernels.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

namespace ampscope::detail {

namespace {

at::ScalarType dtype_of(Fp8Element e) {
    return e == Fp8Element::E5M2 ? at::kFloat8_e5m2 : at::kFloat8_e4m3fn;
}

/// The parts of one quantization that its statistics need, all FP32 and of x's shape (after the
/// axis moved last, padding dropped): y the scaled value before the clamp, e the element as the
/// format holds it, q the dequantized value; mult the scales actually multiplied in.
struct Parts {
    at::Tensor y, e, q, mult;
    double tensor_scale = 1.0;
};

/// torchao.float8.float8_utils.amax_to_scale: fmax / clamp(amax, 1e-12) in FP64 (Python's
/// float / tensor is reciprocal, then multiply), then FP32; optionally floor to a power of two.
at::Tensor amax_to_scale(const at::Tensor& amax, double fmax, bool pow2) {
    auto res = (at::clamp_min(amax.to(at::kDouble), 1e-12).reciprocal() * fmax).to(at::kFloat);
    if (pow2) res = at::exp2(at::floor(at::log2(res)));
    return res;
}

/// Tensorwise / rowwise (torchao hp_tensor_and_scale_to_float8 + the emulated GEMM's operand
/// `_data.float() / _scale`): x FP32.
Parts scaled_fp8(const at::Tensor& x, const QuantSpec& spec) {
    const double fmax = max_finite(spec.element);
    at::Tensor scale;
    if (spec.scheme == Fp8Scheme::Rowwise)
        scale = amax_to_scale(at::amax(at::abs(x), {spec.axis}, true), fmax, spec.pow2_scales);
    else if (spec.given_scale > 0.0f)
        scale = at::scalar_tensor(spec.given_scale, at::kFloat);
    else
        scale = amax_to_scale(at::max(at::abs(x)), fmax, false);
    Parts p;
    p.y = x * scale;
    p.e = at::clamp(p.y, -fmax, fmax).to(dtype_of(spec.element)).to(at::kFloat);
    p.q = p.e / scale;
    p.mult = scale;
    return p;
}

/// amax_to_scale for one amax, the same IEEE operations in the same order (FP64 reciprocal of
/// the clamped amax, times fmax, rounded to FP32).
float amax_to_scale(float amax, double fmax) {
    const double a = double(amax);
    return float((1.0 / (std::isnan(a) ? a : std::max(a, 1e-12))) * fmax);
}

/// scaled_fp8(x, spec).q without the parts only the statistics need, for a contiguous FP32 CPU x
/// (rowwise: along its last dimension): the amaxes in one loop, scale, clamp, cast and back in
/// another. Bitwise the same values; the rowwise scales' power-of-two rounding stays ATen's
/// log2/exp2 (torchao's, not exact math).
at::Tensor scaled_fp8_q(const at::Tensor& x, const QuantSpec& spec) {
    const float fmax = float(max_finite(spec.element));
    const float* src = x.const_data_ptr<float>();
    auto q = at::empty_like(x);
    float* dst = q.data_ptr<float>();
    const int64_t n = x.numel();
    if (spec.scheme != Fp8Scheme::Rowwise) {
        const float s = spec.given_scale > 0.0f ? spec.given_scale : amax_to_scale(fp8k::abs_max(src, n), fmax);
        fp8k::quantize_scaled(spec.element, src, dst, n, s, fmax);
        return q;
    }
    const int64_t k = x.size(-1), rows = k ? n / k : 0;
    auto amax = at::empty({rows}, x.options());
    fp8k::block_abs_max(src, rows, k, std::max<int64_t>(k, 1), amax.data_ptr<float>());
    const auto scales = amax_to_scale(amax, fmax, spec.pow2_scales);
    fp8k::quantize_rows(spec.element, src, dst, rows, k, scales.const_data_ptr<float>(), fmax);
    return q;
}

/// The elements' dequantized values from E8M0 codes (torchao get_fp_scale: 2^(code - 127) as
/// pow(2, int16), NaN for the NaN code 255).
at::Tensor mx_scale_values(const at::Tensor& biased) {
    const auto s_offset = biased.to(at::kShort) - 127;
    auto s_fp = at::pow(at::full_like(s_offset, 2.0, at::kFloat), s_offset);
    return at::where(biased != 255, s_fp, std::numeric_limits<double>::quiet_NaN());
}

at::Tensor mx_values(const at::Tensor& e, const at::Tensor& biased) {
    return e * mx_scale_values(biased);
}

/// The RCEIL codes and multipliers of blocks whose max |x| is `max_abs` (ATen's log2 and exp2,
/// whose rounding torchao's scales carry): see mx_rceil.
std::pair<at::Tensor, at::Tensor> rceil_codes(const at::Tensor& max_abs, double fmax) {
    const auto descale = max_abs / fmax;
    const auto normal = (at::clamp(at::ceil(at::log2(descale)), -127, 127) + 127).to(at::kByte);
    const auto biased =
        at::where(at::isnan(descale), c10::Scalar(255), at::where(at::isinf(descale), c10::Scalar(254), normal))
            .to(at::kByte);
    const auto rcp = at::where(
        biased == 255, descale,
        at::where(biased == 254, at::scalar_tensor(std::ldexp(1.0, -127), at::kFloat),
                  at::where(biased == 0, at::scalar_tensor(1.0, at::kFloat), at::exp2(127.0 - biased.to(at::kFloat)))));
    return {biased, rcp};
}

/// MX with RCEIL scales (torchao _to_mx_rceil's eager fallback, then to_dtype): descale = amax /
/// fmax; code = 255 for a NaN amax, 254 for an infinite one, else clamp(ceil(log2(descale)), -127,
/// 127) + 127; the data multiplied by 2^(127 - code) (1 for code 0, 2^-127 for 254), clamped, cast.
Parts mx_rceil(const at::Tensor& x, const at::Tensor& xb, const at::Tensor& max_abs, Fp8Element element) {
    const double fmax = max_finite(element);
    const auto [biased, rcp] = rceil_codes(max_abs, fmax);
    Parts p;
    p.y = xb * rcp;
    p.e = at::clamp(p.y, -fmax, fmax).to(dtype_of(element)).to(at::kFloat);
    p.q = mx_values(p.e, biased);
    p.mult = rcp;
    p.y = p.y.reshape(x.sizes());
    p.e = p.e.reshape(x.sizes());
    p.q = p.q.reshape(x.sizes());
    return p;
}

/// MX (torchao mx_tensor.to_mx, FLOOR, then to_dtype): x FP32 contiguous, last dim a multiple of 32.
Parts mx(const at::Tensor& x, Fp8Element element, MxScaling scaling) {
    const int emax = element == Fp8Element::E5M2 ? 15 : 8;  // F8E5M2_MAX_POW2, F8E4M3_MAX_POW2
    const double fmax = max_finite(element);
    const auto xb = x.reshape({-1, 32});
    const auto max_abs = at::amax(at::abs(xb), {-1}, true);
    if (scaling == MxScaling::Rceil) return mx_rceil(x, xb, max_abs, element);
    const auto pow2 = at::bitwise_and(at::bitwise_right_shift(max_abs.view(at::kInt), 23), 255) - 127;
    auto biased = (at::clamp(pow2 - emax, -127, 128) + 127).to(at::kByte);
    biased = at::where(at::isnan(max_abs), c10::Scalar(255), biased);
    const auto scale_fp32 =
        at::clamp_min(at::bitwise_left_shift(biased.to(at::kInt), 23).view(at::kFloat), std::ldexp(1.0, -126));
    Parts p;
    p.y = xb / scale_fp32;
    p.e = at::clamp(p.y, -fmax, fmax).to(dtype_of(element)).to(at::kFloat);
    p.q = mx_values(p.e, biased);
    p.mult = scale_fp32.reciprocal();
    p.y = p.y.reshape(x.sizes());
    p.e = p.e.reshape(x.sizes());
    p.q = p.q.reshape(x.sizes());
    return p;
}

/// E2M1 stochastic rounding (QuantSpec::stochastic) of |v| <= 6 between its neighbours lo < hi
/// on the grid: hi when u < (|v| - lo) / (hi - lo), sign kept; NaN stays NaN.
float e2m1_stochastic(float v, float u) {
    static constexpr float kGrid[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float a = std::fabs(v);
    if (std::isnan(a)) return v;
    if (a >= 6.0f) return std::copysign(6.0f, v);
    int i = 0;
    while (kGrid[i + 1] <= a) ++i;  // kGrid[i] <= a < kGrid[i + 1]
    const float lo = kGrid[i], hi = kGrid[i + 1];
    return std::copysign(u < (a - lo) / (hi - lo) ? hi : lo, v);
}

/// `v` (FP32, contiguous) rounded to E2M1: to nearest even, or stochastically with one draw of
/// at::rand per element (QuantSpec::stochastic).
at::Tensor e2m1(const at::Tensor& v, bool stochastic) {
    auto out = at::empty_like(v, v.options().device(at::kCPU));
    const auto vc = v.to(at::kCPU);
    const float* src = vc.const_data_ptr<float>();
    float* dst = out.data_ptr<float>();
    if (stochastic) {
        const auto u = at::rand(v.sizes(), v.options()).to(at::kCPU).contiguous();  // the device's generator
        const float* r = u.const_data_ptr<float>();
        for (int64_t i = 0, n = v.numel(); i < n; ++i) dst[i] = e2m1_stochastic(src[i], r[i]);
    } else {
        for (int64_t i = 0, n = v.numel(); i < n; ++i) dst[i] = round_e2m1(src[i]);
    }
    return out.to(v.device());
}

/// NVFP4 (torchao NVFP4Tensor.to_nvfp4 with per_tensor_scale = per_tensor_amax_to_scale(amax),
/// then dequantize): x FP32 contiguous, last dim a multiple of 16; with tiles_2d x is [R, K] with R
/// a multiple of 16 too, and each block's amax is its 16 x 16 tile's; stochastic: e2m1's rounding.
Parts nvfp4(const at::Tensor& x, bool tiles_2d, bool stochastic) {
    const auto xb = x.reshape({-1, 16});
    const auto tensor_amax = at::max(at::abs(x));
    auto pts = tensor_amax.to(at::kFloat) / (448.0 * 6.0);
    pts = at::where(tensor_amax == 0, at::scalar_tensor(1.0, at::kFloat), pts);  // ampscope: zeros stay zeros
    auto block_amax = at::amax(at::abs(xb), {-1});
    if (tiles_2d) {  // [R / 16, 16, K / 16, 16]: a tile's amax, repeated for its 16 rows
        const int64_t r = x.size(0), k = x.size(1);
        block_amax = at::amax(at::abs(x.reshape({r / 16, 16, k / 16, 16})), {1, 3})
                         .unsqueeze(1)
                         .expand({r / 16, 16, k / 16})
                         .reshape({-1});
    }
    const auto block_scale = block_amax / 6.0;
    const auto sbs32 = at::clamp(block_scale / pts, 0.015625, 448.0).to(at::kFloat8_e4m3fn).to(at::kFloat);
    const auto recip = (pts.reciprocal() * 1.0) / sbs32;
    Parts p;
    p.y = xb * recip.unsqueeze(-1);
    p.e = e2m1(at::clamp(p.y, -6.0, 6.0).contiguous(), stochastic);
    p.q = p.e * (pts * sbs32).unsqueeze(-1);
    p.mult = recip;
    p.tensor_scale = pts.item<double>();
    p.y = p.y.reshape(x.sizes());
    p.e = p.e.reshape(x.sizes());
    p.q = p.q.reshape(x.sizes());
    return p;
}

/// Block formats: the axis moved last, padded with zeros to a multiple of the block, quantized,
/// the padding dropped (x FP32).
Parts blocked(const at::Tensor& x, const QuantSpec& spec) {
    const int64_t block = spec.scheme == Fp8Scheme::Mx ? 32 : 16;
    auto xm = (x.dim() == 0 ? x.reshape({1}) : x).movedim(spec.axis, -1).contiguous();
    const int64_t k = xm.size(-1);
    const int64_t pad = (block - k % block) % block;
    const bool tiles = spec.tiles_2d && spec.scheme == Fp8Scheme::Nvfp4;
    if (tiles && xm.dim() != 2) throw std::invalid_argument("quantize: 16 x 16 tiles of a 2-D operand");
    const int64_t rows = tiles ? xm.size(0) : 0, row_pad = tiles ? (16 - rows % 16) % 16 : 0;
    if (row_pad)
        xm = at::constant_pad_nd(xm, {0, pad, 0, row_pad});
    else if (pad)
        xm = at::constant_pad_nd(xm, {0, pad});
    Parts p = spec.scheme == Fp8Scheme::Mx ? mx(xm, spec.element, spec.mx_scaling) : nvfp4(xm, tiles, spec.stochastic);
    auto back = [&](const at::Tensor& t) {
        auto r = pad ? t.narrow(-1, 0, k) : t;
        if (row_pad) r = r.narrow(0, 0, rows);
        return x.dim() == 0 ? r.reshape({}) : r.movedim(-1, spec.axis);
    };
    p.y = back(p.y);
    p.e = back(p.e);
    p.q = back(p.q).contiguous();
    return p;
}

/// The E8M0 code of a block whose max |x| is `amax`, FLOOR (mx()'s arithmetic on one block).
int mx_floor_code(float amax, int emax) {
    if (std::isnan(amax)) return 255;
    uint32_t bits;
    std::memcpy(&bits, &amax, sizeof bits);
    const int pow2 = int((bits >> 23) & 255u) - 127;
    return std::clamp(pow2 - emax, -127, 128) + 127;
}

/// Blocks of `block` along the last dimension of a contiguous FP32 CPU x [.., k] (the last block of
/// a row shorter when k is not a multiple: padding with zeros changes no amax): each block's max
/// |x|, in a [blocks, 1] tensor as at::amax of the padded [blocks, block] view gives it.
at::Tensor block_amax(const at::Tensor& x, int64_t block) {
    const int64_t k = x.size(-1), rows = x.numel() / k, nb = (k + block - 1) / block;
    auto amax = at::empty({rows * nb, 1}, x.options());
    fp8k::block_abs_max(x.const_data_ptr<float>(), rows, k, block, amax.data_ptr<float>());
    return amax;
}

/// fp8k::quantize_blocks on x [.., k] as block_amax lays out its blocks, into a new tensor.
at::Tensor blockwise_q(Fp8Element e, const at::Tensor& x, int64_t block, const float* mult, const float* div,
                       const float* deq, float fmax) {
    auto q = at::empty_like(x);
    const int64_t k = x.size(-1);
    fp8k::quantize_blocks(e, x.const_data_ptr<float>(), q.data_ptr<float>(), x.numel() / k, k, block, mult, div, deq,
                          fmax);
    return q;
}

/// mx(x, element, scaling).q for a contiguous FP32 CPU x [.., k] without padding: FLOOR codes from
/// the amax bits, RCEIL's through rceil_codes (ATen's log2, as torchao); the same bits.
at::Tensor mx_q(const at::Tensor& x, Fp8Element element, MxScaling scaling) {
    const float fmax = float(max_finite(element));
    const auto amax = block_amax(x, 32);
    const int64_t blocks = amax.numel();
    const auto blockwise = [&](const float* mult, const float* div, const float* deq) {
        return blockwise_q(element, x, 32, mult, div, deq, fmax);
    };
    if (scaling == MxScaling::Rceil) {
        const auto [biased, rcp] = rceil_codes(amax, fmax);
        const auto deq = mx_scale_values(biased).contiguous();
        return blockwise(rcp.contiguous().const_data_ptr<float>(), nullptr, deq.const_data_ptr<float>());
    }
    const int emax = element == Fp8Element::E5M2 ? 15 : 8;
    const float* a = amax.const_data_ptr<float>();
    std::vector<float> div(static_cast<size_t>(blocks)), deq(static_cast<size_t>(blocks));
    for (int64_t b = 0; b < blocks; ++b) {
        const int code = mx_floor_code(a[b], emax);
        const uint32_t bits = uint32_t(code) << 23;
        float scale;
        std::memcpy(&scale, &bits, sizeof scale);
        div[size_t(b)] = std::max(scale, std::ldexp(1.0f, -126));
        deq[size_t(b)] = code == 255 ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, code - 127);
    }
    return blockwise(nullptr, div.data(), deq.data());
}

/// nvfp4(x, tiles_2d, false).q for a contiguous FP32 CPU x [.., k] without padding (tiles: x [R, K],
/// a block's amax its 16 x 16 tile's); the per-block scales are the same FP32 operations.
at::Tensor nvfp4_q(const at::Tensor& x, bool tiles_2d) {
    const float t_amax = fp8k::abs_max(x.const_data_ptr<float>(), x.numel());
    const float pts = t_amax == 0.0f ? 1.0f : t_amax / 2688.0f;  // 448 * 6; ampscope: zeros stay zeros
    auto amax = block_amax(x, 16);
    if (tiles_2d)  // each block's amax: the max over the 16 rows of its tile
        fp8k::tile_max(amax.data_ptr<float>(), x.size(0), amax.numel() / std::max<int64_t>(x.size(0), 1), 16);
    const int64_t blocks = amax.numel();
    const float* a = amax.const_data_ptr<float>();
    std::vector<float> mult(static_cast<size_t>(blocks)), deq(static_cast<size_t>(blocks));
    const float inv_pts = (1.0f / pts) * 1.0f;
    for (int64_t b = 0; b < blocks; ++b) {
        const float v = a[b] / 6.0f / pts;  // block scale, then over the tensor's
        const float sbs = round_e4m3(std::isnan(v) ? v : std::min(std::max(v, 0.015625f), 448.0f));
        mult[size_t(b)] = inv_pts / sbs;
        deq[size_t(b)] = pts * sbs;
    }
    return blockwise_q(Fp8Element::E2M1, x, 16, mult.data(), nullptr, deq.data(), 6.0f);
}

/// The operand quantize-dequantized without statistics, on the CPU: the fused loops above, the
/// axis moved last where a scheme has one. Undefined where they do not apply (an operand on a
/// GPU, NVFP4's stochastic rounding, 2-D tiles of an operand that is not 2-D): blocked() then.
at::Tensor fused_q(const at::Tensor& x32, const QuantSpec& spec) {
    if (!x32.device().is_cpu() || (spec.scheme == Fp8Scheme::Nvfp4 && spec.stochastic)) return {};
    if (spec.scheme == Fp8Scheme::Tensorwise) return scaled_fp8_q(x32, spec);
    const bool tiles = spec.tiles_2d && spec.scheme == Fp8Scheme::Nvfp4;
    if (tiles && x32.dim() != 2) return {};
    const auto xm = (x32.dim() == 0 ? x32.reshape({1}) : x32).movedim(spec.axis, -1).contiguous();
    const auto q = spec.scheme == Fp8Scheme::Rowwise ? scaled_fp8_q(xm, spec)
                   : spec.scheme == Fp8Scheme::Mx    ? mx_q(xm, spec.element, spec.mx_scaling)
                                                     : nvfp4_q(xm, tiles);
    return x32.dim() == 0 ? q.reshape({}) : q.movedim(-1, spec.axis).contiguous();
}

int64_t count(const at::Tensor& mask) {
    return mask.sum().item<int64_t>();
}

void fill_stats(QuantStats& s, const at::Tensor& x, const Parts& p) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const auto fin = at::isfinite(x);
    s.numel = x.numel();
    s.nonfinite = s.numel - count(fin);
    const auto nz = fin & (x != 0);
    s.nonzero = count(nz);
    s.underflow = count(nz & (p.q == 0));
    const auto ae = at::abs(p.e);
    s.subnormal = count((ae > 0) & (ae < min_normal(s.element)) & at::isfinite(p.q));
    // saturated: the scaled magnitude rounds past the largest finite value (ties: E4M3's max 448
    // has an even mantissa and keeps 464; E5M2's 57344 and E2M1's 6 are odd, a tie rounds out)
    const auto ay = at::abs(p.y);
    const double b = s.element == Fp8Element::E4M3 ? 464.0 : s.element == Fp8Element::E5M2 ? 61440.0 : 7.0;
    // not flushed to zero as well (NVFP4's per-tensor scale of 0 scales every value to +-inf and
    // dequantizes it to 0: counted once, as underflow)
    s.saturated = count(fin & (s.element == Fp8Element::E4M3 ? ay > b : ay >= b) & (p.q != 0));
    s.nonfinite_out = count(fin & ~at::isfinite(p.q));
    s.amax = s.numel ? at::max(at::abs(x)).item<double>() : 0.0;
    const auto m = p.mult.to(at::kDouble).flatten();
    const auto mf = m.masked_select(at::isfinite(m));
    s.scales = m.numel();
    s.scale_min = mf.numel() ? mf.min().item<double>() : nan;
    s.scale_max = mf.numel() ? mf.max().item<double>() : nan;
    s.tensor_scale = p.tensor_scale;
    const auto both = fin & at::isfinite(p.q);
    const auto xd = x.to(at::kDouble).masked_select(both), qd = p.q.to(at::kDouble).masked_select(both);
    const double signal = (xd * xd).sum().item<double>(), noise = ((xd - qd) * (xd - qd)).sum().item<double>();
    s.signal = signal;
    s.noise = noise;
    s.sqnr_db = sqnr_of(s);
}

}  // namespace

double operand_amax(const at::Tensor& x) {
    const auto x32 = x.to(at::kFloat).contiguous();
    if (x32.numel() == 0) return 0.0;
    if (x32.device().is_cpu()) return fp8k::abs_max(x32.const_data_ptr<float>(), x32.numel());
    return at::max(at::abs(x32)).item<double>();
}

at::Tensor quantize_dequantize(const at::Tensor& x, const QuantSpec& spec_in, QuantStats* stats) {
    if (!at::isFloatingType(x.scalar_type())) throw std::invalid_argument("quantize: a floating-point operand");
    QuantSpec spec = spec_in;
    if (spec.scheme == Fp8Scheme::Nvfp4) spec.element = Fp8Element::E2M1;
    if (spec.element == Fp8Element::E2M1 && spec.scheme != Fp8Scheme::Nvfp4)
        throw std::invalid_argument("quantize: e2m1 elements only with nvfp4");
    if (x.dim() > 0)
        spec.axis = c10::maybe_wrap_dim(spec.axis, x.dim());
    else
        spec.axis = 0;
    const auto x32 = x.to(at::kFloat).contiguous();
    if (x32.numel() == 0) {
        if (stats) *stats = QuantStats{spec.scheme, spec.element};
        return x32.clone();
    }
    if (!stats)
        if (auto q = fused_q(x32, spec); q.defined()) return q;
    const bool scaled = spec.scheme == Fp8Scheme::Tensorwise || spec.scheme == Fp8Scheme::Rowwise;
    const Parts p = scaled ? scaled_fp8(x32, spec) : blocked(x32, spec);
    if (stats) {
        *stats = QuantStats{};
        stats->scheme = spec.scheme;
        stats->element = spec.element;
        fill_stats(*stats, x32, p);
    }
    return p.q;
}

std::pair<at::Tensor, at::Tensor> to_fp8(const at::Tensor& x, const QuantSpec& spec_in) {
    if (x.dim() != 2 || !at::isFloatingType(x.scalar_type()))
        throw std::invalid_argument("to_fp8: a 2-D floating-point operand [rows, K]");
    if (spec_in.scheme != Fp8Scheme::Tensorwise && spec_in.scheme != Fp8Scheme::Rowwise)
        throw std::invalid_argument("to_fp8: tensorwise or rowwise scales");
    QuantSpec spec = spec_in;
    spec.axis = 1;
    const Parts p = scaled_fp8(x.to(at::kFloat).contiguous(), spec);
    return {p.e.to(dtype_of(spec.element)), p.mult};  // the elements are the format's values: exact
}

}  // namespace ampscope::detail
