// SPDX-License-Identifier: MIT
#pragma once
/// \file train.h
/// Reference FP32 training and AMP training side by side, with a faithful C++ port of
/// torch.amp.GradScaler, per-step records, isolation modes, checkpoints and resume.

#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ampscope/engine/fp8.h"
#include "ampscope/engine/run.h"
#include "ampscope/engine/types.h"
#include "ampscope/engine/vocabulary.h"

namespace ampscope {

/// torch.amp.GradScaler's constructor parameters, with its defaults.
struct ScalerOptions {
    double init_scale = 65536.0;
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int growth_interval = 2000;
    bool enabled = true;
};

/// What `state_dict()` holds (PyTorch's keys: scale, growth_factor, backoff_factor,
/// growth_interval, _growth_tracker).
struct ScalerState {
    double scale = 65536.0;
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int growth_interval = 2000;
    int growth_tracker = 0;
};

/// The C++ port of torch.amp.GradScaler (CPU and CUDA), over plain parameter lists so that
/// its header needs no LibTorch: tensors stay behind the pimpl.
class GradScaler {
public:
    explicit GradScaler(const std::string& device = "cpu", ScalerOptions o = {});
    ~GradScaler();
    GradScaler(GradScaler&&) noexcept;
    GradScaler& operator=(GradScaler&&) noexcept;
    bool enabled() const;
    double get_scale() const;  ///< 1.0 when disabled, as PyTorch
    int growth_tracker() const;
    ScalerState state_dict() const;
    void load_state_dict(const ScalerState& s);

