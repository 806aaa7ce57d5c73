// SPDX-License-Identifier: MIT
#pragma once
// ampscope-cli bench: speed and memory of FP32 vs AMP, gated on a validation run of exactly
// the benchmarked policy (the rule: choose_validation in ampscope/engine/rules.h).

#include <CLI/CLI.hpp>

#include "common.h"

namespace ampscope::cli {

/// Registers `bench` on `app`; returns its handler (-1 when `bench` was not selected).
Command add_bench_command(CLI::App& app);

}  // namespace ampscope::cli
