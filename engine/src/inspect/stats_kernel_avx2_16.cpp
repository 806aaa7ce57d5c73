// SPDX-License-Identifier: MIT
// The CPU statistics kernel's AVX2/FMA/F16C fast path for FP16 and BF16 blocks: the magnitude
// range on the 16-bit patterns, values widened in registers for the float pass, masked blocks
// (NaN/Inf, a causal mask's fill value) without a widened copy (stats_kernel.h; shared pieces in
// stats_kernel_avx2.h).
#include "inspect/stats_kernel_avx2.h"

namespace ampscope::detail::kernel {

#ifdef AMPSCOPE_AVX2_PATH

/// Range counters of n (a multiple of 16) finite halves, on their bit patterns: a half can only
/// be zero or FP16-subnormal (never FP16/BF16 overflow, BF16 subnormal, or below FP16's range).
AMPSCOPE_AVX2 void half_counts(const uint16_t* h, int n, KernelAcc& a) {
    const __m256i mask = _mm256_set1_epi16(0x7fff), zero = _mm256_setzero_si256();
    const __m256i t_norm = _mm256_set1_epi16(0x0400), one = _mm256_set1_epi16(1);
    __m256i zeros = zero, below = zero, minnz = _mm256_set1_epi16(-1);  // 16-bit lanes: n <= 4096
    for (int i = 0; i < n; i += 16) {
        const __m256i ab = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)), mask);
        zeros = _mm256_sub_epi16(zeros, _mm256_cmpeq_epi16(ab, zero));
        below = _mm256_sub_epi16(below, _mm256_cmpgt_epi16(t_norm, ab));
        minnz = _mm256_min_epu16(minnz, _mm256_sub_epi16(ab, one));  // zero wraps to 0xffff
    }
    const int64_t nz = total16(zeros);
    a.zeros += nz;
    a.h_sub += total16(below) - nz;
    const uint16_t mn = lane_min<uint16_t>(minnz);
    if (mn != 0xffffu) {
        const uint16_t bits = uint16_t(mn + 1u);
        float f;
        half_to_float(&bits, &f, 1);
        a.minnz_bits = std::min(a.minnz_bits, bits_of(f));
    }
}

/// IEEE half: every finite half is within the fast range; its range counters are zeros and
/// FP16 subnormals only, counted on the bit patterns.
struct Half16 {
    static constexpr uint16_t kInfBits = 0x7c00u;
    static void widen(const uint16_t* h, float* out, int n) { half_to_float(h, out, n); }
    AMPSCOPE_AVX2 static __m256 load(const uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static bool fast(uint16_t maxab) { return maxab < 0x7c00u && maxab != 0; }
    /// What masked16 needs: no finite half is above 2^56 or above FP16's range; a half below
    /// 0x0400 is zero or FP16-subnormal, never FP16-underflow or BF16-subnormal.
    static constexpr bool kHuge = false;
    static constexpr uint16_t kLowBits = 0x0400u;
    AMPSCOPE_AVX2 static void load16(const uint16_t* p, __m256& x0, __m256& x1) {
        x0 = load(p);
        x1 = load(p + 8);
    }
    static uint32_t float_bits(uint16_t bits) {
        float f;
        half_to_float(&bits, &f, 1);
        return bits_of(f);
    }
    AMPSCOPE_AVX2 static void range(const uint16_t* h, int m, uint16_t minab, uint16_t, float*, KernelAcc& a) {
        if (minab >= 0x0400u)
            a.minnz_bits = std::min(a.minnz_bits, float_bits(minab));  // no zero, no subnormal
        else
            half_counts(h, m, a);
    }
};

/// Range counters of n (a multiple of 16) finite bfloat16 values, on their bit patterns: a
/// float threshold T on the widened value (x << 16) is a 16-bit one, (x << 16) > T exactly when
/// x > T >> 16, and (x << 16) < T exactly when x < ceil(T / 2^16). 16 values per compare,
/// no widened copy (a bfloat16 activation block almost always has a value below FP16's
/// normal range, so this is the common path of BF16 passes).
constexpr int16_t above16(uint32_t t) {
    return int16_t(t >> 16);
}
constexpr int16_t below16(uint32_t t) {
    return int16_t((t >> 16) + ((t & 0xffffu) != 0));
}
AMPSCOPE_AVX2 void bf16_counts(const uint16_t* h, int n, KernelAcc& a) {
    const __m256i mask = _mm256_set1_epi16(0x7fff), zero = _mm256_setzero_si256(), one = _mm256_set1_epi16(1);
    const __m256i t_ho = _mm256_set1_epi16(above16(kFp16MaxBits)), t_bo = _mm256_set1_epi16(above16(kBf16MaxBits));
    const __m256i t_hs = _mm256_set1_epi16(below16(kFp16MinNormalBits)),
                  t_hu = _mm256_set1_epi16(below16(kFp16MinSubBits));
    const __m256i t_bs = _mm256_set1_epi16(below16(kBf16MinNormalBits)),
                  t_bu = _mm256_set1_epi16(below16(kBf16MinSubBits));
    // 16-bit lanes count at most n / 16 <= 256 each (n <= kBlock)
    __m256i zeros = zero, gh = zero, gb = zero, lhs = zero, lhu = zero, lbs = zero, lbu = zero,
            minnz = _mm256_set1_epi16(-1);
    for (int i = 0; i < n; i += 16) {
        // magnitudes are at most 0x7fff: signed 16-bit compares are exact
        const __m256i ab = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)), mask);
        zeros = _mm256_sub_epi16(zeros, _mm256_cmpeq_epi16(ab, zero));
        gh = _mm256_sub_epi16(gh, _mm256_cmpgt_epi16(ab, t_ho));
        gb = _mm256_sub_epi16(gb, _mm256_cmpgt_epi16(ab, t_bo));
        lhs = _mm256_sub_epi16(lhs, _mm256_cmpgt_epi16(t_hs, ab));
        lhu = _mm256_sub_epi16(lhu, _mm256_cmpgt_epi16(t_hu, ab));
        lbs = _mm256_sub_epi16(lbs, _mm256_cmpgt_epi16(t_bs, ab));
        lbu = _mm256_sub_epi16(lbu, _mm256_cmpgt_epi16(t_bu, ab));
        minnz = _mm256_min_epu16(minnz, _mm256_sub_epi16(ab, one));  // zero wraps to 0xffff
    }
    const int64_t z = total16(zeros);
    a.zeros += z;
    a.h_over += total16(gh);
    a.b_over += total16(gb);
    a.h_sub += total16(lhs) - z;
    a.h_under += total16(lhu) - z;
    a.b_sub += total16(lbs) - z;
    a.b_under += total16(lbu) - z;
    if (const uint16_t mn = lane_min<uint16_t>(minnz); mn != 0xffffu)
        a.minnz_bits = std::min(a.minnz_bits, uint32_t(mn + 1u) << 16);
}

