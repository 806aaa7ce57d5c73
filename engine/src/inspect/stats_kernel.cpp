// SPDX-License-Identifier: MIT
// The CPU statistics kernel: the accumulator, the exact portable path, and the dispatch to the
// AVX2 fast path (stats_kernel_avx2.cpp) where the CPU has it.
#include "inspect/stats_kernel.h"
#include "inspect/stats_kernel_bits.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace ampscope::detail {

using namespace kernel;

float KernelAcc::min() const {
    return as_float(bits_of_key(min_key));
}

TensorStats to_stats(const KernelAcc& a) {
    TensorStats s;
    s.count = a.count;
    s.nan = a.nan;
    s.posinf = a.posinf;
    s.neginf = a.neginf;
    s.zeros = a.zeros;
    const int64_t fin = a.count - a.nan - a.posinf - a.neginf;
    if (fin > 0 && a.any_finite()) {
        s.min = a.min();
        s.max = a.max();
        s.absmax = as_float(a.amax_bits);
        s.mean = a.sum / double(fin);
        s.rms = std::sqrt(a.sumsq / double(fin));
    }
    if (a.minnz_bits < kExpMask) s.min_nonzero_abs = as_float(a.minnz_bits);
    s.fp16_overflow = a.h_over;
    s.fp16_subnormal = a.h_sub;
    s.fp16_underflow = a.h_under;
    s.bf16_overflow = a.b_over;
    s.bf16_subnormal = a.b_sub;
    s.bf16_underflow = a.b_under;
    return s;
}
float KernelAcc::max() const {
    return as_float(bits_of_key(max_key));
}

void KernelAcc::add(const KernelAcc& o) {
    count += o.count;
    nan += o.nan;
    posinf += o.posinf;
    neginf += o.neginf;
    zeros += o.zeros;
    h_over += o.h_over;
    h_sub += o.h_sub;
    h_under += o.h_under;
    b_over += o.b_over;
    b_sub += o.b_sub;
    b_under += o.b_under;
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
    a.count += n;
    a.nan += nan;
    a.posinf += pinf;
    a.neginf += ninf;
    a.zeros += zeros;
    a.h_over += ho;
    a.h_sub += hs;
    a.h_under += hu;
    a.b_over += bo;
    a.b_sub += bs;
    a.b_under += bu;
    a.min_key = std::min(a.min_key, mnk);
    a.max_key = std::max(a.max_key, mxk);
    a.amax_bits = std::max(a.amax_bits, amax);
    a.minnz_bits = std::min(a.minnz_bits, minnz);
    a.sum += sum;
    a.sumsq += sumsq;
}

namespace {

/// The exact path for 16-bit formats: widened block by block, then stats_block.
void generic_16(const uint16_t* h, int64_t n, KernelAcc& a, void (*widen)(const uint16_t*, float*, int)) {
    float buf[kBlock];
    for (int64_t b = 0; b < n; b += kBlock) {
        const int len = int(std::min<int64_t>(kBlock, n - b));
        widen(h + b, buf, len);
        stats_block(buf, len, a);
    }
}

/// The portable path forced (set_stats_portable, or AMPSCOPE_STATS_PORTABLE=1 read once).
std::atomic<bool>& portable_forced() {
    static std::atomic<bool> on{[] {
        const char* e = std::getenv("AMPSCOPE_STATS_PORTABLE");
        return e != nullptr && std::strcmp(e, "1") == 0;
    }()};
    return on;
}

/// Whether blocks may take the AVX2 fast path now.
bool has_avx2() {
    return cpu_has_avx2() && !portable_forced().load(std::memory_order_relaxed);
}

}  // namespace

void set_stats_portable(bool on) {
    portable_forced() = on;
}
bool stats_fast_path() {
    return has_avx2();
}

void stats_f32(const float* v, int64_t n, KernelAcc& a) {
    const bool fast = has_avx2();
    for (int64_t b = 0; b < n; b += kBlock) {
        const int len = int(std::min<int64_t>(kBlock, n - b));
        if (fast)
            f32_block(v + b, len, a);
        else
            stats_block(v + b, len, a);
    }
}

void stats_f16(const uint16_t* h, int64_t n, KernelAcc& a) {
    if (!has_avx2()) return generic_16(h, n, a, half_to_float);
    for (int64_t b = 0; b < n; b += kBlock) f16_block(h + b, int(std::min<int64_t>(kBlock, n - b)), a);
}

void stats_bf16(const uint16_t* h, int64_t n, KernelAcc& a) {
    if (!has_avx2()) return generic_16(h, n, a, bf16_to_float);
    for (int64_t b = 0; b < n; b += kBlock) bf16_block(h + b, int(std::min<int64_t>(kBlock, n - b)), a);
}

AMPSCOPE_CLONES
int64_t count_nonfinite_f32(const float* v, int64_t n) {
    const uint32_t* bits = reinterpret_cast<const uint32_t*>(v);
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i) c += (bits[i] & 0x7fffffffu) >= kExpMask;
    return c;
}

/// Non-finite 16-bit values: magnitude bits above the largest finite one (`inf_bits` - 1).
AMPSCOPE_CLONES
int64_t count_nonfinite_16(const uint16_t* h, int64_t n, uint16_t inf_bits) {
    if (has_avx2()) return count_above16(h, n, uint16_t(inf_bits - 1));
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i) c += (h[i] & 0x7fffu) >= inf_bits;
    return c;
}

int64_t count_nonfinite_f16(const uint16_t* h, int64_t n) {
    return count_nonfinite_16(h, n, 0x7c00u);
}
int64_t count_nonfinite_bf16(const uint16_t* h, int64_t n) {
    return count_nonfinite_16(h, n, 0x7f80u);
}

}  // namespace ampscope::detail
