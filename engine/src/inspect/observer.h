// SPDX-License-Identifier: MIT
#pragma once
// inspect/ owns what is observed while a pass runs: the per-op observer (RecordFunction),
// the fused statistics kernels (CPU here and in stats_kernel.*, CUDA/HIP in gpu/), the first
// non-finite origin per sample, and the backward probe (backward_probe.h).

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ampscope/engine/types.h"

namespace ampscope::detail {

/// Fused single-pass statistics of a tensor (any floating dtype, CPU); rows_nonfinite,
/// when given, receives per-row (dim 0) non-finite counts.
TensorStats tensor_stats(const at::Tensor& t, std::vector<int64_t>* rows_nonfinite = nullptr);

/// Whether a tensor holds a NaN or Inf (one counting pass; no other statistics).
bool any_nonfinite(const at::Tensor& t);
/// The rows (dim 0) of `t` that hold a NaN or Inf and are not `seen` (seen rows are not
/// asked about): rows[r] is 1 for those, 0 for every other row. `nonfinite` is the tensor's
/// count of NaN and Inf (its statistics): when the seen rows are fewer and hold all of them,
/// the other rows are not read. Same answers as tensor_stats' per-row counts (> 0).
void new_nonfinite_rows(const at::Tensor& t, int64_t nonfinite, const std::vector<bool>& seen,
                        std::vector<int64_t>& rows);
/// Ops that only re-view or copy existing values (they cannot create non-finite values).
bool is_view_op(std::string_view name);
/// The defined floating-point tensors among op arguments or results (tensors, tensor lists).
template <class Values>
std::vector<at::Tensor> floating_tensors(const Values& values) {
    std::vector<at::Tensor> out;
    auto add = [&out](const at::Tensor& t) {
        if (t.defined() && t.is_floating_point()) out.push_back(t);
    };
    for (const auto& v : values) {
        if (v.isTensor())
            add(v.toTensor());
        else if (v.isTensorList())
            for (const auto& t : v.toTensorVector()) add(t);
    }
    return out;
}

/// On CUDA devices the observer accumulates statistics in device memory and reads them back
/// once, after the pass (default); off, it copies each op output to the host (tests compare both).
/// Builds without a kernel for the device (see gpu/device_notes.h) always copy, and say so.
void set_device_statistics(bool on);

/// Observes every top-level op of the passes run while it is alive (this thread only).
class OpObserver {
public:
    explicit OpObserver(int64_t batch_rows);
    ~OpObserver();
    /// Starts a new batch: op indices restart at 0; row offset for sample attribution.
    /// Ops run outside begin_batch/end_batch (input transfers, output copies) are ignored.
    void begin_batch(int64_t first_row, int64_t rows);
    void end_batch();
    /// Layers aggregated over batches, with origin flags.
    std::vector<LayerStat> layers() const;
    /// Origin per sample row: first op index whose inputs were finite and output was not.
    const std::vector<int>& row_origin() const;
    /// Statistics still on the device (every batch's slots, as one byte tensor there), for the
    /// pass to read back together with its outputs; undefined when there are none. Give the
    /// host copy to apply_device_bytes; else layers() reads them back itself (one copy).
    at::Tensor pending_device_bytes() const;
    void apply_device_bytes(const at::Tensor& host_bytes);

    /// Capture mode (operator coverage): keeps each top-level op's handle and a copy of its
    /// inputs, in call order, instead of statistics only.
    struct Captured {
        std::string op;  ///< name with overload
        std::string module;
        std::vector<c10::IValue> inputs;
        std::string output_dtype;
    };
    void set_capture(bool on);
    const std::vector<Captured>& captured() const;

    /// Module outputs (the advisor's sensitivity): for each of `modules` (disjoint subtrees),
    /// the floating output of the last op of every contiguous run of ops inside it, as an FP32
    /// host copy, in call order over all batches.
    void capture_module_outputs(const std::vector<std::string>& modules);
    std::map<std::string, std::vector<at::Tensor>> take_module_outputs();

    struct State;

private:
    std::unique_ptr<State> s_;
    uint64_t handle_ = 0;
};
}  // namespace ampscope::detail
