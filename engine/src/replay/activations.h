// SPDX-License-Identifier: MIT
#pragma once
// Replay's per-module activation departures (engine-internal).

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "ampscope/engine/replay.h"
#include "model/model.h"

namespace ampscope::detail::ckpt {

/// The step's forward observed on both sides (FP32 reference; AMP as the replay's spec runs it: its
/// precision, FP32 regions, and an FP8 recipe's training linears with its BF16 list), before the
/// step changes any weight; model state restored after. One entry per module.
std::vector<ReplayLayer> activation_departures(Model& ref, Model& amp, const std::vector<at::Tensor>& inputs,
                                               const at::Device& device, const ReplaySpec& spec, uint64_t seed);

}  // namespace ampscope::detail::ckpt
