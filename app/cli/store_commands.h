// SPDX-License-Identifier: MIT
#pragma once
// ampscope-cli commands over the run store: list, show, export, import, annotate, review.

#include <CLI/CLI.hpp>

#include "common.h"

namespace ampscope::cli {

/// Registers the store commands on `app`; returns the handler to call after parsing
/// (returns -1 when none of them was selected).
Command add_store_commands(CLI::App& app);

}  // namespace ampscope::cli