/// bfloat16: the fast range as for floats; range counters on the bit patterns when needed.
struct BFloat16 {
    static constexpr uint16_t kInfBits = 0x7f80u;
    static void widen(const uint16_t* h, float* out, int n) { bf16_to_float(h, out, n); }
    AMPSCOPE_AVX2 static __m256 load(const uint16_t* p) {
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
    }
    static bool fast(uint16_t maxab) {
        return (uint32_t(maxab) << 16) >= kFastLoBits && (uint32_t(maxab) << 16) <= kFastHiBits;
    }
    /// What masked16 needs: finite values can be above 2^56 and above FP16's range; below
    /// FP16's normal range (0x3880) there are FP16-subnormal, FP16-underflow and
    /// BF16-subnormal values (never BF16-underflow: a non-zero bfloat16 is at least 2^-133).
    static constexpr bool kHuge = true;
    static constexpr uint16_t kLowBits = uint16_t(below16(kFp16MinNormalBits));
    /// 16 values widened in registers, in the order 0-3, 8-11 (x0) and 4-7, 12-15 (x1): the
    /// sums do not need the order, and this costs one instruction per 8 values.
    AMPSCOPE_AVX2 static void load16(const uint16_t* p, __m256& x0, __m256& x1) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), zero = _mm256_setzero_si256();
        x0 = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, v));
        x1 = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, v));
    }
    static uint32_t float_bits(uint16_t bits) { return uint32_t(bits) << 16; }
    AMPSCOPE_AVX2 static void range(const uint16_t* h, int m, uint16_t minab, uint16_t maxab, float* buf,
                                    KernelAcc& a) {
        if (float_bits(minab) >= kFp16MinNormalBits && float_bits(maxab) <= kFp16MaxBits)
            a.minnz_bits = std::min(a.minnz_bits, float_bits(minab));
        else
            bf16_counts(h, m, a);
    }
};

/// Inverse of the 16-bit order-preserving key (key_of on 16-bit patterns).
inline uint16_t bits_of_key16(uint16_t k) {
    return (k & 0x8000u) ? uint16_t(k & 0x7fffu) : uint16_t(~k);
}

