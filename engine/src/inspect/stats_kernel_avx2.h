// SPDX-License-Identifier: MIT
#pragma once
// The CPU statistics kernel's AVX2/FMA/F16C fast path, the pieces both of its units use
// (stats_kernel_avx2.cpp: FP32 blocks; stats_kernel_avx2_16.cpp: FP16 and BF16 blocks): lane
// reductions, the magnitude range on the bit patterns, the float moments and their masked form.
// Only those two units include it; they are compiled with the same flags as stats_kernel.cpp
// (engine/CMakeLists.txt). AMPSCOPE_AVX2_PATH is defined where the fast path is built (x86-64,
// GCC or Clang, not under ASan); elsewhere the units define the plain fallbacks.
#include <algorithm>
#include <cstring>
#include <iterator>

#include "inspect/stats_kernel_bits.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#include <immintrin.h>
#define AMPSCOPE_AVX2_PATH 1
#define AMPSCOPE_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace ampscope::detail::kernel {

/// The lanes of a 256-bit vector, reduced on the host side (once per block: not hot).
template <class T, class V>
AMPSCOPE_AVX2 inline T lane_min(V v) {
    T t[sizeof(V) / sizeof(T)];
    std::memcpy(t, &v, sizeof v);
    return *std::min_element(std::begin(t), std::end(t));
}
template <class T, class V>
AMPSCOPE_AVX2 inline T lane_max(V v) {
    T t[sizeof(V) / sizeof(T)];
    std::memcpy(t, &v, sizeof v);
    return *std::max_element(std::begin(t), std::end(t));
}
AMPSCOPE_AVX2 inline double hsum_ps(__m256 v) {
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    double s = 0;
    for (float x : t) s += double(x);
    return s;
}

/// The float pass of the fast path over n (a multiple of 32) finite floats obtained by load(i),
/// which yields the 8 floats at i.
/// The float pass also prefetches the next block (pf, elements of kElemBytes bytes): memory is
/// otherwise idle while this pass works from L1.
template <int kElemBytes, class Load>
AMPSCOPE_AVX2 inline void moments(int n, Load load, const char* pf, KernelAcc& a) {
    __m256 mn = _mm256_set1_ps(__builtin_inff()), mx = _mm256_set1_ps(-__builtin_inff());
    double sum = 0, sumsq = 0;
    for (int c = 0; c < n; c += kChunk) {
        const int end = std::min(n, c + kChunk);
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
        for (int i = c; i < end; i += 32) {
            for (int l = 0; l < 32 * kElemBytes; l += 64) _mm_prefetch(pf + i * kElemBytes + l, _MM_HINT_T0);
            const __m256 x0 = load(i), x1 = load(i + 8), x2 = load(i + 16), x3 = load(i + 24);
            mn = _mm256_min_ps(_mm256_min_ps(mn, x0), _mm256_min_ps(x1, _mm256_min_ps(x2, x3)));
            mx = _mm256_max_ps(_mm256_max_ps(mx, x0), _mm256_max_ps(x1, _mm256_max_ps(x2, x3)));
            s0 = _mm256_add_ps(s0, x0);
            s1 = _mm256_add_ps(s1, x1);
            s2 = _mm256_add_ps(s2, x2);
            s3 = _mm256_add_ps(s3, x3);
            q0 = _mm256_fmadd_ps(x0, x0, q0);
            q1 = _mm256_fmadd_ps(x1, x1, q1);
            q2 = _mm256_fmadd_ps(x2, x2, q2);
            q3 = _mm256_fmadd_ps(x3, x3, q3);
        }
        // Lanes summed in double: each lane holds at most kChunk/32 elements.
        sum += hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
        sumsq += hsum_ps(_mm256_add_ps(_mm256_add_ps(q0, q1), _mm256_add_ps(q2, q3)));
    }
    a.sum += sum;
    a.sumsq += sumsq;
    a.min_key = std::min(a.min_key, key_of(bits_of(lane_min<float>(mn))));
    a.max_key = std::max(a.max_key, key_of(bits_of(lane_max<float>(mx))));
    a.count += n;
}

/// Unsigned lane minimum / maximum of 16-bit (k16) or 32-bit lanes.
template <bool k16>
AMPSCOPE_AVX2 inline __m256i min_u(__m256i a, __m256i b) {
    return k16 ? _mm256_min_epu16(a, b) : _mm256_min_epu32(a, b);
}
template <bool k16>
AMPSCOPE_AVX2 inline __m256i max_u(__m256i a, __m256i b) {
    return k16 ? _mm256_max_epu16(a, b) : _mm256_max_epu32(a, b);
}

/// Magnitude range of n (a multiple of 32) 32-bit or 16-bit patterns: one load stream with four
/// independent accumulator pairs, so that many cache lines are in flight.
template <bool k16>
AMPSCOPE_AVX2 inline void magnitude_range(const void* p, int n, __m256i& lo, __m256i& hi) {
    const __m256i* v = static_cast<const __m256i*>(p);
    const __m256i mask = k16 ? _mm256_set1_epi16(0x7fff) : _mm256_set1_epi32(0x7fffffff);
    __m256i l0 = _mm256_set1_epi32(-1), l1 = l0, h0 = _mm256_setzero_si256(), h1 = h0;
    const int vecs = n / (k16 ? 16 : 8);
    int i = 0;
    for (; i + 2 <= vecs; i += 2) {
        const __m256i a0 = _mm256_and_si256(_mm256_loadu_si256(v + i), mask);
        const __m256i a1 = _mm256_and_si256(_mm256_loadu_si256(v + i + 1), mask);
        l0 = min_u<k16>(l0, a0);
        h0 = max_u<k16>(h0, a0);
        l1 = min_u<k16>(l1, a1);
        h1 = max_u<k16>(h1, a1);
    }
    for (; i < vecs; ++i) {
        const __m256i a0 = _mm256_and_si256(_mm256_loadu_si256(v + i), mask);
        l0 = min_u<k16>(l0, a0);
        h0 = max_u<k16>(h0, a0);
    }
    lo = min_u<k16>(l0, l1);
    hi = max_u<k16>(h0, h1);
}

