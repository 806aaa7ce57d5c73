// SPDX-License-Identifier: MIT
// The quantize-dequantize loops of a simulated pass (fp8_kernels.h) and the element roundings
// (fp8.h): bit arithmetic on FP32, branch-free where a loop runs it.
#include "precision/fp8_kernels.h"

#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "precision/fp8.h"

namespace ampscope::detail {

namespace {

/// `c` (|c| <= the format's largest finite value, not NaN) rounded to nearest even with `Mbits`
/// mantissa bits, normals from `min_normal`, subnormals a multiple of min_normal / 2^Mbits:
/// above it by rounding the FP32 mantissa, below it by adding and taking away a number whose ulp
/// is that multiple. Without branches, so that a loop of it vectorizes.
template <int Mbits>
inline float round_finite(float c, float min_normal) {
    constexpr int kShift = 23 - Mbits;
    const float a = std::fabs(c);
    const float magic = min_normal * float(1 << kShift);  // its ulp: the subnormal step
    const float sub = (a + magic) - magic;
    uint32_t b;
    std::memcpy(&b, &a, sizeof b);
    b = (b + ((1u << (kShift - 1)) - 1) + ((b >> kShift) & 1u)) & ~((1u << kShift) - 1);
    float normal;
    std::memcpy(&normal, &b, sizeof normal);
    return std::copysign(a < min_normal ? sub : normal, c);
}

constexpr float kE4m3MinNormal = 0.015625f;         // 2^-6
constexpr float kE5m2MinNormal = 6.103515625e-05f;  // 2^-14

}  // namespace

float round_e4m3(float c) {
    if (std::isnan(c)) return static_cast<float>(c10::Float8_e4m3fn(c));  // the format's NaN, as a cast gives it
    return round_finite<3>(c, kE4m3MinNormal);
}

float round_e5m2(float c) {
    if (std::isnan(c)) return static_cast<float>(c10::Float8_e5m2(c));
    return round_finite<2>(c, kE5m2MinNormal);
}

float round_e2m1(float v) {
    const float a = std::fabs(v);
    // torchao's f32_to_f4_unpacked takes NaN as 1.5 (its sign kept): a finite x scaled by a per-tensor
    // scale of 0 (0 * inf) dequantizes to +-1.5 * 0, as there; a NaN operand's NaN scales keep it NaN
    if (std::isnan(a)) return std::signbit(v) ? -1.5f : 1.5f;
    if (a >= 6.0f) return std::copysign(6.0f, v);
    return round_finite<1>(v, 1.0f);  // subnormal step 0.5; normals 1, 1.5, 2, 3, 4, 6
}

namespace fp8k {
namespace {

/// Work of about this many elements per chunk; an operand of one chunk runs on the calling thread.
constexpr int64_t kGrain = int64_t(1) << 15;

/// f(i0, i1) over [0, count) in chunks of about kGrain elements (`per_item` elements an item),
/// across the OpenMP threads LibTorch uses when there are several chunks.
template <class F>
void for_chunks(int64_t count, int64_t per_item, const F& f) {
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(per_item, 1));
    const int64_t chunks = (count + grain - 1) / grain;
    if (chunks <= 1) {
        f(int64_t(0), count);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int64_t c = 0; c < chunks; ++c) f(c * grain, std::min(count, (c + 1) * grain));
}

float nan_max(float a, float b) {
    return std::isnan(a) ? a : std::isnan(b) ? b : std::max(a, b);
}

/// abs_max of one stretch as a maximum of integers, which vectorizes: without its sign an FP32's
/// bits order as its magnitude does, and any NaN's lie above infinity's.
float abs_max_serial(const float* x, int64_t n) {
    int32_t m = 0;
    for (int64_t i = 0; i < n; ++i) {
        int32_t b;
        std::memcpy(&b, &x[i], sizeof b);
        b &= 0x7FFFFFFF;
        m = b > m ? b : m;
    }
    if (m > 0x7F800000) return std::numeric_limits<float>::quiet_NaN();
    float r;
    std::memcpy(&r, &m, sizeof r);
    return r;
}

/// An element format's rounding of a scaled value y: the branch-free one (NaN undefined) and the
/// exact one (NaN as the cast keeps it), both after the clamp to +-fmax.
template <int Mbits>
struct Fast {
    float fmax, min_normal;
    float operator()(float y) const { return round_finite<Mbits>(std::min(std::max(y, -fmax), fmax), min_normal); }
};
struct Exact {
    float (*round)(float);
    float fmax;
    float operator()(float y) const { return round(std::isnan(y) ? y : std::min(std::max(y, -fmax), fmax)); }
};

/// Runs body(element, nan) with the fast element, then again with the exact one where a scaled
/// value was NaN.
template <class Body>
void with_element(Fp8Element e, float fmax, const Body& body) {
    bool nan = false;
    switch (e) {
        case Fp8Element::E5M2:
            body(Fast<2>{fmax, kE5m2MinNormal}, nan);
            if (nan) body(Exact{round_e5m2, fmax}, nan);
            break;
        case Fp8Element::E2M1:
            body(Fast<1>{6.0f, 1.0f}, nan);
            if (nan) body(Exact{round_e2m1, 6.0f}, nan);
            break;
        default:
            body(Fast<3>{fmax, kE4m3MinNormal}, nan);
            if (nan) body(Exact{round_e4m3, fmax}, nan);
    }
}

/// q = element(x * s) / s over n floats.
template <class Element>
void scaled_stretch(const Element& element, const float* x, float* q, int64_t n, float s, bool& nan) {
    int any = 0;
    for (int64_t i = 0; i < n; ++i) {
        const float y = x[i] * s;
        any |= y != y;
        q[i] = element(y) / s;
    }
    nan = nan || any != 0;
}

/// q = element(x / d or x * m) * s over one block.
template <class Element>
void block_stretch(const Element& element, const float* x, float* q, int64_t n, const float* div, float m, float s,
                   bool& nan) {
    int any = 0;
    if (div) {
        const float d = *div;
        for (int64_t i = 0; i < n; ++i) {
            const float y = x[i] / d;
            any |= y != y;
            q[i] = element(y) * s;
        }
    } else {
        for (int64_t i = 0; i < n; ++i) {
            const float y = x[i] * m;
            any |= y != y;
            q[i] = element(y) * s;
        }
    }
    nan = nan || any != 0;
}

}  // namespace

float abs_max(const float* x, int64_t n) {
    const int64_t chunks = (n + kGrain - 1) / kGrain;
    if (chunks <= 1) return abs_max_serial(x, n);
    std::vector<float> part(static_cast<size_t>(chunks));
    for_chunks(chunks, kGrain, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c)
            part[size_t(c)] = abs_max_serial(x + c * kGrain, std::min(kGrain, n - c * kGrain));
    });
    float m = 0.0f;
    for (const float p : part) m = nan_max(m, p);
    return m;
}