/// The integer pass of masked16 over n (a multiple of 16) 16-bit values, on their bit patterns:
/// every counter, the finite minimum and maximum (order-preserving 16-bit keys) and the absolute
/// maximum. kNonfinite: some value is NaN or Inf (else no such counter or mask is computed).
/// kLow: some value is below Fmt::kLowBits, so zeros, the counters below FP16's normal range and
/// the smallest non-zero magnitude are counted; else all of those counters are zero and the
/// smallest non-zero magnitude is the block's smallest one, minab. Signed 16-bit compares are
/// exact on magnitudes (<= 0x7fff); 16-bit lane counters hold at most n / 16 <= 256.
template <class Fmt, bool kNonfinite, bool kLow>
AMPSCOPE_AVX2 void counts_masked16(const uint16_t* h, int n, uint16_t minab, KernelAcc& a) {
    const __m256i mask = _mm256_set1_epi16(0x7fff), zero = _mm256_setzero_si256(), one = _mm256_set1_epi16(1);
    const __m256i sign = _mm256_set1_epi16(int16_t(0x8000u)), t_fin = _mm256_set1_epi16(int16_t(Fmt::kInfBits - 1u));
    const __m256i t_inf = _mm256_set1_epi16(int16_t(Fmt::kInfBits)),
                  t_ninf = _mm256_set1_epi16(int16_t(0x8000u | Fmt::kInfBits));
    const __m256i t_ho = _mm256_set1_epi16(above16(kFp16MaxBits)), t_hs = _mm256_set1_epi16(int16_t(Fmt::kLowBits));
    const __m256i t_hu = _mm256_set1_epi16(below16(kFp16MinSubBits)),
                  t_bs = _mm256_set1_epi16(below16(kBf16MinNormalBits));
    __m256i nonfin = zero, nan = zero, ninf = zero, gh = zero, zeros = zero, lhs = zero, lhu = zero, lbs = zero;
    __m256i mnk = _mm256_set1_epi16(-1), mxk = zero, minnz = _mm256_set1_epi16(-1);
    for (int i = 0; i < n; i += 16) {
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i));
        const __m256i ab = _mm256_and_si256(b, mask);
        const __m256i key = _mm256_xor_si256(b, _mm256_or_si256(_mm256_srai_epi16(b, 15), sign));
        __m256i nf = zero;  // masks are -1: subtracting counts
        if constexpr (kNonfinite) {
            nf = _mm256_cmpgt_epi16(ab, t_fin);
            mnk = _mm256_min_epu16(mnk, _mm256_or_si256(key, nf));
            mxk = _mm256_max_epu16(mxk, _mm256_andnot_si256(nf, key));
            nonfin = _mm256_sub_epi16(nonfin, nf);
            nan = _mm256_sub_epi16(nan, _mm256_cmpgt_epi16(ab, t_inf));
            ninf = _mm256_sub_epi16(ninf, _mm256_cmpeq_epi16(b, t_ninf));
        } else {
            mnk = _mm256_min_epu16(mnk, key);
            mxk = _mm256_max_epu16(mxk, key);
        }
        if constexpr (Fmt::kHuge) gh = _mm256_sub_epi16(gh, _mm256_cmpgt_epi16(ab, t_ho));
        if constexpr (kLow) {
            // zero wraps to 0xffff and non-finite is forced there: never the minimum
            minnz = _mm256_min_epu16(minnz, _mm256_or_si256(_mm256_sub_epi16(ab, one), nf));
            zeros = _mm256_sub_epi16(zeros, _mm256_cmpeq_epi16(ab, zero));
            lhs = _mm256_sub_epi16(lhs, _mm256_cmpgt_epi16(t_hs, ab));
            if constexpr (Fmt::kHuge) {
                lhu = _mm256_sub_epi16(lhu, _mm256_cmpgt_epi16(t_hu, ab));
                lbs = _mm256_sub_epi16(lbs, _mm256_cmpgt_epi16(t_bs, ab));
            }
        }
    }
    a.count += n;
    int64_t nf = 0;
    if constexpr (kNonfinite) {
        const int64_t na = total16(nan), ni = total16(ninf);
        nf = total16(nonfin);
        a.nan += na;
        a.posinf += nf - na - ni;
        a.neginf += ni;
    }
    if constexpr (Fmt::kHuge) a.h_over += total16(gh) - nf;
    if constexpr (kLow) {
        const int64_t z = total16(zeros);
        a.zeros += z;
        a.h_sub += total16(lhs) - z;
        if constexpr (Fmt::kHuge) {
            a.h_under += total16(lhu) - z;
            a.b_sub += total16(lbs) - z;
        }
        if (const uint16_t mn = lane_min<uint16_t>(minnz); mn != 0xffffu)
            a.minnz_bits = std::min(a.minnz_bits, Fmt::float_bits(uint16_t(mn + 1u)));
    } else if (minab < Fmt::kInfBits) {
        a.minnz_bits = std::min(a.minnz_bits, Fmt::float_bits(minab));  // finite, and not zero
    }
    if (const uint16_t lo = lane_min<uint16_t>(mnk); lo != 0xffffu) {  // some finite value (no finite key is 0xffff)
        const uint32_t fl = Fmt::float_bits(bits_of_key16(lo)),
                       fh = Fmt::float_bits(bits_of_key16(lane_max<uint16_t>(mxk)));
        a.min_key = std::min(a.min_key, key_of(fl));
        a.max_key = std::max(a.max_key, key_of(fh));
        a.amax_bits = std::max({a.amax_bits, fl & 0x7fffffffu, fh & 0x7fffffffu});
    }
}

