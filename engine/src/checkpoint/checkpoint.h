// SPDX-License-Identifier: MIT
#pragma once
// checkpoint/ reads the training state users' own Python code wrote (engine-internal):
// weights and buffers (torch.save state_dict, dicts with model/optimizer/scaler, Lightning
// .ckpt, Hugging Face Trainer checkpoint-N/ folders, .safetensors), torch.optim state dicts
// (SGD, Adam, AdamW) and torch.amp.GradScaler state; and replays torch.optim's single-tensor
// update arithmetic on them (optim.cpp), so a replayed step matches PyTorch's bitwise.

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ampscope/engine/train.h"

namespace ampscope::detail::ckpt {

struct OptimizerGroup {
    double lr = 1e-3, weight_decay = 0, eps = 1e-8, beta1 = 0.9, beta2 = 0.999;
    double momentum = 0, dampening = 0;
    bool amsgrad = false, maximize = false, nesterov = false, decoupled = false;
    std::vector<int64_t> params;  ///< indices into the model's parameters, in their order
};

struct ParamState {
    at::Tensor exp_avg, exp_avg_sq, max_exp_avg_sq, momentum_buffer;
    at::Tensor step;  ///< 0-dim float32 (Adam), as PyTorch 2.x keeps it
};

/// A torch.optim state_dict(): kind sgd | adam | adamw, groups and per-parameter state.
struct OptimizerState {
    std::string kind;
    std::vector<OptimizerGroup> groups;
    std::map<int64_t, ParamState> state;
    std::vector<std::string> notes;  ///< e.g. foreach/fused groups replayed single-tensor
};

/// What a checkpoint holds once read.
struct Checkpoint {
    std::string format;  ///< state_dict | dict | lightning | hf-trainer | safetensors
    std::vector<std::pair<std::string, at::Tensor>> weights;
    std::optional<OptimizerState> optimizer;
    std::optional<ScalerState> scaler;
    bool scaler_disabled = false;    ///< the file held `{}`: GradScaler(enabled=False)
    std::vector<std::string> files;  ///< every file read, in order (hashed by the run record)
    std::vector<std::string> warnings;
};

/// Reads a checkpoint file or Trainer folder; `strip_prefix` is removed from weight names
/// that start with it (Lightning's `model.`). Throws InputError naming the file and key.
Checkpoint load_checkpoint(const std::string& path, const std::string& strip_prefix);

/// A torch.optim state_dict() (from a file's `optimizer` entry, optimizer.pt, ...).
OptimizerState read_optimizer(const c10::IValue& v, const std::string& file, const std::string& field);
/// torch.amp.GradScaler.state_dict(); nullopt for `{}` (a disabled scaler).
std::optional<ScalerState> read_scaler(const c10::IValue& v, const std::string& file, const std::string& field);
/// Reads a separate --optimizer-state / --scaler-state file (a torch.save of the state dict).
c10::IValue read_pt_root(const std::string& path, std::vector<std::string>* warnings);

/// Names matched against the model's named state.
struct Match {
    std::vector<std::string> missing, unexpected, mismatched;  ///< mismatched: "name: why"
    bool clean() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
};
/// Copies the checkpoint's weights into `state` (the model's named_state()) by name; what does
/// not match is listed (nothing mismatched is copied). Non-persistent buffers are not in a
/// state_dict: not missing, and a checkpoint key naming one is unexpected and not loaded, as
/// load_state_dict does.
Match apply_weights(const Checkpoint& c, const std::vector<std::pair<std::string, at::Tensor>>& state,
                    const std::set<std::string>& non_persistent = {});

/// The optimizer's groups and state checked against the model's trainable parameters (count,
/// order, shapes); InputError naming the file and field.
void check_optimizer(const OptimizerState& o, const std::vector<at::Tensor>& params, const std::vector<std::string>& names,
                     const std::string& file);

/// torch.optim's single-tensor step (SGD, Adam, AdamW) on the parameters with gradients,
/// with PyTorch's arithmetic in PyTorch's order.
void optimizer_step(OptimizerState& o, const std::vector<at::Tensor>& params);

}  // namespace ampscope::detail::ckpt
