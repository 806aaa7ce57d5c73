// SPDX-License-Identifier: MIT
// The CPU statistics kernel's AVX2/FMA/F16C fast path for FP32 blocks: the magnitude range on the
// bit patterns, then min, max and sums in float lanes (stats_kernel.h); the FP16 and BF16 blocks
// are in stats_kernel_avx2_16.cpp, what both use in stats_kernel_avx2.h.
#include "inspect/stats_kernel_avx2.h"

namespace ampscope::detail::kernel {

#ifdef AMPSCOPE_AVX2_PATH

bool cpu_has_avx2() {
    static const bool ok =
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    return ok;
}

/// Every counter and the smallest non-zero finite magnitude of n (a multiple of 8) values, by
/// threshold counts on the magnitude bits: each class is a difference of two of them. kFinite:
/// the values are finite and no larger than FP16's largest (the common float block), so the
/// non-finite and overflow compares are left out. kLow false: the block's smallest magnitude,
/// minab, is within FP16's normal range, so zeros and every counter below it are zero and the
/// smallest non-zero magnitude is minab (when finite): only the upper counters are counted.
template <bool kFinite, bool kLow = true>
AMPSCOPE_AVX2 void counts32(const float* v, int n, uint32_t minab, KernelAcc& a) {
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
#define c(x) _mm256_set1_epi32(int32_t(x))
    const __m256i t_fin = c(kExpMask - 1u), t_inf = c(kExpMask), t_ninf = c(0xff800000u), zero = _mm256_setzero_si256();
    const __m256i t_ho = c(kFp16MaxBits), t_bo = c(kBf16MaxBits), t_hs = c(kFp16MinNormalBits),
                  t_hu = c(kFp16MinSubBits);
    const __m256i t_bs = c(kBf16MinNormalBits), t_bu = c(kBf16MinSubBits), one = c(1u);
#undef c
    __m256i nonfin = zero, nan = zero, ninf = zero, zeros = zero, gh = zero, gb = zero, lhs = zero, lhu = zero,
            lbs = zero, lbu = zero;
    __m256i minnz = _mm256_set1_epi32(-1);
    for (int i = 0; i < n; i += 8) {
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i));
        const __m256i ab = _mm256_and_si256(b, absmask);
        __m256i nf = zero;  // masks are -1: subtracting counts
        if constexpr (!kFinite) {
            nf = _mm256_cmpgt_epi32(ab, t_fin);
            nonfin = _mm256_sub_epi32(nonfin, nf);
            nan = _mm256_sub_epi32(nan, _mm256_cmpgt_epi32(ab, t_inf));
            ninf = _mm256_sub_epi32(ninf, _mm256_cmpeq_epi32(b, t_ninf));
            gh = _mm256_sub_epi32(gh, _mm256_cmpgt_epi32(ab, t_ho));
            gb = _mm256_sub_epi32(gb, _mm256_cmpgt_epi32(ab, t_bo));
        }
        if constexpr (kLow) {
            zeros = _mm256_sub_epi32(zeros, _mm256_cmpeq_epi32(ab, zero));
            lhs = _mm256_sub_epi32(lhs, _mm256_cmpgt_epi32(t_hs, ab));
            lhu = _mm256_sub_epi32(lhu, _mm256_cmpgt_epi32(t_hu, ab));
            lbs = _mm256_sub_epi32(lbs, _mm256_cmpgt_epi32(t_bs, ab));
            lbu = _mm256_sub_epi32(lbu, _mm256_cmpgt_epi32(t_bu, ab));
            // zero wraps to 0xffffffff and non-finite is forced there: never the minimum
            minnz = _mm256_min_epu32(minnz, _mm256_or_si256(_mm256_sub_epi32(ab, one), nf));
        }
    }
    if constexpr (!kFinite) {
        const int64_t nf = total(nonfin), na = total(nan), ni = total(ninf);
        a.nan += na;
        a.posinf += nf - na - ni;
        a.neginf += ni;
        a.h_over += total(gh) - nf;
        a.b_over += total(gb) - nf;
    }
    if constexpr (!kLow) {
        if (minab < kExpMask) a.minnz_bits = std::min(a.minnz_bits, minab);  // finite, and not zero
        return;
    }
    const int64_t z = total(zeros);
    a.zeros += z;
    a.h_sub += total(lhs) - z;
    a.h_under += total(lhu) - z;
    a.b_sub += total(lbs) - z;
    a.b_under += total(lbu) - z;
    // No finite non-zero value (every lane still 0xffffffff): nothing to take, else the +1
    // wraps to 0 and the block reports a smallest non-zero magnitude of 0.
    if (const uint32_t mn = lane_min<uint32_t>(minnz); mn != 0xffffffffu)
        a.minnz_bits = std::min(a.minnz_bits, mn + 1u);
}

/// One block of at most kBlock floats.
AMPSCOPE_AVX2 void f32_block(const float* v, int n, KernelAcc& a) {
    const int m = n & ~31;
    const auto ld = [v](int i) AMPSCOPE_AVX2 { return _mm256_loadu_ps(v + i); };
    if (m > 0) {
        __m256i lo, hi;
        magnitude_range<false>(v, m, lo, hi);
        const uint32_t minab = lane_min<uint32_t>(lo), maxab = lane_max<uint32_t>(hi);
        if (maxab >= kFastLoBits && maxab <= kFastHiBits) {
            moments<4>(
                m, [v](int i) AMPSCOPE_AVX2 { return _mm256_loadu_ps(v + i); },
                reinterpret_cast<const char*>(v + kBlock), a);
            a.amax_bits = std::max(a.amax_bits, maxab);
            // No value outside FP16's normal range: every range counter is zero.
            if (minab >= kFp16MinNormalBits && maxab <= kFp16MaxBits)
                a.minnz_bits = std::min(a.minnz_bits, minab);
            else
                (maxab <= kFp16MaxBits ? counts32<true> : counts32<false>)(v, m, minab, a);  // finite
        } else if (minab > kExpMask) {
            a.count += m;  // every value NaN: nothing else to count
            a.nan += m;
        } else if (maxab < kExpMask ? moments_masked<true>(m, ld, a) : moments_masked<false>(m, ld, a)) {
            (minab < kFp16MinNormalBits ? counts32<false, true> : counts32<false, false>)(v, m, minab, a);
        } else {
            stats_block(v, m, a);
        }
    }
    if (n > m) stats_block(v + m, n - m, a);
}

#else
bool cpu_has_avx2() {
    return false;
}
void f32_block(const float*, int, KernelAcc&) {}
#endif

}  // namespace ampscope::detail::kernel