/// The float pass of masked16 over n (a multiple of 32) 16-bit values widened in registers: sum
/// and sum of squares of the finite values. kNonfinite: NaN and Inf are left out by masks.
/// kHuge: finite values above 2^56 are summed in lanes of their own scaled by 2^-96 (exact, as
/// in moments_masked), in pairs. 32 float lanes of at most 32 elements each (the huge ones: 16
/// lanes of 32 pairs), chunk sums in double: the fast path's bound.
template <class Fmt, bool kNonfinite, bool kHuge>
AMPSCOPE_AVX2 void moments16(const uint16_t* h, int n, KernelAcc& a) {
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff), maxfin = _mm256_set1_epi32(0x7f7fffff);
    const __m256i hugeb = _mm256_set1_epi32(int32_t(kFastHiBits));
    const __m256 down = _mm256_set1_ps(0x1p-96f);
    double sum = 0, sumsq = 0, hsum = 0, hsumsq = 0;
    // The finite values of x that are not huge into s and q; returns the huge ones scaled down.
    const auto part = [&](__m256 x, __m256& s, __m256& q) AMPSCOPE_AVX2 {
        __m256 z = x, hd = _mm256_setzero_ps();
        if constexpr (kNonfinite || kHuge) {
            const __m256i ab = _mm256_and_si256(_mm256_castps_si256(x), absmask);
            const __m256 out = _mm256_castsi256_ps(_mm256_cmpgt_epi32(ab, kHuge ? hugeb : maxfin));
            z = _mm256_andnot_ps(out, x);
            if constexpr (kHuge) {
                __m256 hx = _mm256_and_ps(out, x);  // huge, and non-finite unless masked out
                if constexpr (kNonfinite)
                    hx = _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(ab, maxfin)), hx);
                hd = _mm256_mul_ps(hx, down);
            }
        }
        s = _mm256_add_ps(s, z);
        q = _mm256_fmadd_ps(z, z, q);
        return hd;
    };
    for (int c = 0; c < n; c += kChunk) {
        const int end = std::min(n, c + kChunk);
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
        __m256 t0 = s0, t1 = s0, r0 = s0, r1 = s0;
        for (int i = c; i < end; i += 32) {
            __m256 x0, x1, x2, x3;
            Fmt::load16(h + i, x0, x1);
            Fmt::load16(h + i + 16, x2, x3);
            const __m256 h0 = part(x0, s0, q0), h1 = part(x1, s1, q1), h2 = part(x2, s2, q2), h3 = part(x3, s3, q3);
            if constexpr (kHuge) {  // pairs first: short dependency chains
                t0 = _mm256_add_ps(t0, _mm256_add_ps(h0, h1));
                t1 = _mm256_add_ps(t1, _mm256_add_ps(h2, h3));
                r0 = _mm256_add_ps(r0, _mm256_fmadd_ps(h0, h0, _mm256_mul_ps(h1, h1)));
                r1 = _mm256_add_ps(r1, _mm256_fmadd_ps(h2, h2, _mm256_mul_ps(h3, h3)));
            }
        }
        sum += hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
        sumsq += hsum_ps(_mm256_add_ps(_mm256_add_ps(q0, q1), _mm256_add_ps(q2, q3)));
        if constexpr (kHuge) {
            hsum += hsum_ps(_mm256_add_ps(t0, t1));
            hsumsq += hsum_ps(_mm256_add_ps(r0, r1));
        }
    }
    a.sum += sum + hsum * 0x1p96;
    a.sumsq += sumsq + hsumsq * 0x1p192;
}

