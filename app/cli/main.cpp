// SPDX-License-Identifier: MIT
// ampscope-cli: the headless front end (entry.h). Links neither Qt nor LibTorch: the store
// commands (list, show, export, import, annotate, review) start in milliseconds, not after
// LibTorch's half a second and 470 MB of loading; any other command it hands to
// ampscope-cli-engine, built beside it, with the same arguments, environment and process id.
#include <CLI/CLI.hpp>
#include <sys/auxv.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "common.h"
#include "entry.h"
#include "store_commands.h"

using namespace ampscope::cli;

namespace {

/// The commands this front runs itself: they read and write the run store only.
bool store_command(const char* name) {
    static const std::set<std::string> names = {"list", "show", "export", "import", "annotate", "review"};
    return names.count(name) > 0;
}

/// This executable's own path, symbolic links resolved: /proc/self/exe, else the path the
/// kernel executed (AT_EXECFN, already searched along PATH) made absolute; empty when neither.
std::filesystem::path own_path() {
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec && self.is_absolute()) return self;
    const auto* executed = reinterpret_cast<const char*>(getauxval(AT_EXECFN));
    if (!executed) return {};
    self = std::filesystem::canonical(executed, ec);
    return ec ? std::filesystem::path() : self;
}

/// Replaces this process by ampscope-cli-engine (beside this executable); returns only when
/// it cannot start, with the exit status of a runtime error.
int hand_to_engine(char** argv) {
    const auto self = own_path();
    if (self.empty()) {
        std::cerr << "ampscope-cli: runtime error: cannot tell where this executable is (no /proc/self/exe), so "
                     "cannot start ampscope-cli-engine beside it; run that one directly"
                  << std::endl;
        return kRuntime;
    }
    const auto engine = self.parent_path() / "ampscope-cli-engine";
    execv(engine.c_str(), argv);
    std::cerr << "ampscope-cli: runtime error: cannot start " << engine.string()
              << " (the LibTorch half of ampscope-cli, built and installed beside it): " << std::strerror(errno)
              << std::endl;
    return kRuntime;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || !store_command(argv[1])) return hand_to_engine(argv);
    install_signal_handlers();
    CLI::App app{kAppDescription};
    const std::vector<Command> commands = {add_store_commands(app)};
    return parse_and_run(app, argc, argv, commands);
}
