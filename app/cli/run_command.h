// SPDX-License-Identifier: MIT
#pragma once
// ampscope-cli run: the FP32 reference pass plus AMP passes, compared against fixed criteria.

#include <CLI/CLI.hpp>

#include "common.h"

namespace ampscope::cli {

/// Registers `run` on `app`; returns its handler (-1 when `run` was not selected).
Command add_run_command(CLI::App& app);

}  // namespace ampscope::cli