/// A block of m (a multiple of 32) 16-bit values outside the plain fast path, NaN/Inf or (in
/// bfloat16) finite magnitudes above 2^56 among them (a causal mask's fill value, -inf or
/// finfo.min), without a widened copy: the counters, min, max and smallest non-zero magnitude on
/// the bit patterns, then one float pass for the sums with the parts it needs. minab and maxab:
/// the block's smallest and largest magnitude bits. Returns false, adding nothing, when the
/// finite values are all below 2^-60 (the caller takes the exact path).
template <class Fmt>
AMPSCOPE_AVX2 bool masked16(const uint16_t* h, int m, uint16_t minab, uint16_t maxab, KernelAcc& a) {
    KernelAcc l;
    const bool nonfinite = maxab >= Fmt::kInfBits, low = minab < Fmt::kLowBits;
    (nonfinite ? (low ? counts_masked16<Fmt, true, true> : counts_masked16<Fmt, true, false>)
               : (low ? counts_masked16<Fmt, false, true> : counts_masked16<Fmt, false, false>))(h, m, minab, l);
    if (l.any_finite()) {
        if (l.amax_bits < kFastLoBits) return false;
        if constexpr (Fmt::kHuge) {
            if (l.amax_bits > kFastHiBits) {
                (nonfinite ? moments16<Fmt, true, true> : moments16<Fmt, false, true>)(h, m, l);
                a.add(l);
                return true;
            }
        }
        moments16<Fmt, true, false>(h, m, l);  // not huge, not tiny: some NaN or Inf made the block leave the fast path
    }
    a.add(l);
    return true;
}

/// One block of at most kBlock 16-bit values: magnitude range on the 16-bit patterns, the
/// float pass on values widened in registers (masked16 for a block with NaN/Inf or huge
/// values), the exact path on a widened copy only for tiny values and the tail.
template <class Fmt>
AMPSCOPE_AVX2 void block16(const uint16_t* h, int n, KernelAcc& a) {
    const int m = n & ~31;
    float buf[kBlock];
    if (m > 0) {
        __m256i lo, hi;
        magnitude_range<true>(h, m, lo, hi);
        const uint16_t minab = lane_min<uint16_t>(lo), maxab = lane_max<uint16_t>(hi);
        if (Fmt::fast(maxab)) {
            moments<2>(
                m, [h](int i) AMPSCOPE_AVX2 { return Fmt::load(h + i); }, reinterpret_cast<const char*>(h + kBlock), a);
            a.amax_bits = std::max(a.amax_bits, Fmt::float_bits(maxab));
            Fmt::range(h, m, minab, maxab, buf, a);
        } else if (minab > Fmt::kInfBits) {
            a.count += m;  // every value NaN (a sample's rows after an overflow): nothing else to count
            a.nan += m;
        } else if (!masked16<Fmt>(h, m, minab, maxab, a)) {
            Fmt::widen(h, buf, m);  // every finite value below 2^-60 (or zero): the exact path
            stats_block(buf, m, a);
        }
    }
    if (n > m) {
        Fmt::widen(h + m, buf, n - m);
        stats_block(buf, n - m, a);
    }
}

/// Number of 16-bit patterns whose magnitude bits exceed `finite_max` (NaN and Inf).
AMPSCOPE_AVX2 int64_t count_above16(const uint16_t* h, int64_t n, uint16_t finite_max) {
    const __m256i mask = _mm256_set1_epi16(0x7fff), t = _mm256_set1_epi16(int16_t(finite_max));
    int64_t c = 0;
    int64_t i = 0;
    while (i + 16 <= n) {
        __m256i acc = _mm256_setzero_si256();  // 16-bit lanes: at most 32767 steps per round
        const int64_t end = std::min(n - 15, i + 16 * 32767);
        for (; i < end; i += 16)
            acc = _mm256_sub_epi16(
                acc, _mm256_cmpgt_epi16(
                         _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)), mask), t));
        alignas(32) uint16_t lanes[16];
        _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
        for (uint16_t x : lanes) c += x;
    }
    for (; i < n; ++i) c += (h[i] & 0x7fffu) > finite_max;
    return c;
}

void f16_block(const uint16_t* h, int n, KernelAcc& a) {
    block16<Half16>(h, n, a);
}
void bf16_block(const uint16_t* h, int n, KernelAcc& a) {
    block16<BFloat16>(h, n, a);
}

#else
int64_t count_above16(const uint16_t*, int64_t, uint16_t) {
    return 0;
}
void f16_block(const uint16_t*, int, KernelAcc&) {}
void bf16_block(const uint16_t*, int, KernelAcc&) {}
#endif

}  // namespace ampscope::detail::kernel
