// SPDX-License-Identifier: MIT
#pragma once
// ampscope-cli bench: speed and memory of FP32 vs AMP, gated on a validation run of exactly
// the benchmarked policy (the rule: choose_validation in ampscope/engine/rules.h).

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace ampscope::cli {

/// Registers `bench` on `app`; returns the handler to call after parsing (-1 when `bench`
/// was not selected; else the exit status). `write_output(path, text)` writes --json.
std::function<int()> add_bench_command(CLI::App& app,
                                       std::function<void(const std::string&, const std::string&)> write_output);

}  // namespace ampscope::cli
