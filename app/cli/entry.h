// SPDX-License-Identifier: MIT
#pragma once
// The two mains of ampscope-cli: `ampscope-cli` itself links no LibTorch and runs the store
// commands (list, show, export, import, annotate, review) at once; every other command, and
// the top-level --help and --version, it hands to `ampscope-cli-engine` beside it (exec, same
// process id, arguments and environment), which runs them all.

#include <CLI/CLI.hpp>

#include <vector>

#include "common.h"

namespace ampscope::cli {

/// The description of ampscope-cli (both mains).
inline const char* const kAppDescription =
    "ampscope-cli: is it safe to run this model in mixed precision? Runs an FP32 reference pass and "
    "autocast FP16/BF16 passes on a fixed probe set, compares scores and decisions against criteria "
    "fixed before the run, and names where NaN/Inf is born.";

/// After the commands are registered on `app`: parses argv, refuses values of recording
/// commands that are not valid UTF-8, runs the selected command; errors become exit statuses
/// (2 bad input, 3 runtime, 130 interrupted).
int parse_and_run(CLI::App& app, int argc, char** argv, const std::vector<Command>& commands);

}  // namespace ampscope::cli