AMPSCOPE_AVX2 inline int64_t total(__m256i x) {
    alignas(32) int32_t t[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), x);
    int64_t s = 0;
    for (int32_t y : t) s += y;
    return s;
}

/// The sum of 16 unsigned 16-bit lane counters.
AMPSCOPE_AVX2 inline int64_t total16(__m256i x) {
    alignas(32) uint16_t t[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), x);
    int64_t s = 0;
    for (uint16_t y : t) s += y;
    return s;
}

/// The float pass for a block with NaN or Inf or magnitudes above 2^56 (n a multiple of 32; the 8
/// floats at i come from load(i)): NaN and Inf are left out of min, max and the sums by masks;
/// finite values above 2^56 (a causal mask's finfo.min) are summed in lanes of their own scaled
/// by 2^-96 (exact: a power of two; their squares stay within (2^-80, 2^64)), scaled back in
/// double, so every part keeps the fast path's relative error. Returns false, adding nothing,
/// when the finite values are all below 2^-60 (the caller then takes the exact path); the
/// caller adds the counters.
template <bool kFinite = false, class Load>
AMPSCOPE_AVX2 bool moments_masked(int n, Load load, KernelAcc& a) {
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff), maxfin = _mm256_set1_epi32(0x7f7fffff);
    const __m256i hugeb = _mm256_set1_epi32(int32_t(kFastHiBits));
    const __m256 pinf = _mm256_set1_ps(__builtin_inff()), ninf = _mm256_set1_ps(-__builtin_inff());
    const __m256 down = _mm256_set1_ps(0x1p-96f);
    __m256 mn = pinf, mx = ninf;
    double sum = 0, sumsq = 0, hsum = 0, hsumsq = 0;
    for (int c = 0; c < n; c += kChunk) {
        const int end = std::min(n, c + kChunk);
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, q0 = s0, q1 = s0, t0 = s0, t1 = s0, r0 = s0, r1 = s0;
        for (int i = c; i < end; i += 16) {
            const __m256 x0 = load(i), x1 = load(i + 8);
            const __m256i a0 = _mm256_and_si256(_mm256_castps_si256(x0), absmask);
            const __m256i a1 = _mm256_and_si256(_mm256_castps_si256(x1), absmask);
            // kFinite: no NaN/Inf to mask (a finite block with a causal mask's fill value)
            const __m256 n0 = kFinite ? _mm256_setzero_ps() : _mm256_castsi256_ps(_mm256_cmpgt_epi32(a0, maxfin));
            const __m256 n1 = kFinite ? _mm256_setzero_ps() : _mm256_castsi256_ps(_mm256_cmpgt_epi32(a1, maxfin));
            const __m256 b0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(a0, hugeb));  // huge or non-finite
            const __m256 b1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(a1, hugeb));
            if constexpr (kFinite) {
                mn = _mm256_min_ps(mn, _mm256_min_ps(x0, x1));
                mx = _mm256_max_ps(mx, _mm256_max_ps(x0, x1));
            } else {
                mn = _mm256_min_ps(mn, _mm256_min_ps(_mm256_blendv_ps(x0, pinf, n0), _mm256_blendv_ps(x1, pinf, n1)));
                mx = _mm256_max_ps(mx, _mm256_max_ps(_mm256_blendv_ps(x0, ninf, n0), _mm256_blendv_ps(x1, ninf, n1)));
            }
            const __m256 z0 = _mm256_andnot_ps(b0, x0), z1 = _mm256_andnot_ps(b1, x1);
            s0 = _mm256_add_ps(s0, z0);
            s1 = _mm256_add_ps(s1, z1);
            q0 = _mm256_fmadd_ps(z0, z0, q0);
            q1 = _mm256_fmadd_ps(z1, z1, q1);
            const __m256 h0 = _mm256_mul_ps(_mm256_and_ps(_mm256_andnot_ps(n0, b0), x0), down);
            const __m256 h1 = _mm256_mul_ps(_mm256_and_ps(_mm256_andnot_ps(n1, b1), x1), down);
            t0 = _mm256_add_ps(t0, h0);
            t1 = _mm256_add_ps(t1, h1);
            r0 = _mm256_fmadd_ps(h0, h0, r0);
            r1 = _mm256_fmadd_ps(h1, h1, r1);
        }
        sum += hsum_ps(_mm256_add_ps(s0, s1));
        sumsq += hsum_ps(_mm256_add_ps(q0, q1));
        hsum += hsum_ps(_mm256_add_ps(t0, t1));
        hsumsq += hsum_ps(_mm256_add_ps(r0, r1));
    }
    const float lo = lane_min<float>(mn), hi = lane_max<float>(mx);
    if (lo <= hi) {  // some finite value
        const uint32_t amax = std::max(bits_of(lo) & 0x7fffffffu, bits_of(hi) & 0x7fffffffu);
        if (amax < kFastLoBits) return false;
        a.sum += sum + hsum * 0x1p96;
        a.sumsq += sumsq + hsumsq * 0x1p192;
        a.min_key = std::min(a.min_key, key_of(bits_of(lo)));
        a.max_key = std::max(a.max_key, key_of(bits_of(hi)));
        a.amax_bits = std::max(a.amax_bits, amax);
    }
    a.count += n;
    return true;
}

}  // namespace ampscope::detail::kernel

#endif
