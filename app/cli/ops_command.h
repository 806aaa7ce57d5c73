// SPDX-License-Identifier: MIT
#pragma once
// ampscope-cli backend (what hardware and libraries would run) and ops (operator coverage).

#include <CLI/CLI.hpp>

#include "common.h"

namespace ampscope::cli {

/// Registers `backend` on `app`; returns its handler (-1 when it was not selected).
Command add_backend_command(CLI::App& app);

/// Registers `ops` on `app`; returns its handler (-1 when it was not selected).
Command add_ops_command(CLI::App& app);

}  // namespace ampscope::cli
