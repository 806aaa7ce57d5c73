// SPDX-License-Identifier: MIT
#pragma once
/// \file replay.h
/// Incident replay: the user's own checkpoint (weights, optimizer and GradScaler state) and
/// failing batch, replayed step by step as an FP32 reference and as the AMP job was configured,
/// naming the first stage that produced non-finite values.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"
#include "ampscope/engine/types.h"

namespace ampscope {

/// What an incident bundle (captured in the user's job) says happened there.
struct ReplayIncident {
    std::string bundle;     ///< the bundle folder
    std::string what;       ///< loss | grad | grad_norm | skip | spike
    std::string detail;     ///< the capture's own words
    std::string framework;  ///< pytorch | lightning | transformers (and version)
    int64_t step = 0, rank = 0, world_size = 1;
    std::vector<int64_t>
        origin_ranks;                ///< under torchrun (watch_ddp / watch_fsdp): the ranks it started on, else empty
    int64_t accumulation_steps = 1;  ///< micro-batches per optimizer step in the job (the bundle holds the last)
};

struct ReplaySpec {
    std::string model;                          ///< a TorchScript file, a torch.export program (.pt2) or demo:NAME
    std::string checkpoint;                     ///< a file or a Trainer checkpoint-N/ folder
    std::string batch;                          ///< a .pt dict: inputs and labels or targets
    LossKind loss = LossKind::Auto;             ///< Auto: ce with labels, lm with token labels, mse with targets
    std::string optimizer_state, scaler_state;  ///< separate files (override the checkpoint's)
    std::string strip_prefix;
    std::string output;  ///< as TrainSpec::output
    bool non_strict = false;
    int steps = 1;
    Precision precision = Precision::Fp16;
    std::vector<std::string> keep_fp32;
    /// FP8 recipes: modules whose linear layers stay in BF16 (the job's module_filter_fn, or a
    /// remedy: a module taken out of FP8).
    std::vector<std::string> keep_bf16;
    MxScaling mx_scaling = MxScaling::Rceil;  ///< mxfp8: the job's block scales (TrainSpec::mx_scaling)
    bool fp8_all_gemms = false;  ///< FP8 recipes: the model's own products quantized too (TrainSpec::fp8_all_gemms)
    bool rowwise_gw_hp = false;  ///< fp8-rowwise: the job's torchao recipe rowwise_with_gw_hp (TrainSpec's)
    std::optional<double> init_scale;    ///< remedy: another scale than the checkpoint's
    std::optional<int> growth_interval;  ///< remedy
    double clip_grad_norm = 0;  ///< the job's clipping norm, or a remedy: clip the unscaled gradients (0 = off)
    bool clip_given = false;    ///< --clip-grad-norm was given (0 included): no Trainer-clipping warning
    std::optional<OptimizerKind> optimizer_kind;  ///< --optimizer where the file cannot tell (none = the file's)
    std::string optimizer_kind_from;              ///< who told optimizer_kind, in messages ("" = --optimizer, as asked)
    std::string param_groups;                     ///< --param-groups FILE: parameter names per group (JSON)
    bool no_scaler = false;                       ///< --no-scaler: the job ran without GradScaler
    std::string device;
    uint64_t seed = 0;
    std::string original_run_id;             ///< a remedy: the replay run it remedies ("" = an original replay)
    std::optional<ReplayIncident> incident;  ///< replay BUNDLE: what the job saw
};

/// Where values first went non-finite.
struct ReplayStage {
    int step = 0;
    ReplayStageKind stage = ReplayStageKind::Checkpoint;  ///< stored and shown by its name (vocabulary.h)
    ReplaySide side = ReplaySide::Amp;                    ///< stored and shown by its name (vocabulary.h)
    std::string module, op, node;
};

/// Per parameter: how far the AMP step departs from the FP32 reference.
struct ReplayParam {
    std::string name;
    double grad_rel = 0;    ///< ||g_amp - g_ref|| / ||g_ref|| (unscaled AMP gradient)
    double update_rel = 0;  ///< ||Δw_amp - Δw_ref|| / ||Δw_ref||
    bool grad_finite = true, update_finite = true;
    std::string sha256_ref, sha256_amp;  ///< the parameter's bytes after the step
};

/// Per module: its output activations in the FP32 reference and the AMP forward of a step
/// (the statistics of the last op the module ran, as the observer records them).
struct ReplayLayer {
    std::string module, op;
    double ref_absmax = 0, amp_absmax = 0, ref_rms = 0, amp_rms = 0;
    int64_t amp_nonfinite = 0, amp_fp16_overflow = 0;
};

struct ReplayStep {
    int step = 0;
    double loss_ref = 0, loss_amp = 0;
    double scale = 1;  ///< the scale the AMP loss was multiplied by
    bool found_inf = false, skipped = false;
    double scale_after = 1;
    int growth_tracker = -1;
    std::vector<ReplayParam> params;
    std::vector<ReplayLayer> activations;
};

/// One of the optimizer's param groups as the replay read and stepped it.
struct ReplayOptimizerGroup {
    std::vector<std::string> params;  ///< the model's parameter names, in the group's order
    double lr = 0, weight_decay = 0, eps = 0, beta1 = 0, beta2 = 0, momentum = 0, dampening = 0;
    bool amsgrad = false, maximize = false, nesterov = false, fused = false, foreach = false, capturable = false;
    std::string implementation;  ///< single-tensor | fused (the kernels the step ran)
};

/// The optimizer as read: what it is, how that was told, how its indices met the model.
struct ReplayOptimizer {
    std::string kind;         ///< sgd | adam | adamw
    std::string kind_source;  ///< e.g. decoupled_weight_decay=True, --optimizer adamw (PyTorch <= 2.6 state)
    std::string mapping;      ///< param_names | groups-file | trainer-rule | model-order
    std::vector<ReplayOptimizerGroup> groups;
};

struct ReplayResult {
    std::string run_id, started_at, finished_at;
    ReplaySpec spec;
    std::string device;   ///< where it ran
    std::string backend;  ///< which backend ran it: "cpu" | "cuda" | "hip" (a ROCm device is called cuda too)
    std::string checkpoint_format, optimizer;
    std::string checkpoint_sha256, batch_sha256;
    bool scaler_enabled = true;
    ReplayOptimizer optimizer_groups;  ///< kind, groups with their hyper-parameters and flags
    std::string rng;                   ///< checkpoint (the job's generator state restored) | seed
    std::vector<std::string> missing, unexpected, mismatched;  ///< checkpoint keys vs the model
    std::optional<ReplayStage> first_nonfinite;
    std::vector<ReplayStep> steps;
    std::vector<std::string> warnings;
};

/// Replays the incident. Throws InputError (checkpoint, batch, state files, options; exit 2),
/// ModelError when the model fails.
ReplayResult run_replay(const ReplaySpec& spec, ProgressObserver* progress = nullptr);

/// The built-in demo incident (`ampscope --demo`): an FP16 job on demo:transformer (its seeded
/// weights, SGD, GradScaler at 1024) whose batch overflows FP16 in `embed`. Writes
/// `folder`/checkpoint.pt (model, optimizer, scaler) and `folder`/batch.pt as torch.save files,
/// creating the folder; returns the spec that replays them as the job ran (4 steps). Throws
/// InputError when the files cannot be written.
ReplaySpec demo_incident(const std::string& folder, uint64_t seed = 0);

}  // namespace ampscope
