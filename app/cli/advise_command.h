// SPDX-License-Identifier: MIT
#pragma once
// ampscope-cli advise: a minimal set of modules to keep in FP32, found, verified and explained.

#include <CLI/CLI.hpp>

#include "common.h"

namespace ampscope::cli {

/// Registers `advise` on `app`; returns its handler (-1 when `advise` was not selected).
Command add_advise_command(CLI::App& app);

}  // namespace ampscope::cli
