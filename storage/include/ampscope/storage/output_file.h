// SPDX-License-Identifier: MIT
#pragma once
/// \file output_file.h
/// The one guard every output path goes through (`export -o`, `run/train/advise/bench/replay --json`,
/// `advise --python`): an output never replaces an input of the command or a file that is not
/// an earlier output of the same kind, and is written whole or not at all.

#include <sys/types.h>

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

/// An output path checked once and held until it is written: the folder it names opened once
/// (a symbolic link at the path resolved once, when checked), the file's name in that folder and
/// the file that name held when checked. A folder or a symbolic link swapped in afterwards
/// changes nothing: the new file is created and renamed inside the held folder, and the rename
/// never follows a symbolic link; a name that no longer holds what was checked is not replaced.
class OutputTarget {
public:
    /// Holds `path` (written by `option`). InputError when its folder cannot be opened or the
    /// path names a folder.
    OutputTarget(const std::string& path, const std::string& option);
    ~OutputTarget();
    OutputTarget(OutputTarget&& other) noexcept;
    OutputTarget& operator=(OutputTarget&&) = delete;
    OutputTarget(const OutputTarget&) = delete;
    OutputTarget& operator=(const OutputTarget&) = delete;

    const std::string& path() const { return path_; }
    /// Whether the name held a file when checked (device and inode in `dev`, `ino`).
    bool existed() const { return existed_; }
    /// An empty new file in the held folder (mode 0666 less the umask): its name there and an open
    /// descriptor for writing. InputError naming the option when the folder takes no new file.
    int new_temp(std::string& name) const;
    /// Renames the temporary file `temp` (from new_temp) over the checked name, atomically.
    /// OutputWriteError, `temp` removed and the name left as it is, when the name no longer holds
    /// what it held when checked (another file, a symbolic link, a file where there was none).
    void commit(const std::string& temp) const;
    /// Removes a temporary file of this folder.
    void discard(const std::string& temp) const;
    /// Whether the held folder is `dev`/`ino` or lies inside it (any depth).
    bool inside(dev_t dev, ino_t ino) const;
    /// The path the file will have (the checked folder's path and the name), for messages.
    std::string where() const;

private:
    void changed(const std::string& temp, const std::string& what) const;
    std::string path_, option_, folder_, name_;
    int dir_ = -1;
    bool existed_ = false;
    dev_t dev_ = 0;
    ino_t ino_ = 0;
};

/// Before any work. InputError (exit 2) naming `path` and `option` when the output would
/// replace a protected file (file identity: device and inode; for files not there yet, the
/// normalised path), would be created inside a protected folder (an input folder, e.g. a
/// Trainer checkpoint: nothing is created inside one), is a directory or another non-regular
/// file (a FIFO, a device; "-" is stdout and always passes), is a dangling symbolic link, lies
/// in a folder where no file can be created (tried), or exists and is not an earlier output of
/// `kind` unless `force`. A database's -wal, -shm and -journal files are protected along with it
/// (pass them through protected_database()). Returns the checked target, held.
OutputTarget check_output_target(const std::string& path, const std::string& option, OutputKind kind,
                                 const std::vector<ProtectedFile>& inputs, bool force);

/// check_output_target, the target held for write_output_file(`path`) of this process.
void check_output_file(const std::string& path, const std::string& option, OutputKind kind,
                       const std::vector<ProtectedFile>& inputs, bool force);

/// The database file and its journals, all protected under `role`: under the name given and,
/// when that is a symbolic link, under the file it leads to (SQLite names the journals after it).
std::vector<ProtectedFile> protected_database(const std::string& db_path, const std::string& role);

/// A failure to write an output once the work is done (disk full, I/O error, a target changed
/// while the command worked): exit 3.
class OutputWriteError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Writes `text` to `path` whole or not at all: into a new file in the same folder, flushed
/// to disk, then renamed over the target (a symbolic link's target is replaced, the link kept).
/// The target held by check_output_file(`path`) when it was checked, else held now.
/// OutputWriteError naming the path and `option` on any failure; the temporary file is removed
/// and an existing file at `path` is left unchanged.
void write_output_file(const std::string& path, const std::string& option, const std::string& text);

/// Writes the whole file `from` (a descriptor, read from its start) to the held target, as
/// write_output_file does. OutputWriteError on failure.
void copy_to_target(const OutputTarget& target, int from, const std::string& option);

}  // namespace ampscope::storage
