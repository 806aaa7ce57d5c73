// SPDX-License-Identifier: MIT
#pragma once
/// \file run.h
/// Running a comparison: RunSpec in, RunResult out, results reported through RunSink as
/// they are produced, progress and cancellation through ProgressObserver.

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ampscope/engine/fp8.h"
#include "ampscope/engine/types.h"

namespace ampscope {

/// The longest fp8-delayed amax history a run takes (batches) and the largest margin (a power of
/// two below FP32's normal range would make every scale 0).
constexpr int kMaxAmaxHistory = 1 << 20;
constexpr int kMaxFp8Margin = 100;

/// Everything that fixes a run. Passes differ only in precision policy.
/// Whether an fp8 / fp8-rowwise pass is also run with real FP8 GEMMs (torch._scaled_mm): Auto on
/// a CUDA device with FP8 (compute capability >= 8.9), On wherever PyTorch has the kernel, Off
/// never. Its names: vocabulary.h.
enum class RealGemm { Auto, On, Off };

struct RunSpec {
    std::string model = "demo:transformer";  ///< "demo:NAME", a TorchScript file or a torch.export program
    std::string probes = "demo";             ///< "demo" or a .pt / .csv file
    std::vector<Precision> precisions = {Precision::Fp16, Precision::Bf16};
    std::string device;  ///< "" = cuda when available, else cpu
    Mode mode = Mode::Eval;
    Criteria criteria;
    std::vector<std::string> keep_fp32;  ///< module-path globs run without autocast
    /// FP8 passes: module-path globs whose linear layers stay in BF16 autocast, not quantized
    /// (torchao's module_filter_fn leaving them out); needs an FP8 precision.
    std::vector<std::string> keep_bf16;
    uint64_t seed = 0;
    int batch_size = 64;
    bool inspect = true;  ///< per-op statistics and origins
    /// fp8-delayed (Transformer Engine's DelayedScaling): the amax history's length in batches
    /// (its amax_history_len) and the margin (scale = fmax / amax / 2^margin); TE's defaults.
    int fp8_amax_history = 1024;  ///< 1 .. kMaxAmaxHistory
    int fp8_margin = 0;           ///< 0 .. kMaxFp8Margin
    /// The BF16 pass also gathers, on its own linear layers' operands, the statistics each
    /// current-scaling FP8 recipe (fp8, fp8-rowwise, mxfp8, nvfp4) would give (its outputs
    /// unchanged): PassResult::fp8_operands of that pass, one entry per module, operand and
    /// recipe. Needs a bf16 pass and inspection.
    bool fp8_what_if = false;
    /// fp8 / fp8-rowwise passes also run with real FP8 GEMMs (PassResult::real_gemm): Auto on a
    /// CUDA device with FP8 (compute capability >= 8.9), On wherever PyTorch has the kernel (the
    /// CPU's _scaled_mm takes tensorwise scales only), Off never.
    RealGemm fp8_real_gemm = RealGemm::Auto;
    /// mxfp8 passes and the what-if's MX statistics: each block's E8M0 scale, the OCP MX
    /// specification's FLOOR by default, or RCEIL as torchao's MXFP8 training recipes take it.
    MxScaling mx_scaling = MxScaling::Floor;
    /// FP8 passes also quantize the model's own matrix products (addmm, mm, bmm, baddbmm outside
    /// linear layers: transformers' Conv1D, attention's batched products), each operand as the
    /// recipe quantizes a linear's, and the what-if gathers their statistics (Fp8AllGemmsScope);
    /// off: linear layers only, as torchao and Transformer Engine. Needs an FP8 pass or the what-if.
    bool fp8_all_gemms = false;
    /// The run this one verifies (ampscope-cli advise: the rejected run whose FP32 set it checks).
    std::string advised_from;

