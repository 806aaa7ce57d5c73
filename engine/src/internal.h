// SPDX-License-Identifier: MIT
#pragma once
// Engine-internal interfaces between the LibTorch translation units. Never installed,
// never included outside engine/src and engine tests.

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ampscope/engine/run.h"
#include "ampscope/engine/types.h"

namespace ampscope::detail {

/// A model as the passes see it: forward on a batch, mode, device, named state.
class Model {
public:
    virtual ~Model() = default;
    virtual at::Tensor forward(const std::vector<at::Tensor>& inputs) = 0;
    virtual void set_train(bool train) = 0;
    virtual void to_device(const at::Device& device) = 0;
    /// Parameters and buffers in named order (for hashing and checkpoints).
    virtual std::vector<std::pair<std::string, at::Tensor>> named_state() = 0;
    virtual std::vector<at::Tensor> parameters() = 0;
    virtual std::vector<std::string> module_paths() = 0;
    /// Whether FP32 regions and per-module op attribution work for this model.
    virtual bool has_module_scopes() const = 0;

    ModelInfo info;
    /// Expected per-sample input shapes (without the batch dim); empty when unknown.
    std::vector<std::vector<int64_t>> input_shapes;
    int num_outputs = 0;  ///< 0 when unknown before a forward
    /// Names of forward's inputs (TorchScript schema; empty when fixed by input_shapes) and
    /// how many of them have no default.
    std::vector<std::string> input_names;
    size_t required_inputs = 0;
};

/// Loads "demo:NAME" (seeded weights) or a TorchScript file. Throws InputError.
std::unique_ptr<Model> load_model(const std::string& source, uint64_t seed);

/// A probe set in memory, on the CPU, float32.
struct ProbeSet {
    std::vector<at::Tensor> inputs;  ///< each [N, ...]
    std::vector<SampleInfo> samples;
    std::vector<int64_t> labels;     ///< N or empty
    std::vector<float> targets;      ///< N x target_width or empty
    int target_width = 0;
    ProbeInfo info;
};

/// Loads "demo" (the model's built-in set) or a .pt / .csv file and checks it against the
/// model's expected input shapes. Throws InputError naming the file and field.
ProbeSet load_probes(const std::string& source, Model& model, uint64_t seed);

/// Reads a probe-format file (.pt written by torch.save, or .csv) without a model: every
/// tensor checked against the data the file holds, dtypes, labels, ids (unique, non-empty,
/// UTF-8) validated. Throws InputError naming the file and field. (Fuzzed: tests/fuzz.)
ProbeSet read_probe_file(const std::string& path);

/// A torch.save archive read with every record size checked against the file.
struct PtArchive {
    c10::IValue root;
    std::map<const void*, size_t> record_bytes;  ///< storage data pointer -> bytes in the file
    /// Bytes the file holds for this tensor's storage (0 when it came from no record).
    size_t bytes_for(const at::Tensor& t) const;
};
/// Unpickles a torch.save zip archive. Throws InputError naming the file.
PtArchive read_pt_archive(const std::vector<char>& bytes, const std::string& file);
/// Checks a loaded tensor against the bytes its file holds: storage size, sizes, strides,
/// offset (overflow-safe), and no more elements than stored. Throws InputError.
void check_tensor_fits(const at::Tensor& t, size_t record_bytes, const std::string& file, const std::string& field);

/// Training data: "demo" (a learnable set for the demo model, in file order) or a probe-format
/// file with labels or targets.
ProbeSet load_training_data(const std::string& source, Model& model, uint64_t seed);

/// FP32 regions (--keep-fp32) against the model's module paths: each glob non-empty, matching
/// at least one module and not the root (which would run the whole model in FP32).
void check_fp32_regions(Model& model, const std::vector<std::string>& globs);

/// Labels and targets of a probe or training set against the scores the model gives.
void check_outputs_fit(const ProbeSet& probes, const std::string& file, int num_outputs);

/// Whether `path` matches any of the globs (fnmatch; '*' also crosses dots).
bool matches_any(const std::string& path, const std::vector<std::string>& globs);

// ---- module scopes (demo models) and FP32 regions -------------------------------------

/// Thread-local state of the running pass: module-path stack and FP32 regions.
struct PassContext {
    std::vector<std::string> scope;           ///< innermost last
    std::vector<std::string> keep_fp32;       ///< globs
    std::vector<std::string> regions_hit;     ///< module paths that ran in FP32
    at::DeviceType device_type = at::kCPU;
    bool observing = false;  ///< an OpObserver is active (TorchScript then runs instrumented)
};
PassContext& pass_context();

/// Enters a module scope: pushes its path and, when the path is an FP32 region and
/// autocast is on, turns autocast off for the scope (restored on exit).
class ModuleScope {
public:
    explicit ModuleScope(const std::string& path);
    ~ModuleScope();
    ModuleScope(const ModuleScope&) = delete;
    ModuleScope& operator=(const ModuleScope&) = delete;
    /// True when this scope runs without autocast (inputs must be cast to FP32).
    bool fp32() const { return fp32_; }

private:
    bool fp32_ = false;
    bool prev_enabled_ = false;
};

/// Calls fn(x) inside the module scope `path`, casting a floating input to FP32 when the
/// scope is an FP32 region (as torch.autocast(enabled=False) plus an explicit cast).
at::Tensor scoped(const std::string& path, const at::Tensor& x,
                  const std::function<at::Tensor(const at::Tensor&)>& fn);

// ---- passes (passes.cpp) ----------------------------------------------------------------

at::ScalarType dtype_of(Precision p);
/// The informative line of an error (TorchScript wraps the real message after a traceback).
std::string first_line(const std::string& s);
/// "cpu" | "cuda" | "cuda:N"; InputError when malformed or absent.
at::Device parse_device(const std::string& d);

/// RAII autocast region, as Python's torch.autocast(device, dtype, enabled) does it:
/// saves enabled/dtype/cache flag, increments nesting, and on exit clears the cast cache
/// when the outermost region ends, then restores the previous state.
class AutocastGuard {
public:
    AutocastGuard(at::DeviceType dt, Precision p) : dt_(dt) {
        prev_enabled_ = at::autocast::is_autocast_enabled(dt_);
        prev_dtype_ = at::autocast::get_autocast_dtype(dt_);
        prev_cache_ = at::autocast::is_autocast_cache_enabled();
        const bool enable = p != Precision::Fp32;
        if (enable) at::autocast::set_autocast_dtype(dt_, dtype_of(p));
        at::autocast::set_autocast_enabled(dt_, enable);
        at::autocast::increment_nesting();
        at::autocast::set_autocast_cache_enabled(true);
    }
    ~AutocastGuard() {
        if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
        at::autocast::set_autocast_enabled(dt_, prev_enabled_);
        at::autocast::set_autocast_dtype(dt_, prev_dtype_);
        at::autocast::set_autocast_cache_enabled(prev_cache_);
    }
    AutocastGuard(const AutocastGuard&) = delete;
    AutocastGuard& operator=(const AutocastGuard&) = delete;

private:
    at::DeviceType dt_;
    bool prev_enabled_ = false, prev_cache_ = true;
    at::ScalarType prev_dtype_ = at::kFloat;
};


/// One pass over the probe set (passes.cpp).
struct PassOptions {
    Precision precision = Precision::Fp32;
    std::vector<std::string> keep_fp32;
    bool train = false;
    uint64_t seed = 0;
    int batch_size = 64;
    bool inspect = true;
    /// When given: set to true if the model changed its input tensors in place (each pass
    /// gets its own copies, so this only warns).
    bool* inputs_mutated = nullptr;
};

PassResult run_pass(Model& model, const ProbeSet& probes, const at::Device& device, const PassOptions& o,
                    ProgressObserver* progress, bool first_pass);

// ---- inspection (inspect.cpp) ---------------------------------------------------------

/// Fused single-pass statistics of a tensor (any floating dtype, CPU); rows_nonfinite,
/// when given, receives per-row (dim 0) non-finite counts.
TensorStats tensor_stats(const at::Tensor& t, std::vector<int64_t>* rows_nonfinite = nullptr);

/// Observes every top-level op of the passes run while it is alive (this thread only).
/// Whether a tensor holds a NaN or Inf (one counting pass; no other statistics).
bool any_nonfinite(const at::Tensor& t);
/// Ops that only re-view or copy existing values (they cannot create non-finite values).
bool is_view_op(const std::string& name);
/// The defined floating-point tensors among op arguments or results (tensors, tensor lists).
template <class Values>
std::vector<at::Tensor> floating_tensors(const Values& values) {
    std::vector<at::Tensor> out;
    auto add = [&out](const at::Tensor& t) { if (t.defined() && t.is_floating_point()) out.push_back(t); };
    for (const auto& v : values) {
        if (v.isTensor()) add(v.toTensor());
        else if (v.isTensorList())
            for (const auto& t : v.toTensorVector()) add(t);
    }
    return out;
}

/// Finds where a backward pass first produces NaN/Inf: the first ATen op, in backward
/// execution order, whose inputs are finite and whose output is not, inside which autograd
/// node, and the forward module that node belongs to (matched by autograd sequence number).
/// Intrusive (reads every backward op's output): used for diagnostic re-runs only.
class BackwardProbe {
public:
    BackwardProbe();
    ~BackwardProbe();
    BackwardProbe(const BackwardProbe&) = delete;
    BackwardProbe& operator=(const BackwardProbe&) = delete;
    /// Forward phase: records which module and op each autograd sequence number comes from.
    void forward_phase();
    /// Backward phase: looks for the origin.
    void backward_phase();
    void stop();
    std::optional<Origin> origin() const;
    struct State;

private:
    std::unique_ptr<State> s_;
    uint64_t handle_ = 0;
};

/// On CUDA devices the observer accumulates statistics in device memory and reads them back
/// once, after the pass (default); off, it copies each op output to the host (tests compare both).
/// Builds without a kernel for the device (see gpu/device_notes.h) always copy, and say so.
void set_device_statistics(bool on);

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

    struct State;

private:
    std::unique_ptr<State> s_;
    uint64_t handle_ = 0;
};

}  // namespace ampscope::detail
