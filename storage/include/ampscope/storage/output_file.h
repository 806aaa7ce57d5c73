// SPDX-License-Identifier: MIT
#pragma once
/// \file output_file.h
/// The one guard every output path goes through (`export -o`, `run/train/advise/bench/replay --json`,
/// `advise --python`): an output never replaces an input of the command or a file that is not
/// an earlier output of the same kind, and is written whole or not at all.

#include <stdexcept>
#include <string>
#include <vector>

namespace ampscope::storage {

/// What an output file holds; an existing file of the same kind may be replaced without --force.
enum class OutputKind { RunJson, TrainJson, AdviseJson, BenchJson, PythonSnippet, Export, ReplayJson };

/// "an ampscope run JSON (run --json)", ...
std::string describe(OutputKind kind);

/// Whether the file at `path` is an earlier output of `kind` (read, never written): JSON of the
/// kind's shape (its identifying fields), the snippet's first line, an export's SQLite header.
bool is_output_of_kind(const std::string& path, OutputKind kind);

/// A file an output must never replace, even with --force: the database, model, probes, ...
struct ProtectedFile {
    std::string path;
    std::string role;  ///< e.g. "the run database (--db)"
};

/// Before any work. InputError (exit 2) naming `path` and `option` when the output would
/// replace a protected file (file identity: device and inode; for files not there yet, the
/// normalised path), is a directory or another non-regular file (a FIFO, a device; "-" is
/// stdout and always passes), is a dangling symbolic link, lies in a folder where no file can
/// be created (tried), or exists and is not an earlier output of `kind` unless `force`.
/// A database's -wal, -shm and -journal files are protected along with it when `role` names a
/// database (pass them explicitly through protected_database()).
void check_output_file(const std::string& path, const std::string& option, OutputKind kind, const std::vector<ProtectedFile>& inputs,
                       bool force);

/// The database file and its journals, all protected under `role`.
std::vector<ProtectedFile> protected_database(const std::string& db_path, const std::string& role);

/// A failure to write an output once the work is done (disk full, I/O error): exit 3.
class OutputWriteError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Writes `text` to `path` whole or not at all: into a new file in the same folder, flushed
/// to disk, then renamed over the target (a symbolic link's target is replaced, the link kept).
/// OutputWriteError naming the path and `option` on any failure; the temporary file is removed
/// and an existing file at `path` is left unchanged.
void write_output_file(const std::string& path, const std::string& option, const std::string& text);

/// An empty new file next to `path` (same folder, so the rename is atomic), readable as umask
/// allows; `path` resolved through a symbolic link first. InputError naming `option` when the
/// folder does not allow it.
std::string make_temp_next_to(const std::string& path, const std::string& option);

/// The file a write to `path` replaces: a symbolic link's target, else `path`.
std::string write_target(const std::string& path);

}  // namespace ampscope::storage
