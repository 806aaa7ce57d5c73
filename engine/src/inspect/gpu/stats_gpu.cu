// SPDX-License-Identifier: MIT
// Fused statistics kernel: one pass over device memory, results accumulated into a device
// slot (no host synchronisation). The same source builds with nvcc and with hipcc.
#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define gpuStream_t hipStream_t
#define gpuGetLastError hipGetLastError
#define gpuSuccess hipSuccess
#else
#include <cuda_runtime.h>
#define gpuStream_t cudaStream_t
#define gpuGetLastError cudaGetLastError
#define gpuSuccess cudaSuccess
#endif

#include <cstdio>

#include "stats_gpu.h"

namespace ampscope::gpu {

namespace {

constexpr unsigned kExpMask = 0x7f800000u;
constexpr unsigned kFp16MaxBits = 0x477fe000u, kFp16MinNormalBits = 0x38800000u, kFp16MinSubBits = 0x33800000u;
constexpr unsigned kBf16MaxBits = 0x7f7f0000u, kBf16MinNormalBits = 0x00800000u, kBf16MinSubBits = 0x00010000u;

__device__ __forceinline__ unsigned half_bits_to_float_bits(unsigned short h) {
    const unsigned sign = unsigned(h & 0x8000u) << 16;
    unsigned exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1fu) return sign | 0x7f800000u | (mant << 13);  // inf / nan
    if (exp == 0) {
        if (mant == 0) return sign;  // +-0
        int e = -1;                  // subnormal: normalise
        do {
            mant <<= 1;
            ++e;
        } while ((mant & 0x400u) == 0);
        mant &= 0x3ffu;
        return sign | unsigned(127 - 15 - e) << 23 | (mant << 13);
    }
    return sign | (exp + 112u) << 23 | (mant << 13);
}

__device__ __forceinline__ unsigned load_bits(const void* p, DType dt, long long i) {
    if (dt == DType::Float32) return static_cast<const unsigned*>(p)[i];
    const unsigned short h = static_cast<const unsigned short*>(p)[i];
    return dt == DType::BFloat16 ? unsigned(h) << 16 : half_bits_to_float_bits(h);
}

__global__ void stats_kernel(const void* data, DType dt, long long n, long long row_len, DeviceStats* out,
                             unsigned long long* row_nonfinite) {
    __shared__ DeviceStats s;
    if (threadIdx.x == 0) {
        s = DeviceStats{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xffffffffu, 0u, 0u, kExpMask, 0.0, 0.0};
    }
    __syncthreads();
    unsigned long long cnt = 0, nan = 0, pinf = 0, ninf = 0, zeros = 0, ho = 0, hs = 0, hu = 0, bo = 0, bs = 0, bu = 0;
    unsigned mnk = 0xffffffffu, mxk = 0, amax = 0, minnz = kExpMask;
    double sum = 0, sumsq = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const unsigned b = load_bits(data, dt, i);
        const unsigned ab = b & 0x7fffffffu;
        const bool fin = ab < kExpMask, nz = fin && ab != 0;
        ++cnt;
        if (!fin) {
            if (ab > kExpMask)
                ++nan;
            else if (b >> 31)
                ++ninf;
            else
                ++pinf;
            if (row_nonfinite) atomicAdd(row_nonfinite + i / row_len, 1ull);
            continue;
        }
        zeros += ab == 0;
        ho += ab > kFp16MaxBits;
        hs += nz && ab < kFp16MinNormalBits;
        hu += nz && ab < kFp16MinSubBits;
        bo += ab > kBf16MaxBits;
        bs += nz && ab < kBf16MinNormalBits;
        bu += nz && ab < kBf16MinSubBits;
        const unsigned k = b ^ (unsigned(int(b) >> 31) | 0x80000000u);
        mnk = min(mnk, k);
        mxk = max(mxk, k);
        amax = max(amax, ab);
        if (nz) minnz = min(minnz, ab);
        const double x = double(__uint_as_float(b));
        sum += x;
        sumsq += x * x;
    }
    atomicAdd(&s.count, cnt);
    atomicAdd(&s.nan, nan);
    atomicAdd(&s.posinf, pinf);
    atomicAdd(&s.neginf, ninf);
    atomicAdd(&s.zeros, zeros);
    atomicAdd(&s.h_over, ho);
    atomicAdd(&s.h_sub, hs);
    atomicAdd(&s.h_under, hu);
    atomicAdd(&s.b_over, bo);
    atomicAdd(&s.b_sub, bs);
    atomicAdd(&s.b_under, bu);
    atomicMin(&s.min_key, mnk);
    atomicMax(&s.max_key, mxk);
    atomicMax(&s.amax_bits, amax);
    atomicMin(&s.minnz_bits, minnz);
    atomicAdd(&s.sum, sum);
    atomicAdd(&s.sumsq, sumsq);
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(&out->count, s.count);
        atomicAdd(&out->nan, s.nan);
        atomicAdd(&out->posinf, s.posinf);
        atomicAdd(&out->neginf, s.neginf);
        atomicAdd(&out->zeros, s.zeros);
        atomicAdd(&out->h_over, s.h_over);
        atomicAdd(&out->h_sub, s.h_sub);
        atomicAdd(&out->h_under, s.h_under);
        atomicAdd(&out->b_over, s.b_over);
        atomicAdd(&out->b_sub, s.b_sub);
        atomicAdd(&out->b_under, s.b_under);
        atomicMin(&out->min_key, s.min_key);
        atomicMax(&out->max_key, s.max_key);
        atomicMax(&out->amax_bits, s.amax_bits);
        atomicMin(&out->minnz_bits, s.minnz_bits);
        atomicAdd(&out->sum, s.sum);
        atomicAdd(&out->sumsq, s.sumsq);
    }
}

}  // namespace

DeviceStats empty_stats() {
    return DeviceStats{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xffffffffu, 0u, 0u, kExpMask, 0.0, 0.0};
}

int launch_stats(const void* data, DType dtype, int64_t n, int64_t rows, DeviceStats* out,
                 unsigned long long* row_nonfinite, void* stream) {
    if (n <= 0) return 0;
    const int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    if (blocks > 2048) blocks = 2048;  // grid-stride beyond this
    const long long row_len = rows > 0 ? n / rows : n;
    stats_kernel<<<unsigned(blocks), threads, 0, static_cast<gpuStream_t>(stream)>>>(
        data, dtype, n, row_len > 0 ? row_len : 1, out, rows > 0 ? row_nonfinite : nullptr);
    return int(gpuGetLastError());
}

int device_info(int index, char* name, int name_len, char* arch, int arch_len) {
    if (name_len > 0) name[0] = '\0';
    if (arch_len > 0) arch[0] = '\0';
#if defined(__HIPCC__)
    hipDeviceProp_t p;
    const hipError_t err = hipGetDeviceProperties(&p, index);
    if (err != hipSuccess) return int(err);
    std::snprintf(arch, size_t(arch_len), "%s", p.gcnArchName);
#else
    cudaDeviceProp p;
    const cudaError_t err = cudaGetDeviceProperties(&p, index);
    if (err != cudaSuccess) return int(err);
    std::snprintf(arch, size_t(arch_len), "sm_%d%d", p.major, p.minor);
#endif
    std::snprintf(name, size_t(name_len), "%s", p.name);
    return 0;
}

}  // namespace ampscope::gpu
