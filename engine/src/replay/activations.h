// SPDX-License-Identifier: MIT
#pragma once
// Replay's per-module activation departures (engine-internal).

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "ampscope/engine/replay.h"
#include "model/model.h"

namespace ampscope::detail::ckpt {

/// The step's forward observed on both sides (FP32 reference; AMP at `p` with `keep_fp32`, and an
/// FP8 recipe's `keep_bf16`), before the step changes any weight; model state restored after. One
/// entry per module.
std::vector<ReplayLayer> activation_departures(Model& ref, Model& amp, const std::vector<at::Tensor>& inputs,
                                               const at::Device& device, Precision p,
                                               const std::vector<std::string>& keep_fp32,
                                               const std::vector<std::string>& keep_bf16, uint64_t seed);

}  // namespace ampscope::detail::ckpt
