// SPDX-License-Identifier: MIT
#pragma once
// ampscope-cli replay: the user's checkpoint and failing batch, replayed in FP32 and AMP.

#include <CLI/CLI.hpp>

#include "common.h"

namespace ampscope::cli {

/// Registers `replay` on `app`; returns its handler (-1 when `replay` was not selected).
Command add_replay_command(CLI::App& app);

}  // namespace ampscope::cli