void block_abs_max(const float* x, int64_t rows, int64_t k, int64_t block, float* out) {
    const int64_t nb = (k + block - 1) / block;
    for_chunks(rows, k, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
            for (int64_t j = 0; j < nb; ++j)
                out[r * nb + j] = abs_max_serial(x + r * k + j * block, std::min(block, k - j * block));
    });
}

void tile_max(float* amax, int64_t rows, int64_t nb, int64_t tile) {
    for (int64_t r0 = 0; r0 < rows; r0 += tile)
        for (int64_t j = 0; j < nb; ++j) {
            const int64_t r1 = std::min(rows, r0 + tile);
            float m = 0.0f;
            for (int64_t i = r0; i < r1; ++i) m = nan_max(m, amax[i * nb + j]);
            for (int64_t i = r0; i < r1; ++i) amax[i * nb + j] = m;
        }
}

void quantize_scaled(Fp8Element e, const float* x, float* q, int64_t n, float s, float fmax) {
    for_chunks(n, 1, [&](int64_t i0, int64_t i1) {
        with_element(e, fmax,
                     [&](const auto& element, bool& nan) { scaled_stretch(element, x + i0, q + i0, i1 - i0, s, nan); });
    });
}

void quantize_rows(Fp8Element e, const float* x, float* q, int64_t rows, int64_t k, const float* scales, float fmax) {
    for_chunks(rows, k, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
            with_element(e, fmax, [&](const auto& element, bool& nan) {
                scaled_stretch(element, x + r * k, q + r * k, k, scales[r], nan);
            });
    });
}

void quantize_blocks(Fp8Element e, const float* x, float* q, int64_t rows, int64_t k, int64_t block, const float* mult,
                     const float* div, const float* deq, float fmax) {
    const int64_t nb = (k + block - 1) / block;
    for_chunks(rows, k, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
            with_element(e, fmax, [&](const auto& element, bool& nan) {
                for (int64_t j = 0; j < nb; ++j) {
                    const int64_t b = r * nb + j, off = r * k + j * block;
                    block_stretch(element, x + off, q + off, std::min(block, k - j * block), div ? div + b : nullptr,
                                  mult ? mult[b] : 0.0f, deq[b], nan);
                }
            });
    });
}

}  // namespace fp8k
}  // namespace ampscope::detail
