// SPDX-License-Identifier: MIT
#pragma once
// ampscope-cli train: reference FP32 and AMP training side by side, with a GradScaler port.

#include <CLI/CLI.hpp>

#include "common.h"

namespace ampscope::cli {

/// Registers `train` on `app`; returns its handler (-1 when `train` was not selected).
Command add_train_command(CLI::App& app);

}  // namespace ampscope::cli
