// SPDX-License-Identifier: MIT
#pragma once
// What every ampscope-cli command shares: exit statuses, Ctrl-C handling, terminal progress,
// reading and writing files.

#include <atomic>
#include <CLI/CLI.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <memory>

#include "ampscope/engine/run.h"
#include "ampscope/engine/errors.h"
#include "ampscope/storage/output_file.h"
#include "ampscope/storage/store.h"

namespace ampscope::cli {

enum Exit { kOk = 0, kRejected = 1, kBadInput = 2, kRuntime = 3, kInterrupted = 130 };

/// The handler of a command, called after parsing: -1 when its command was not selected, else
/// the exit status.
using Command = std::function<int()>;

/// Registers subcommand `name`: its options (`add_options`) on a value of `Options` that
/// lives as long as the returned handler, which calls `run` when `name` was selected.
template <class Options>
Command subcommand(CLI::App& app, const char* name, const std::string& help, void (*add_options)(CLI::App*, Options&),
                   int (*run)(Options&)) {
    auto* sub = app.add_subcommand(name, help);
    auto options = std::make_shared<Options>();
    add_options(sub, *options);
    return [sub, options, run] { return *sub ? run(*options) : -1; };
}

/// `--output`: the output compared, for torch.export programs with several outputs (run, ops,
/// bench, train: one help text and one check).
CLI::Option* add_output_option(CLI::App* app, std::string& output);

/// First Ctrl-C/SIGTERM: finish the current batch or step, record the run cancelled, exit 130.
/// Second one (e.g. the model is stuck inside one op): the process ends at once, after the
/// current AbortAction ran.
void install_signal_handlers();
/// Whether Ctrl-C/SIGTERM arrived.
bool interrupted();

/// Commands other than `run` are one process each: under torchrun (WORLD_SIZE > 1) every rank would
/// run and record the same work. InputError naming the command (docs/distributed.md).
void refuse_under_torchrun(const std::string& command);

/// What the second Ctrl-C does before the process ends, while a recording command runs (e.g.
/// mark the run cancelled).
struct AbortAction {
    explicit AbortAction(std::function<void()> f);
    ~AbortAction();
    AbortAction(const AbortAction&) = delete;
    AbortAction& operator=(const AbortAction&) = delete;
};

/// Terminal progress on stderr (only when enabled: stderr a terminal, not --quiet), throttled
/// to ~10 Hz; cancellation requested by Ctrl-C.
class TerminalProgress : public ProgressObserver {
public:
    explicit TerminalProgress(bool enabled) : enabled_(enabled) {}
    void progress(const std::string& stage, int done, int total) override;
    bool cancel_requested() const override;
    void clear();

private:
    bool enabled_;
    std::string last_stage_;
    std::chrono::steady_clock::time_point last_{};
};

/// The database a recording command writes to (--db, $AMPSCOPE_DB or the default; created
/// when missing); none with --no-db.
std::unique_ptr<storage::Store> recording_store(bool no_db, const std::string& db, bool init_db);

/// What a recording command records into: the store (none with --no-db) and its `Writer`,
/// whose `failed(status, message)` marks the run cancelled when a second Ctrl-C ends the process.
template <class Writer>
class Recording {
public:
    using Failed = void (Writer::*)(const std::string&, const std::string&);
    Recording(bool no_db, const std::string& db, bool init_db, Failed failed)
        : store_(recording_store(no_db, db, init_db)),
          writer_(store_ ? std::make_unique<Writer>(*store_) : nullptr),
          abort_([w = writer_.get(), failed] {
              if (w) (w->*failed)("cancelled", "interrupted twice while the model was running");
          }) {}
    Writer* writer() const { return writer_.get(); }
    const storage::Store* store() const { return store_.get(); }
    /// Deletes what the writer recorded of its run (a run recorded whole or not at all).
    void discard() const noexcept {
        try {
            if (writer_ && !writer_->run_uuid().empty()) store_->delete_run(writer_->run_uuid());
        } catch (...) {  // the run stays marked failed
        }
    }

private:
    std::unique_ptr<storage::Store> store_;
    std::unique_ptr<Writer> writer_;
    AbortAction abort_;
};

/// The whole file, at most `max_bytes`; InputError naming the file and `what` (the option) when
/// it cannot be read, is not a regular file (a FIFO or device is refused before it is opened,
/// so nothing blocks) or is larger.
std::string read_file(const std::string& path, const std::string& what, size_t max_bytes = size_t(1) << 20);

/// The engine and storage name the field they refuse ("precision", "batch_size", "keep_fp32[2]":
/// the third FP32 region); the CLI says which of its flags set that field. The one table of
/// fields to flags; a file's error says which flag gave the file ("model" -> "--model"); any other
/// error with a file, or a field no flag sets, is returned as it is.
/// The remedies an error names (engine/errors.h Remedy) with the CLI's flags for them
/// appended: "... (ampscope-cli: --strip-prefix model., --non-strict)".
InputError named_by_flag(const InputError& e);
/// " (ampscope-cli: FLAGS)" for the remedies the CLI has flags for, else "".
std::string remedy_flags(const std::vector<Remedy>& remedies);
/// The index of an indexed field ("keep_fp32[2]" -> 2), or -1.
long field_index(const std::string& field);

/// Writes an output (`what`: --json, --python) to `path` whole or not at all (the shared guard,
/// storage/output_file.h), or to stdout for "-". JSON outputs have C1 control characters
/// escaped (the same JSON value). A failed write is storage::OutputWriteError (exit 3).
void write_output(const std::string& path, const std::string& text, const std::string& what = "--json",
                  bool json = true);

/// The files a command reads, which its outputs must never replace: the run database (unless
/// `no_db`; with its journals) and each (role, path) given, e.g. {"the model (--model)", path};
/// empty paths and the demo models and probes are skipped.
std::vector<storage::ProtectedFile> protected_inputs(bool no_db, const std::string& db,
                                                     const std::vector<std::pair<std::string, std::string>>& files);

/// Before any work: InputError (exit 2) when `path` (output option `what`) may not be written
/// (storage::check_output_file: an input, a directory or device, a folder without room for a new
/// file, an existing file of another kind without `force`). "" and "-" pass.
void check_output_path(const std::string& path, const std::string& what, storage::OutputKind kind,
                       const std::vector<storage::ProtectedFile>& inputs, bool force);

/// The help of --force.
inline const char* const kForceHelp =
    "replace an existing output file that is not an earlier output of the same kind (never an input of the command, "
    "never a device)";

/// The help of --db.
inline const char* const kDbHelp =
    "run database (default: $AMPSCOPE_DB, else ${XDG_DATA_HOME:-~/.local/share}/ampscope/runs.sqlite)";

}  // namespace ampscope::cli
