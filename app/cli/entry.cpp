// SPDX-License-Identifier: MIT
// What both mains of ampscope-cli share (the torch-free front and its LibTorch half): parsing,
// the UTF-8 check of recorded values, and errors mapped to exit statuses.
#include "entry.h"

#include <nlohmann/json.hpp>

#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/text.h"
#include "ampscope/storage/errors.h"

namespace ampscope::cli {

namespace {

/// What the user sees of an error: never the C++ stack frames LibTorch appends to its messages
/// ("Exception raised from ...", "frame #N"), never a raw control character (a message may echo
/// a file's or a model's text), never megabytes of an echoed value.
std::string shown(std::string m) {
    if (const auto p = m.find("Exception raised from "); p != std::string::npos) m.resize(p);
    if (const auto p = m.find("\nframe #"); p != std::string::npos) m.resize(p);
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return visible_controls(clip_echo(m, 4000), /*keep_newline=*/true);
}

int report(const std::exception& e, int code) {
    std::cerr << "ampscope-cli: "
              << (code == kBadInput  ? "error: "
                  : code == kRuntime ? "runtime error: "
                                     : "")
              << shown(e.what()) << std::endl;
    return code;
}

/// Whether `s` is valid UTF-8 (nlohmann's serialiser checks it: the replay, run and train JSON
/// hold the values given on the command line).
bool valid_utf8(const std::string& s) {
    try {
        (void)nlohmann::json(s).dump();
        return true;
    } catch (const nlohmann::json::exception&) {
        return false;
    }
}

/// "--model", "-o", or a positional's name ("TEXT").
std::string option_name(const CLI::Option& o) {
    if (!o.get_lnames().empty()) return "--" + o.get_lnames().front();
    if (!o.get_snames().empty()) return "-" + o.get_snames().front();
    return o.get_name(true);
}

/// The commands that record what they were given (paths, names) in UTF-8 JSON and the database
/// refuse a value that is not valid UTF-8 before any work, naming the option: written after the
/// work, it ended the command with exit 3 and nothing written. (Rename the file, or reach it
/// through a symbolic link with a UTF-8 name.)
void refuse_non_utf8(const CLI::App& app) {
    static const std::set<std::string> recording = {"run", "train", "replay", "advise", "bench", "annotate", "review"};
    static const std::set<std::string> not_recorded = {"--db", "--json",
                                                       "--python"};  // where it writes: never recorded
    for (const auto* sub : app.get_subcommands()) {
        if (!recording.count(sub->get_name())) continue;
        for (const auto* opt : sub->get_options())
            for (const auto& value :
                 not_recorded.count(option_name(*opt)) ? std::vector<std::string>{} : opt->results())
                if (!valid_utf8(value))
                    throw InputError(
                        option_name(*opt), "",
                        "'" + visible_controls(clip_echo(value)) +
                            "' is not valid UTF-8; ampscope records the values it is given in UTF-8 JSON and its "
                            "database: rename the file (or reach it through a symbolic link with a UTF-8 name)");
    }
}

/// Runs the selected command; errors become exit statuses (2 bad input, 3 runtime, 130 interrupted).
int dispatch(const std::vector<Command>& commands) {
    try {
        for (const auto& command : commands)
            if (const int rc = command(); rc >= 0) return rc;
    } catch (const InputError& e) {
        return report(named_by_flag(e), kBadInput);
    } catch (const storage::StoreError& e) {
        return report(std::runtime_error(e.what() + remedy_flags(e.remedies())), kBadInput);
    } catch (const Cancelled&) {
        std::cerr << "ampscope-cli: interrupted" << std::endl;
        return kInterrupted;
    } catch (const ModelError& e) {
        return report(e, kRuntime);
    } catch (const BackendError& e) {
        return report(e, kRuntime);
    } catch (const std::exception& e) {
        return report(e, kRuntime);
    }
    return kOk;
}

}  // namespace

int parse_and_run(CLI::App& app, int argc, char** argv, const std::vector<Command>& commands) {
    app.require_subcommand(1);
    // CLI11's own refusals (an unknown flag, a value outside a list) as the CLI's other errors
    app.failure_message([](const CLI::App* a, const CLI::Error& e) {
        return "ampscope-cli: error: " + CLI::FailureMessage::simple(a, e);
    });
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? kOk : kBadInput;
    }
    try {
        refuse_non_utf8(app);
    } catch (const InputError& e) {
        return report(e, kBadInput);
    }
    return dispatch(commands);
}

}  // namespace ampscope::cli
