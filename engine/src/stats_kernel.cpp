// SPDX-License-Identifier: MIT
#include "stats_kernel.h"

#include <algorithm>
#include <cstring>

namespace ampscope::detail {

namespace {
constexpr uint32_t kExpMask = 0x7f800000u;
constexpr uint32_t kFp16MaxBits = 0x477fe000u;        // 65504
constexpr uint32_t kFp16MinNormalBits = 0x38800000u;  // 2^-14
constexpr uint32_t kFp16MinSubBits = 0x33800000u;     // 2^-24
constexpr uint32_t kBf16MaxBits = 0x7f7f0000u;        // 3.3895e38
constexpr uint32_t kBf16MinNormalBits = 0x00800000u;  // 2^-126
constexpr uint32_t kBf16MinSubBits = 0x00010000u;     // 2^-133

/// Monotone map float bits -> unsigned key (negative values reversed).
inline uint32_t key_of(uint32_t b) { return (b & 0x80000000u) ? ~b : (b | 0x80000000u); }
inline uint32_t bits_of_key(uint32_t k) { return (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k; }
inline float as_float(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}
}  // namespace

float KernelAcc::min() const { return as_float(bits_of_key(min_key)); }
float KernelAcc::max() const { return as_float(bits_of_key(max_key)); }

void KernelAcc::add(const KernelAcc& o) {
    count += o.count; nan += o.nan; posinf += o.posinf; neginf += o.neginf; zeros += o.zeros;
    h_over += o.h_over; h_sub += o.h_sub; h_under += o.h_under; b_over += o.b_over; b_sub += o.b_sub; b_under += o.b_under;
    min_key = std::min(min_key, o.min_key);
    max_key = std::max(max_key, o.max_key);
    amax_bits = std::max(amax_bits, o.amax_bits);
    minnz_bits = std::min(minnz_bits, o.minnz_bits);
    sum += o.sum;
    sumsq += o.sumsq;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define AMPSCOPE_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define AMPSCOPE_CLONES
#endif

AMPSCOPE_CLONES
void half_to_float(const uint16_t* h, float* out, int n) {
    // exponent/mantissa shifted into float position, rescaled by 2^112 (exact: this also
    // normalises half subnormals); inf/NaN get the float all-ones exponent back.
    for (int i = 0; i < n; ++i) {
        const uint32_t x = h[i];
        const uint32_t em = (x & 0x7fffu) << 13;
        float f;
        std::memcpy(&f, &em, 4);
        f *= 0x1p112f;
        uint32_t r;
        std::memcpy(&r, &f, 4);
        r |= em >= (0x7c00u << 13) ? 0x7f800000u : 0u;
        r |= (x & 0x8000u) << 16;
        std::memcpy(out + i, &r, 4);
    }
}

AMPSCOPE_CLONES
void bf16_to_float(const uint16_t* h, float* out, int n) {
    for (int i = 0; i < n; ++i) {
        const uint32_t r = uint32_t(h[i]) << 16;
        std::memcpy(out + i, &r, 4);
    }
}

AMPSCOPE_CLONES
void stats_block(const float* v, int n, KernelAcc& a) {
    // Three simple loops over the same block (it stays in L1): each vectorises on its own,
    // where one loop with fourteen reductions does not.
    const uint32_t* bits = reinterpret_cast<const uint32_t*>(v);
    int nan = 0, pinf = 0, ninf = 0, zeros = 0, ho = 0, hs = 0, hu = 0, bo = 0, bs = 0, bu = 0;
    for (int i = 0; i < n; ++i) {
        const uint32_t b = bits[i];
        const uint32_t ab = b & 0x7fffffffu;
        const int fin = ab < kExpMask;
        const int nz = fin & (ab != 0);
        const int isinf = ab == kExpMask;
        nan += ab > kExpMask;
        ninf += isinf & int(b >> 31);
        pinf += isinf;
        zeros += ab == 0;
        ho += fin & (ab > kFp16MaxBits);
        hs += nz & (ab < kFp16MinNormalBits);
        hu += nz & (ab < kFp16MinSubBits);
        bo += fin & (ab > kBf16MaxBits);
        bs += nz & (ab < kBf16MinNormalBits);
        bu += nz & (ab < kBf16MinSubBits);
    }
    pinf -= ninf;
    // Masks instead of conditions so that the loop vectorises (vpminud/vpmaxud).
    uint32_t mnk = 0xffffffffu, mxk = 0, amax = 0, minnz_m1 = kExpMask - 1u;
    for (int i = 0; i < n; ++i) {
        const uint32_t b = bits[i];
        const uint32_t ab = b & 0x7fffffffu;
        const uint32_t fin = ab < kExpMask ? 0xffffffffu : 0u;
        const uint32_t k = b ^ (uint32_t(int32_t(b) >> 31) | 0x80000000u);  // order-preserving key
        mnk = std::min(mnk, k | ~fin);
        mxk = std::max(mxk, k & fin);
        amax = std::max(amax, ab & fin);
        minnz_m1 = std::min(minnz_m1, (ab - 1u) | ~fin);  // zero wraps to 0xffffffff: never the minimum
    }
    const uint32_t minnz = minnz_m1 + 1u;
    double sum = 0, sumsq = 0;
    for (int i = 0; i < n; ++i) {
        const double x = (bits[i] & 0x7fffffffu) < kExpMask ? double(v[i]) : 0.0;
        sum += x;
        sumsq += x * x;
    }
    a.count += n; a.nan += nan; a.posinf += pinf; a.neginf += ninf; a.zeros += zeros;
    a.h_over += ho; a.h_sub += hs; a.h_under += hu; a.b_over += bo; a.b_sub += bs; a.b_under += bu;
    a.min_key = std::min(a.min_key, mnk);
    a.max_key = std::max(a.max_key, mxk);
    a.amax_bits = std::max(a.amax_bits, amax);
    a.minnz_bits = std::min(a.minnz_bits, minnz);
    a.sum += sum;
    a.sumsq += sumsq;
}

}  // namespace ampscope::detail