    /// Whether the run has a pass of precision p.
    bool has_pass(Precision p) const {
        for (auto x : precisions)
            if (x == p) return true;
        return false;
    }
};

struct ModelInfo {
    std::string source;  ///< as given ("demo:transformer", a path)
    std::string kind;    ///< "demo" | "torchscript" | "torch.export"
    std::string format;  ///< torch.export: schema version, IR kind (e.g. "torch.export schema 8.17, IR TRAINING")
    std::string sha256;  ///< of the file (TorchScript) or of the weights (demo)
    std::string weights_sha256;  ///< of the parameters and buffers, in named order
    std::string mode = "eval";
    int64_t parameters = 0;
    std::vector<std::string> modules;  ///< dotted paths, as named_modules() gives
};

struct ProbeInfo {
    std::string source;
    std::string sha256;
    int count = 0;
    std::map<std::string, int> tags;
    std::vector<std::vector<int64_t>> input_shapes;  ///< per input, without the batch dim
    bool has_labels = false, has_targets = false;
    int label_width = 0;  ///< token labels [N, T]: T; 0 = one class label per sample
};

/// One rank of a run launched under torchrun (docs/distributed.md): which samples it ran, where,
/// and how long its passes took. A single-process run has none.
struct RankInfo {
    int rank = 0;
    std::string host;      ///< the rank's host name
    std::string device;    ///< "cpu" or "cuda:N" (cuda:LOCAL_RANK)
    int first_sample = 0;  ///< index of its first sample in the probe set
    int samples = 0;       ///< contiguous samples from first_sample
    double seconds = 0;    ///< wall time of all its passes
    int64_t bytes = 0;     ///< bytes of per-sample results it sent to rank 0 (0 for rank 0)
};

/// The whole record of one comparison run.
struct RunResult {
    std::string run_id;  ///< UUID
    std::string tool_version;
    std::string started_at, finished_at;
    RunSpec spec;
    Verdict verdict = Verdict::Accepted;
    Criteria criteria;  ///< as fixed before the first pass (with fixed_at)
    BackendReport backend;
    ModelInfo model;
    ProbeInfo probes;
    std::vector<SampleInfo> samples;
    std::vector<int64_t> labels;          ///< empty when none
    std::vector<float> targets;           ///< empty when none
    std::vector<PassResult> passes;       ///< passes[0] is the FP32 reference
    std::vector<Comparison> comparisons;  ///< one per AMP pass
    std::vector<std::string> warnings;
    /// Under torchrun: one entry per rank in rank order (their samples tile the probe set);
    /// empty for a single-process run.
    std::vector<RankInfo> ranks;
};

/// Receives results as they are produced (storage writes them durably; the GUI shows them).
class RunSink {
public:
    virtual ~RunSink() = default;
    /// Spec, criteria (already fixed), backend, model, probes and samples are known.
    virtual void run_started(const RunResult& header) { (void)header; }
    virtual void pass_finished(const PassResult& pass) { (void)pass; }
    virtual void comparison_finished(const Comparison& cmp) { (void)cmp; }
    virtual void run_finished(const RunResult& result) { (void)result; }
    /// status: "failed" or "cancelled".
    virtual void run_failed(const std::string& status, const std::string& message) {
        (void)status;
        (void)message;
    }
};

/// Named stages with a fraction done; a cancel flag checked between batches.
class ProgressObserver {
public:
    virtual ~ProgressObserver() = default;
    /// stage: e.g. "load model", "pass fp16"; done/total in that stage's units.
    virtual void progress(const std::string& stage, int done, int total) {
        (void)stage;
        (void)done;
        (void)total;
    }
    virtual bool cancel_requested() const { return cancel.load(std::memory_order_relaxed); }
    std::atomic<bool> cancel{false};
};

/// Runs the FP32 reference and the AMP passes of `spec` and compares them.
/// Throws InputError, ModelError, BackendError or Cancelled; the sink has been told
/// (run_failed) before the exception leaves, when the run had started.
RunResult run_comparison(const RunSpec& spec, RunSink* sink = nullptr, ProgressObserver* progress = nullptr);

/// Operator coverage of a model for a device and AMP dtype (`ampscope-cli ops`).
struct OpCoverage {
    std::string op;                         ///< ATen op with overload, e.g. "aten::add.Tensor"
    std::vector<std::string> modules;       ///< module paths where it runs
    int calls = 0;                          ///< calls in one forward
    std::vector<std::string> input_dtypes;  ///< floating input dtypes in the FP32 pass
    std::string amp_output_dtype;           ///< output dtype under autocast
    bool autocast_fp32 = false;             ///< autocast runs it in FP32 (fp32 policy or promotion)
    bool kernel_ok = true;                  ///< runs with its floating inputs in the target dtype
    std::string error;                      ///< why not, when kernel_ok is false
};

struct OpsReport {
    BackendReport backend;
    Precision precision = Precision::Fp16;
    std::string model;
    std::vector<OpCoverage> ops;
};

/// Runs one sample through the model in FP32 and under autocast, then calls every observed
/// op signature again with its floating inputs in the target dtype (autocast off) to see
/// whether the device has a kernel for it. Uses spec.model, .probes, .device, .seed and
/// spec.precisions[0].
OpsReport op_coverage(const RunSpec& spec);

/// Speed and memory of FP32 vs AMP passes (`ampscope-cli bench`): intrusive checks off.
struct BenchSpec {
    std::string model = "demo:transformer";
    std::string probes = "demo";
    std::string device;
    std::vector<Precision> precisions = {Precision::Fp16, Precision::Bf16};
    Mode mode = Mode::Eval;
    int batch_size = 64;
    int warmup = 5;
    int repeats = 30;
    uint64_t seed = 0;
    std::string output;  ///< the output timed against (as Criteria::output)
    bool train = false;  ///< time training steps (forward, loss, backward, SGD; GradScaler for fp16)
    /// Module-path globs the AMP passes run without autocast (as RunSpec::keep_fp32): the
    /// benchmarked policy must be the validated one, FP32 regions included.
    std::vector<std::string> keep_fp32;
};

struct BenchFigure {
    Precision precision = Precision::Fp32;
    double median_ms = 0, p10_ms = 0, p90_ms = 0;
    int64_t peak_bytes = 0;     ///< peak resident memory (CPU) or allocator peak (CUDA) during the timed loop
    double speedup = 1.0;       ///< FP32 median / this median
    double memory_ratio = 1.0;  ///< this peak / FP32 peak
};

struct BenchResult {
    BackendReport backend;
    ModelInfo model;
    ProbeInfo probes;
    int batch = 0;
    bool train = false;                ///< training steps rather than forwards
    std::string timer;                 ///< how time was taken
    std::string memory;                ///< how memory was taken
    std::vector<BenchFigure> figures;  ///< figures[0] is FP32
    /// The FP32 regions the timed AMP passes ran with: spec.keep_fp32 once the benchmark applies
    /// them. The CLI records no benchmark whose regions differ from the asked ones.
    std::vector<std::string> keep_fp32;
};

/// The identity a validation run must share with a benchmark: model and probe hashes and the
/// device the backend resolves to (loads model and probes, runs nothing).
struct RunInputs {
    ModelInfo model;
    ProbeInfo probes;
    BackendReport backend;
};
RunInputs identify_inputs(const std::string& model, const std::string& probes, const std::string& device,
                          uint64_t seed);

BenchResult run_benchmark(const BenchSpec& spec);

/// What would run on `device` ("" = default device). Throws InputError for a malformed
/// device string, BackendError for a device that is absent.
BackendReport backend_report(const std::string& device = "");

/// Names of the built-in demo models.
std::vector<std::string> demo_models();

/// ampscope's version string.
std::string version();

/// Current UTC time, ISO-8601 with milliseconds.
std::string now_iso8601();

/// A random (v4) UUID.
std::string make_uuid();

}  // namespace ampscope
