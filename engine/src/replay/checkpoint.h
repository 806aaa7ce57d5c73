// SPDX-License-Identifier: MIT
#pragma once
// replay/ reads the training state users' own Python code wrote (engine-internal):
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
    bool fused = false, foreach = false, capturable = false;
    /// The file's own indices (state keys), in the group's order; after map_optimizer(): indices
    /// into the model's trainable parameters.
    std::vector<int64_t> params;
    /// `param_names` (an optimizer built from named_parameters(), PyTorch >= 2.6); empty when absent.
    std::vector<std::string> param_names;
};

struct ParamState {
    at::Tensor exp_avg, exp_avg_sq, max_exp_avg_sq, momentum_buffer;
    at::Tensor step;  ///< 0-dim float32 (Adam), as PyTorch 2.x keeps it
};

/// A torch.optim state_dict(): kind sgd | adam | adamw, groups and per-parameter state.
struct OptimizerState {
    std::string kind;
    /// How the kind was told: "decoupled_weight_decay=True", "optimizer adamw as asked", ... (recorded)
    std::string kind_source;
    /// How the file's indices were mapped to the model's parameters: param_names | groups-file |
    /// trainer-rule | model-order (recorded).
    std::string mapping;
    std::vector<OptimizerGroup> groups;
    std::map<int64_t, ParamState> state;
    std::vector<std::string> notes;  ///< e.g. foreach groups replayed single-tensor
    /// Model indices in the optimizer's group order (what Lightning's clipping iterates).
    std::vector<int64_t> group_order() const {
        std::vector<int64_t> o;
        for (const auto& g : groups) o.insert(o.end(), g.params.begin(), g.params.end());
        return o;
    }
};

/// What a checkpoint holds once read.
struct Checkpoint {
    std::string format;  ///< state_dict | dict | lightning | hf-trainer | safetensors
    std::vector<std::pair<std::string, at::Tensor>> weights;
    std::optional<OptimizerState> optimizer;
    std::optional<ScalerState> scaler;
    bool scaler_disabled = false;  ///< the file held `{}`: GradScaler(enabled=False)
    /// The job's generator states where the checkpoint saved them (a Trainer folder's
    /// rng_state.pth, a dict's rng_state): CPU (undefined when absent) and CUDA per device.
    at::Tensor rng_cpu;
    std::vector<at::Tensor> rng_cuda;
    std::string rng_file;            ///< where they came from
    std::string scaler_absent_note;  ///< a Trainer folder without scaler.pt: said when the replay needs a scaler
    std::vector<std::string> files;  ///< every file read, in order (hashed by the run record)
    std::vector<std::string> warnings;
};

/// Reads a checkpoint file or Trainer folder; `strip_prefix` is removed from weight names
/// that start with it (Lightning's `model.`). Throws InputError naming the file and key.
Checkpoint load_checkpoint(const std::string& path, const std::string& strip_prefix);

/// A torch.optim state_dict() (from a file's `optimizer` entry, optimizer.pt, ...). Optimizers
/// that cannot be replayed exactly (RAdam, NAdam, Adamax, Adagrad, RMSprop, Adadelta, Adafactor,
/// SparseAdam, ASGD, Rprop, LBFGS, 8-bit bitsandbytes states) are refused by name.
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

/// How the optimizer's indices meet the model's parameters (map_optimizer).
struct MapContext {
    std::string file;            ///< the optimizer state's file (named in errors)
    std::string format{};        ///< the checkpoint's format (hf-trainer: the Trainer's decay rule applies)
    std::string strip_prefix{};  ///< removed from param_names as from weight names
    std::string groups_file{};   ///< --param-groups: JSON, a list of parameter names per group
    /// module path -> class (torch.nn.modules.normalization.LayerNorm), where the model knows them
    std::map<std::string, std::string> module_types{};
    /// the second name of a tied parameter -> its index (the optimizer may name either)
    std::map<std::string, int64_t> aliases{};
};

/// Maps the optimizer's indices to the model's trainable parameters, as load_state_dict maps
/// them (by position in the groups' order): through each group's param_names, a groups file,
/// the Trainer's decay / no-decay rule (a Trainer folder) or, for one group, the model's order;
/// several unnamed groups are refused (InputError naming what to give). Then checks every
/// moment's shape and casts the state as load_state_dict casts it. Rewrites each group's
/// params to model indices and keys the state by model index; `warnings` gets what the job's
/// optimizer did not hold (parameters it never stepped).
void map_optimizer(OptimizerState& o, const std::vector<at::Tensor>& params, const std::vector<std::string>& names,
                   const MapContext& ctx, std::vector<std::string>& warnings);

/// The optimizer's kind where the file cannot tell (read_optimizer leaves "adam|adamw" for an
/// Adam/AdamW state from PyTorch <= 2.6, which has no decoupled_weight_decay key): `forced`
/// (--optimizer sgd|adam|adamw, or none), or Adam when no group decays weights (both step
/// alike); else InputError naming --optimizer. A `forced` kind the file contradicts is refused.
/// Sets o.kind and o.kind_source.
void resolve_kind(OptimizerState& o, const std::optional<OptimizerKind>& forced, const std::string& forced_by,
                  const std::string& file);

/// torch.optim's step (SGD, Adam, AdamW) on the parameters with gradients, with PyTorch's
/// arithmetic in PyTorch's order: the single-tensor implementation (also what foreach runs on
/// the CPU, bitwise), or the fused kernels for groups with fused=True.
void optimizer_step(OptimizerState& o, const std::vector<at::Tensor>& params);

}  // namespace ampscope::detail::ckpt
