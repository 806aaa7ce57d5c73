// SPDX-License-Identifier: MIT
// Fused single-pass tensor statistics on the host (min, max, sums, range counters, non-finite
// rows) over the block kernels of stats_kernel.h, in parallel chunks. Compiled with -fopenmp
// (engine/CMakeLists.txt): at::parallel_for runs serially in a translation unit without it.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "inspect/observer.h"
#include "inspect/stats_kernel.h"

namespace ampscope::detail {

// ---- fused statistics ---------------------------------------------------------------------

namespace {

using Acc = KernelAcc;

/// One pass over memory (see stats_kernel.h).
template <class T>
void accumulate(const T* p, int64_t n, Acc& a) {
    if constexpr (std::is_same_v<T, float>)
        stats_f32(p, n, a);
    else if constexpr (std::is_same_v<T, at::Half>)
        stats_f16(reinterpret_cast<const uint16_t*>(p), n, a);
    else
        stats_bf16(reinterpret_cast<const uint16_t*>(p), n, a);
}

template <class T>
int64_t count_nonfinite(const T* p, int64_t n) {
    if constexpr (std::is_same_v<T, float>)
        return count_nonfinite_f32(p, n);
    else if constexpr (std::is_same_v<T, at::Half>)
        return count_nonfinite_f16(reinterpret_cast<const uint16_t*>(p), n);
    else
        return count_nonfinite_bf16(reinterpret_cast<const uint16_t*>(p), n);
}

template <class T>
TensorStats stats_typed(const at::Tensor& t, std::vector<int64_t>* rows_nonfinite) {
    const T* p = t.data_ptr<T>();
    const int64_t n = t.numel();
    // Chunks of 16 Ki elements, merged in order: the same sums whatever the thread count. Tasks
    // of at least 16 chunks (256 Ki elements, a few hundred microseconds): waking the pool's
    // threads for less costs more than it saves, and far more on a loaded machine, where a
    // woken thread may wait a scheduler tick (a GPT-2 with 2 x 32 tokens: the instrumented pass
    // took 1.66x the plain one with a task per chunk, on 2 threads).
    constexpr int64_t kChunk = 16384, kChunksPerTask = 16;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    Acc total;
    if (chunks == 1) {
        accumulate(p, n, total);
    } else {
        std::vector<Acc> parts(static_cast<size_t>(chunks));
        at::parallel_for(0, chunks, kChunksPerTask, [&](int64_t b, int64_t e) {
            for (int64_t c = b; c < e; ++c)
                accumulate(p + c * kChunk, std::min(kChunk, n - c * kChunk), parts[size_t(c)]);
        });
        for (const auto& a : parts) total.add(a);
    }
    TensorStats s = to_stats(total);
    // Per-sample rows (along dimension 0) when asked: counted only where there is something to count.
    if (rows_nonfinite && t.dim() >= 1) {
        const int64_t rows = t.size(0);
        rows_nonfinite->assign(size_t(rows), 0);
        if (s.nonfinite() > 0 && rows > 0) {
            const int64_t row_len = n / rows;
            for (int64_t r = 0; r < rows; ++r) (*rows_nonfinite)[size_t(r)] = count_nonfinite(p + r * row_len, row_len);
        }
    }
    return s;
}

/// Whether any of n values is NaN or Inf: blocks of 4096 values, stopping at the first block
/// that has one (an op's inputs are checked only when its output is not finite, and then
/// usually hold the sample rows that made it so).
template <class T>
bool any_nonfinite_in(const T* p, int64_t n) {
    constexpr int64_t kStep = 4096;
    for (int64_t i = 0; i < n; i += kStep)
        if (count_nonfinite(p + i, std::min(kStep, n - i)) > 0) return true;
    return false;
}

/// The tensor's values on the host, contiguous, in float32 unless half or bfloat16.
at::Tensor host_values(const at::Tensor& in) {
    at::Tensor t = in;
    if (!t.device().is_cpu()) t = t.to(at::kCPU);
    if (!t.is_contiguous()) t = t.contiguous();
    if (t.scalar_type() != at::kFloat && t.scalar_type() != at::kHalf && t.scalar_type() != at::kBFloat16)
        t = t.to(at::kFloat);
    return t;
}

template <class T>
void new_rows_typed(const T* p, int64_t rows, int64_t row_len, int64_t nonfinite, const std::vector<bool>& seen,
                    std::vector<int64_t>& out) {
    const auto is_seen = [&](int64_t r) { return size_t(r) < seen.size() && seen[size_t(r)]; };
    int64_t n_seen = 0;
    for (int64_t r = 0; r < rows; ++r) n_seen += is_seen(r);
    // Fewer rows seen than not: count theirs first. When they hold every non-finite value of
    // the tensor, no other row has one, and the other rows are not read.
    if (n_seen > 0 && n_seen <= rows - n_seen) {
        int64_t in_seen = 0;
        for (int64_t r = 0; r < rows; ++r)
            if (is_seen(r)) in_seen += count_nonfinite(p + r * row_len, row_len);
        if (in_seen == nonfinite) return;
    }
    for (int64_t r = 0; r < rows; ++r)
        if (!is_seen(r)) out[size_t(r)] = any_nonfinite_in(p + r * row_len, row_len) ? 1 : 0;
}

}  // namespace

void new_nonfinite_rows(const at::Tensor& in, int64_t nonfinite, const std::vector<bool>& seen,
                        std::vector<int64_t>& rows) {
    const int64_t n_rows = in.defined() && in.dim() >= 1 ? in.size(0) : 0;
    rows.assign(size_t(n_rows), 0);
    if (nonfinite <= 0 || n_rows == 0 || in.numel() == 0) return;
    const at::Tensor t = host_values(in);
    const int64_t row_len = t.numel() / n_rows;
    switch (t.scalar_type()) {
        case at::kHalf: return new_rows_typed(t.data_ptr<at::Half>(), n_rows, row_len, nonfinite, seen, rows);
        case at::kBFloat16: return new_rows_typed(t.data_ptr<at::BFloat16>(), n_rows, row_len, nonfinite, seen, rows);
        default: return new_rows_typed(t.data_ptr<float>(), n_rows, row_len, nonfinite, seen, rows);
    }
}

bool any_nonfinite(const at::Tensor& in) {
    if (!in.defined() || in.numel() == 0 || !in.is_floating_point()) return false;
    const at::Tensor t = host_values(in);
    switch (t.scalar_type()) {
        case at::kHalf: return any_nonfinite_in(t.data_ptr<at::Half>(), t.numel());
        case at::kBFloat16: return any_nonfinite_in(t.data_ptr<at::BFloat16>(), t.numel());
        default: return any_nonfinite_in(t.data_ptr<float>(), t.numel());
    }
}

TensorStats tensor_stats(const at::Tensor& in, std::vector<int64_t>* rows_nonfinite) {
    if (!in.defined() || in.numel() == 0) {
        if (rows_nonfinite) rows_nonfinite->assign(in.defined() && in.dim() > 0 ? size_t(in.size(0)) : 0, 0);
        return {};
    }
    const at::Tensor t = host_values(in);
    switch (t.scalar_type()) {
        case at::kHalf: return stats_typed<at::Half>(t, rows_nonfinite);
        case at::kBFloat16: return stats_typed<at::BFloat16>(t, rows_nonfinite);
        default: return stats_typed<float>(t, rows_nonfinite);
    }
}

}  // namespace ampscope::detail