    struct Impl;
    Impl& impl() { return *d_; }

private:
    std::unique_ptr<Impl> d_;
};

/// The precisions `train` runs, in the order the training dialog offers them: autocast FP16 or
/// BF16, torchao's float8 training recipes tensorwise (fp8) and rowwise (fp8-rowwise), torchao's
/// MXFP8 training linear (mxfp8), NVIDIA's NVFP4 training recipe (nvfp4) and Transformer
/// Engine's delayed scaling (fp8-delayed), simulated (every linear layer's GEMMs in FP8 or FP4,
/// the rest in BF16 autocast).
inline constexpr Precision kTrainingPrecisions[] = {Precision::Fp16,       Precision::Bf16,  Precision::Fp8,
                                                    Precision::Fp8Rowwise, Precision::Mxfp8, Precision::Nvfp4,
                                                    Precision::Fp8Delayed};
/// The precisions `replay` runs a job in: what its own trainer used, fp16, bf16, or torchao's
/// fp8 / fp8-rowwise / mxfp8 (a Transformer Engine job's delayed-scaling state is not read from
/// its checkpoints, nor torchao's NVFP4 linears' sign vectors and seeds, so fp8-delayed and nvfp4
/// train with `train` only).
inline constexpr Precision kReplayPrecisions[] = {Precision::Fp16, Precision::Bf16, Precision::Fp8,
                                                  Precision::Fp8Rowwise, Precision::Mxfp8};

/// Whether `p` is among `list` (kTrainingPrecisions, kReplayPrecisions).
template <size_t N>
bool listed_in(const Precision (&list)[N], Precision p) {
    return std::find(std::begin(list), std::end(list), p) != std::end(list);
}
/// Whether `train` runs precision `p`.
inline bool trains(Precision p) {
    return listed_in(kTrainingPrecisions, p);
}
/// Whether `replay` runs precision `p`.
inline bool replays(Precision p) {
    return listed_in(kReplayPrecisions, p);
}

/// A list's names as a message gives them: "fp16, bf16, ... or fp8-delayed".
template <size_t N>
std::string precisions_listed(const Precision (&list)[N]) {
    std::string out;
    for (size_t i = 0; i < N; ++i) out += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + to_string(list[i]);
    return out;
}
inline std::string training_precisions_listed() {
    return precisions_listed(kTrainingPrecisions);
}

/// A training run (`ampscope-cli train`).
struct TrainSpec {
    std::string model = "demo:transformer";
    std::string data = "demo";  ///< "demo" or a .pt/.csv with labels or targets
    std::string output;         ///< the output the loss reads (as Criteria::output)
    int steps = 50;             ///< optimizer iterations
    int batch_size = 16;
    LossKind loss = LossKind::Auto;                ///< Auto: ce with labels, lm with token labels, mse with targets
    OptimizerKind optimizer = OptimizerKind::Sgd;  ///< stored and shown by its name (vocabulary.h)
    double lr = 0.05, momentum = 0.0, weight_decay = 0.0;
    Precision precision = Precision::Fp16;
    bool autocast = true;                           ///< false: FP32 compute (isolation "scaler only")
    ScalerOptions scaler;                           ///< scaler.enabled false: isolation "autocast only"
    double clip_grad_norm = 0;                      ///< 0 = off; applied after unscale_
    int accumulate = 1;                             ///< micro-batches per optimizer step
    LrSchedule lr_schedule = LrSchedule::Constant;  ///< stored and shown by its name (vocabulary.h)
    bool lr_per_iteration = false;                  ///< schedule follows iterations instead of effective updates
    int checkpoint_every = 0;
    std::string checkpoint_dir = ".";
    std::string resume;  ///< checkpoint file to resume from
    std::vector<std::string> keep_fp32;
    /// FP8 recipes: module-path globs whose linear layers stay in BF16 autocast, out of FP8
    /// (torchao's module_filter_fn; Transformer Engine's modules left unconverted).
    std::vector<std::string> keep_bf16;
    /// mxfp8: how each block's E8M0 scale is chosen; RCEIL as torchao's MXFP8Linear and its MXFP8
    /// training recipes (the probe passes take the OCP specification's FLOOR).
    MxScaling mx_scaling = MxScaling::Rceil;
    /// fp8-delayed: Transformer Engine's amax_history_len and margin (as RunSpec's); the
    /// histories carry over the steps and are kept in checkpoints.
    int fp8_amax_history = 1024;
    int fp8_margin = 0;
    /// fp8-delayed with accumulate > 1: the micro-batches after a step's first reuse the FP8
    /// weights that first one cast (their amaxes not recorded again), as Transformer Engine's
    /// modules do when given is_first_microbatch (Megatron-LM passes it).
    bool fp8_weight_cache = false;
    /// fp8, fp8-rowwise, mxfp8, fp8-delayed: the model's own matrix products (addmm, mm, bmm,
    /// baddbmm, torch.matmul) quantized too, forward and backward, each as the recipe's linear of
    /// weight mat2^T; and its convolutions in fp8 and fp8-delayed (RunSpec::fp8_all_gemms).
    bool fp8_all_gemms = false;
    /// fp8-rowwise as torchao's recipe "rowwise_with_gw_hp": grad_output rowwise E4M3 with the weight
    /// tensorwise (a power-of-two scale) for grad_input, the weight gradient's GEMM in high precision
    /// (BF16 operands, torchao's grad_output and input unquantized).
    bool rowwise_gw_hp = false;
    uint64_t seed = 0;
    std::string device;
    bool guards = true;  ///< per-step finiteness checks and origins (intrusive: host syncs)
};

struct TrainStep {
    int step = 0;
    double loss_ref = 0, loss_amp = 0;
    double scale = 1.0;  ///< the scale this step's loss was multiplied by
    bool found_inf = false, skipped = false;
    int effective_updates = 0;  ///< after this step
    double grad_norm = 0;       ///< of the unscaled AMP gradients (inf/nan when not finite)
    double lr = 0;
    double divergence = 0;  ///< ||w_amp - w_ref|| / ||w_ref||
    /// Gradient elements lost to underflow: zero in the AMP gradient (after unscaling) where
    /// the FP32 reference's is not (guards on; -1 when not measured).
    int64_t grad_underflow = -1;
    /// GradScaler's growth tracker after this step's update (-1 without a scaler).
    int growth_tracker = -1;
    /// fp8-delayed: elements of this step's FP8 casts (every linear's input and weight, forward;
    /// grad_output, backward) that lay beyond the range of the stale scale their amax history
    /// gave, clamped to the format's largest value (-1 for other precisions); and the first
    /// tensor that did, "module/input" | "module/weight" | "module/grad_output" ("" when none).
    int64_t fp8_saturated = -1;
    std::string fp8_saturated_at;
    std::string nonfinite_stage;  ///< "" | input | forward | loss | gradient
    std::optional<Origin> origin;
};

struct TrainResult {
    std::string run_id;
    TrainSpec spec;
    BackendReport backend;
    ModelInfo model;
    std::string started_at, finished_at;
    std::vector<TrainStep> steps;
    int iterations = 0, effective_updates = 0, skipped = 0;
    double final_scale = 1.0;
    std::vector<std::string> checkpoints;
    std::string resumed_from;
    bool policy_changed = false;  ///< resumed under another precision policy: an experiment change
    std::vector<std::string> warnings;
};

/// Receives each step as it is produced.
class TrainSink {
public:
    virtual ~TrainSink() = default;
    virtual void train_started(const TrainResult& header) { (void)header; }
    virtual void step_finished(const TrainStep& s) { (void)s; }
    virtual void checkpoint_written(const std::string& path, int step) {
        (void)path;
        (void)step;
    }
    virtual void train_finished(const TrainResult& r) { (void)r; }
    virtual void train_failed(const std::string& status, const std::string& message) {
        (void)status;
        (void)message;
    }
};

TrainResult run_training(const TrainSpec& spec, TrainSink* sink = nullptr, ProgressObserver* progress = nullptr);

}  // namespace ampscope
