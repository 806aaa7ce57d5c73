// SPDX-License-Identifier: MIT
#pragma once
// Engine-internal pieces of the training session shared by session.cpp and checkpoint.cpp.

#include <torch/optim.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ampscope/engine/train.h"
#include "precision/fp8_pass.h"
#include "precision/gradscaler.h"
#include "model/model.h"
#include "probes/probes.h"

namespace ampscope::train_parts {

/// One side of the side-by-side run (FP32 reference or AMP): model, parameters, buffers, optimizer.
struct Side {
    std::unique_ptr<detail::Model> model;
    std::vector<at::Tensor> params;
    std::vector<std::string> names;
    std::vector<std::pair<std::string, at::Tensor>> buffers;  ///< e.g. BatchNorm running statistics
    std::unique_ptr<torch::optim::Optimizer> opt;
};

/// Where a run stands between steps.
struct Position {
    int step = 0, effective = 0;
    int64_t cursor = -1;  ///< first sample of the next batch (-1: not recorded, older checkpoints)
};

struct Resumed {
    int step = 0, effective = 0;
    int64_t cursor = -1;
    bool policy_changed = false;
    std::string policy;   ///< the checkpoint's precision policy (policy_string)
    std::string warning;  ///< what the resumed run cannot continue as it was ("" when nothing)
};

/// One side of a training or replay session: the model loaded in train mode on `device`, its
/// trainable parameters (requires_grad) and its buffers, by name.
Side load_side(const std::string& model, uint64_t seed, const std::string& output, const at::Device& device);

/// With a GradScaler, FP16 trainable parameters are refused before any step (InputError naming
/// `file`), as PyTorch's GradScaler refuses to unscale FP16 gradients, with the remedy.
void check_scaled_params(const Side& side, bool scaler_enabled, const std::string& file);

/// ||w_amp - w_ref||^2 and ||w_ref||^2 on the device (read with the step's other figures).
std::pair<at::Tensor, at::Tensor> divergence_terms(const Side& a, const Side& ref);
/// ||w_amp - w_ref|| / ||w_ref||: NaN when either side's weights are not finite (never 0 for a
/// broken reference), inf when the reference weights are all zero and the AMP ones are not.
double divergence(double num, double den);
/// Whether the FP32 reference side has non-finite weights (after its step).
bool reference_broken(const Side& ref);
/// The step's data as the origin of its non-finite values: an input tensor (of a micro-batch
/// starting at row `first_row` of the data file) holding NaN/Inf, its rows named ("row 13");
/// nullopt when every floating input is finite.
std::optional<Origin> nonfinite_input_origin(const std::vector<at::Tensor>& inputs, int64_t first_row);

/// torch::manual_seed(seed), unless a generator state was registered for `seed` (RngStates):
/// then the CPU (and CUDA) generators are set to that state. Every forward of the sessions and
/// of the replay seeds through here, so a replay can run the job's own generator state.
void reseed(uint64_t seed);

/// While alive, reseed(seed) restores these generator states instead of seeding (a replay of a
/// checkpoint that saved the job's RNG state). One at a time.
class RngStates {
public:
    RngStates() = default;
    ~RngStates();
    RngStates(const RngStates&) = delete;
    RngStates& operator=(const RngStates&) = delete;
    void set(uint64_t seed, const at::Tensor& cpu, const std::vector<at::Tensor>& cuda);
};

/// The precision policy as one string (checkpoints compare it on resume).
std::string policy_string(const TrainSpec& s);

/// Both models (parameters and buffers), both optimizers, the scaler, RNG (CPU, and CUDA on a
/// GPU), counters, data cursor and policy; written to PATH.partial and renamed.
/// fp8-delayed's state across the steps (none for other precisions, or without autocast), and the
/// run's warning when a GradScaler scales the gradients it casts (checkpoint.cpp).
std::optional<detail::DelayedTraining> delayed_training_of(const TrainSpec& s, TrainResult& res);

/// fp8-delayed (`delayed` not null): every FP8 tensor's amax history, scale and step count.
void save_checkpoint(const std::string& path, const TrainSpec& s, Side& ref, Side& amp, GradScaler& scaler,
                     const detail::DelayedTraining* delayed, const Position& pos, const std::string& weights_hash,
                     const at::Device& device);

/// Every numeric option checked before anything runs (PyTorch's optimizers and GradScaler
/// assert the same ranges), the learning-rate schedule's name, and the checkpoint directory
/// before the first step (InputError naming the field).
void validate_spec(const TrainSpec& s);

/// The loss: s.loss, else ce for class labels, lm for token labels [N, T], mse for targets;
/// checked against the data (InputError naming s.data). Shared by training and replay.
void choose_loss(TrainSpec& s, const detail::ProbeSet& data);
/// The session's loss (s.loss: ce | mse | lm | model) of a forward's output over samples [b, e) of `data`.
at::Tensor training_loss(const TrainSpec& s, const at::Tensor& out, const detail::ProbeSet& data, int64_t b, int64_t e,
                         const at::Device& device);
/// The session's diagnostic re-runs for one batch (the whole of `inputs`, seeded with `seed`),
/// before any weight changes: the forward op where NaN/Inf is born (the observer), and the
/// backward op where the scaled loss's gradients first turn non-finite (the backward probe).
std::optional<Origin> amp_forward_origin(Side& amp, const std::vector<at::Tensor>& inputs, uint64_t seed,
                                         const TrainSpec& s, const at::Device& device);
std::optional<Origin> amp_backward_origin(Side& amp, const std::vector<at::Tensor>& inputs, uint64_t seed,
                                          const detail::ProbeSet& data, const TrainSpec& s, const at::Device& device,
                                          GradScaler& scaler);

/// Restores what save_checkpoint wrote; InputError naming the file and key.
/// fp8-delayed (`delayed` not null): the histories restored; a checkpoint of another precision
/// has none, and the run starts them empty (Resumed::warning says so).
Resumed load_checkpoint(const std::string& path, const TrainSpec& s, Side& ref, Side& amp, GradScaler& scaler,
                        detail::DelayedTraining* delayed, const at::Device& device);

/// After a resumed run's first step under fp8-delayed: warnings naming the checkpoint's histories
/// the model did not cast and the tensors it cast without one (DelayedTraining::restored); the
/// tracking then stops.
void delayed_resume_warnings(detail::DelayedTraining& d, bool policy_changed, std::vector<std::string>& warnings);

}  // namespace ampscope::train_parts
