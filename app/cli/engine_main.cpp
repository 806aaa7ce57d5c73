// SPDX-License-Identifier: MIT
// ampscope-cli-engine: the LibTorch half of ampscope-cli (entry.h). Runs every command; the
// front (main.cpp) starts it for all but the store commands. Links no Qt. One file per
// command; this one wires them to CLI11.
#include <CLI/CLI.hpp>

#include <vector>

#include "ampscope/engine/run.h"
#include "advise_command.h"
#include "bench_command.h"
#include "common.h"
#include "entry.h"
#include "ops_command.h"
#include "replay_command.h"
#include "run_command.h"
#include "store_commands.h"
#include "train_command.h"

using namespace ampscope;
using namespace ampscope::cli;

int main(int argc, char** argv) {
    install_signal_handlers();  // Ctrl-C / SIGTERM: finish the current batch, record the run as cancelled, exit 130
    CLI::App app{kAppDescription};
    app.set_version_flag("--version",
                         "ampscope-cli " + version() + " (torch " + backend_report("cpu").torch_version + ")");
    const std::vector<Command> commands = {add_run_command(app),    add_backend_command(app), add_ops_command(app),
                                           add_train_command(app),  add_bench_command(app),   add_store_commands(app),
                                           add_advise_command(app), add_replay_command(app)};
    return parse_and_run(app, argc, argv, commands);
}
