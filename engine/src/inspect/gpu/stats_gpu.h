// SPDX-License-Identifier: MIT
#pragma once
// Device-side fused statistics (CUDA, and HIP from the same source). Plain C++ interface:
// raw pointers and a stream handle, so neither LibTorch nor CUDA headers leak out.

#include <cstdint>

namespace ampscope::gpu {

/// One tensor's statistics, accumulated on the device. Keys as in stats_kernel.h.
struct DeviceStats {
    unsigned long long count, nan, posinf, neginf, zeros;
    unsigned long long h_over, h_sub, h_under, b_over, b_sub, b_under;
    unsigned int min_key, max_key, amax_bits, minnz_bits;
    double sum, sumsq;
};

enum class DType : int { Float32 = 0, Float16 = 1, BFloat16 = 2 };

/// Initial value of a slot (counters 0, min keys at their maximum).
DeviceStats empty_stats();

/// Accumulates `n` contiguous values into `*out` (device memory, initialised with
/// empty_stats()); `row_nonfinite` (device, `rows` counters, may be null) receives per-row
/// non-finite counts for rows of n/rows values. Asynchronous on `stream` (cudaStream_t or
/// hipStream_t); returns 0 or the runtime's error code.
int launch_stats(const void* data, DType dtype, int64_t n, int64_t rows, DeviceStats* out,
                 unsigned long long* row_nonfinite, void* stream);

/// The device's name and architecture ("sm_90" on CUDA; gcnArchName on HIP, e.g.
/// "gfx90a:sramecc+:xnack-"), NUL-terminated and truncated to the buffers; returns 0 or the
/// runtime's error code.
int device_info(int index, char* name, int name_len, char* arch, int arch_len);

}  // namespace ampscope::gpu
