// SPDX-License-Identifier: MIT
// The guard of every output path, and writes that never leave a half-written file.
#include "ampscope/storage/output_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <utility>

#include "ampscope/engine/errors.h"
#include "ampscope/storage/store.h"

namespace ampscope::storage {

namespace fs = std::filesystem;

namespace {

/// Where a path leads: the file's identity when it exists, else the normalised absolute path.
struct Location {
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    std::string normal;
};

Location locate(const std::string& path) {
    Location l;
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) {
        l.exists = true;
        l.dev = st.st_dev;
        l.ino = st.st_ino;
    }
    std::error_code ec;
    const auto abs = fs::absolute(path, ec);
    const auto canon = fs::weakly_canonical(ec ? fs::path(path) : abs, ec);
    l.normal = (ec ? abs : canon).lexically_normal().string();
    return l;
}

bool same_file(const Location& a, const Location& b) {
    if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
    return a.normal == b.normal;
}

const char* file_type(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

/// The JSON document in `path`, or a discarded value when it is none (or over 1 GiB).
nlohmann::json read_json(const std::string& path) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec || size > (uintmax_t(1) << 30)) return nlohmann::json(nlohmann::json::value_t::discarded);
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return nlohmann::json::parse(s.str(), nullptr, false);
}

bool has_fields(const nlohmann::json& j,
                std::initializer_list<std::pair<const char*, nlohmann::json::value_t>> fields) {
    if (!j.is_object()) return false;
    for (const auto& [name, type] : fields) {
        const auto it = j.find(name);
        if (it == j.end()) return false;
        const bool number = type == nlohmann::json::value_t::number_integer;
        if (number ? !it->is_number() : it->type() != type) return false;
    }
    return true;
}

}  // namespace

std::string describe(OutputKind kind) {
    switch (kind) {
        case OutputKind::RunJson: return "an ampscope run JSON (run --json)";
        case OutputKind::TrainJson: return "an ampscope training JSON (train --json)";
        case OutputKind::AdviseJson: return "an ampscope advice JSON (advise --json)";
        case OutputKind::BenchJson: return "an ampscope benchmark JSON (bench --json)";
        case OutputKind::PythonSnippet: return "an ampscope advise Python snippet (advise --python)";
        case OutputKind::Export: return "an ampscope export";
        case OutputKind::ReplayJson: return "an ampscope replay JSON (replay --json)";
    }
    return "an ampscope output";
}

bool is_output_of_kind(const std::string& path, OutputKind kind) {
    using T = nlohmann::json::value_t;
    if (kind == OutputKind::Export) return is_export_file(path);
    if (kind == OutputKind::PythonSnippet) {
        std::ifstream in(path, std::ios::binary);
        std::string first;
        std::getline(in, first);
        return first.rfind("# ampscope advise:", 0) == 0;
    }
    const auto j = read_json(path);
    switch (kind) {
        case OutputKind::RunJson:
            return has_fields(
                j, {{"run_id", T::string}, {"verdict", T::string}, {"criteria", T::object}, {"passes", T::array}});
        case OutputKind::TrainJson:
            return has_fields(
                j, {{"run_id", T::string}, {"scaler", T::object}, {"steps", T::array}, {"summary", T::object}});
        case OutputKind::AdviseJson:
            return has_fields(j, {{"outcome", T::string}, {"keep_fp32", T::array}, {"passes_used", T::number_integer}});
        case OutputKind::BenchJson:
            return has_fields(j, {{"validations", T::array}, {"figures", T::array}, {"timer", T::string}});
        case OutputKind::ReplayJson:
            return has_fields(
                       j,
                       {{"run_id", T::string}, {"kind", T::string}, {"steps", T::array}, {"checkpoint", T::object}}) &&
                   j["kind"] == "replay";
        default: return false;
    }
}

std::vector<ProtectedFile> protected_database(const std::string& db_path, const std::string& role) {
    std::vector<ProtectedFile> out;
    std::vector<std::string> names = {db_path};
    std::error_code ec;
    const auto real = fs::canonical(db_path, ec);  // a link: SQLite's journals follow the file it leads to
    if (!ec && real.string() != db_path) names.push_back(real.string());
    for (const auto& name : names)
        for (const char* suffix : {"", "-wal", "-shm", "-journal"}) out.push_back({name + suffix, role});
    return out;
}

namespace {

/// The file a write to `path` replaces: a symbolic link's target (resolved once), else `path`.
std::string write_target(const std::string& path) {
    struct stat lst;
    std::error_code ec;
    if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
        const auto target = fs::canonical(path, ec);
        if (!ec) return target.string();
    }
    return path;
}

std::string random_letters(size_t n) {
    static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static std::mt19937_64 rng{std::random_device{}() ^ uint64_t(::getpid())};
    std::string s;
    for (size_t i = 0; i < n; ++i) s += letters[rng() % (sizeof letters - 1)];
    return s;
}

}  // namespace

OutputTarget::OutputTarget(const std::string& path, const std::string& option) : path_(path), option_(option) {
    const fs::path target(write_target(path));
    folder_ = target.has_parent_path() ? target.parent_path().string() : ".";
    name_ = target.filename().string();
    if (name_.empty() || name_ == "." || name_ == "..")
        throw InputError(path, option, "is a directory; expected a file path to write");
    dir_ = ::open(folder_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_ < 0) throw InputError(path, option, "cannot create a file in " + folder_ + ": " + std::strerror(errno));
    struct stat st;
    if (::fstatat(dir_, name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        existed_ = true;
        dev_ = st.st_dev;
        ino_ = st.st_ino;
    }
}

OutputTarget::~OutputTarget() {
    if (dir_ >= 0) ::close(dir_);
}

OutputTarget::OutputTarget(OutputTarget&& o) noexcept
    : path_(std::move(o.path_)),
      option_(std::move(o.option_)),
      folder_(std::move(o.folder_)),
      name_(std::move(o.name_)),
      dir_(std::exchange(o.dir_, -1)),
      existed_(o.existed_),
      dev_(o.dev_),
      ino_(o.ino_) {}

std::string OutputTarget::where() const {
    return (fs::path(folder_) / name_).string();
}

int OutputTarget::new_temp(std::string& name) const {
    const std::string base = "." + name_.substr(0, 200) + ".";
    for (int attempt = 0; attempt < 100; ++attempt) {
        name = base + random_letters(6) + ".partial";
        const int fd = ::openat(dir_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) return fd;
        if (errno != EEXIST) break;
    }
    throw InputError(path_, option_, "cannot create a file in " + folder_ + ": " + std::strerror(errno));
}

void OutputTarget::discard(const std::string& temp) const {
    ::unlinkat(dir_, temp.c_str(), 0);
}

void OutputTarget::changed(const std::string& temp, const std::string& what) const {
    discard(temp);
    throw OutputWriteError(
        path_ + ": " + option_ + ": " + what +
        " while the command worked (checked before it began); refusing to write there: nothing was written, "
        "what the name holds now is unchanged");
}

void OutputTarget::commit(const std::string& temp) const {
    struct stat now;
    const bool there = ::fstatat(dir_, name_.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0;
    if (!existed_) {
        if (there)
            changed(temp,
                    S_ISLNK(now.st_mode) ? "a symbolic link appeared at its name" : "a file appeared at its name");
        if (::renameat2(dir_, temp.c_str(), dir_, name_.c_str(), RENAME_NOREPLACE) == 0) return;
        if (errno == EEXIST) changed(temp, "a file appeared at its name");
    } else {
        if (!there) changed(temp, "the file it named was removed or renamed");
        if (S_ISLNK(now.st_mode)) changed(temp, "it was replaced by a symbolic link");
        if (now.st_dev != dev_ || now.st_ino != ino_) changed(temp, "it was replaced by another file");
        if (::renameat2(dir_, temp.c_str(), dir_, name_.c_str(), RENAME_EXCHANGE) == 0) {
            struct stat old;  // what the exchange took out: the checked file, else it goes back
            if (::fstatat(dir_, temp.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0 && old.st_dev == dev_ &&
                old.st_ino == ino_) {
                discard(temp);
                return;
            }
            ::renameat2(dir_, temp.c_str(), dir_, name_.c_str(), RENAME_EXCHANGE);
            changed(temp, "it was replaced by another file");
        }
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP &&
        errno != EXDEV) {  // else: a file system without renameat2's flags
        const std::string reason = std::strerror(errno);
        discard(temp);
        throw OutputWriteError(path_ + ": " + option_ + ": cannot replace the file: " + reason);
    }
    if (::renameat(dir_, temp.c_str(), dir_, name_.c_str()) != 0) {
        const std::string reason = std::strerror(errno);
        discard(temp);
        throw OutputWriteError(path_ + ": " + option_ + ": cannot replace the file: " + reason);
    }
}

bool OutputTarget::inside(dev_t dev, ino_t ino) const {
    int fd = ::dup(dir_);
    for (int depth = 0; fd >= 0 && depth < 4096; ++depth) {
        struct stat st, up;
        if (::fstat(fd, &st) != 0) break;
        if (st.st_dev == dev && st.st_ino == ino) {
            ::close(fd);
            return true;
        }
        const int parent = ::openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ::close(fd);
        fd = parent;
        if (fd < 0 || ::fstat(fd, &up) != 0 || (up.st_dev == st.st_dev && up.st_ino == st.st_ino)) break;  // the root
    }
    if (fd >= 0) ::close(fd);
    return false;
}

namespace {

/// The input folders among `inputs` (a Trainer checkpoint, a data folder): nothing is created inside one.
void refuse_inside_input_folder(const OutputTarget& t, const std::string& path, const std::string& option,
                                const std::vector<ProtectedFile>& inputs) {
    for (const auto& in : inputs) {
        struct stat st;
        if (in.path.empty() || ::stat(in.path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
            !t.inside(st.st_dev, st.st_ino))
            continue;
        throw InputError(
            path, option,
            "lies inside " + in.role + " (" + in.path +
                "), a folder the command reads; refusing to create or replace a file in it, even when forced (a file "
                "added there changes what the folder holds: it may no longer load): choose a path outside it");
    }
}

void refuse_protected(const OutputTarget& t, const std::string& path, const std::string& option,
                      const std::vector<ProtectedFile>& inputs) {
    Location out = locate(t.where());
    for (const auto& in : inputs)
        if (!in.path.empty() && same_file(out, locate(in.path)))
            throw InputError(path, option,
                             "is " + in.role + " (" + in.path +
                                 "); refusing to overwrite it, even when forced: choose another output file");
    refuse_inside_input_folder(t, path, option, inputs);
}

/// The checks on what the path names now: a dangling link, a directory, a device or FIFO.
void refuse_non_regular(const std::string& path, const std::string& option) {
    struct stat lst, st;
    const bool linked = ::lstat(path.c_str(), &lst) == 0;
    const bool exists = ::stat(path.c_str(), &st) == 0;
    if (linked && !exists)
        throw InputError(path, option,
                         "a symbolic link to a missing file; refusing to write through it: give the file's own path");
    if (exists && S_ISDIR(st.st_mode)) throw InputError(path, option, "is a directory; expected a file path to write");
    if (exists && !S_ISREG(st.st_mode))
        throw InputError(path, option,
                         std::string("is ") + file_type(st.st_mode) +
                             ", not a regular file; refusing to replace it, even when forced: give a file path, or "
                             "'-' for standard output");
}

std::mutex g_checked_mutex;
std::map<std::string, std::shared_ptr<OutputTarget>> g_checked;  ///< targets checked by check_output_file, by path

}  // namespace

OutputTarget check_output_target(const std::string& path, const std::string& option, OutputKind kind,
                                 const std::vector<ProtectedFile>& inputs, bool force) {
    if (path.empty()) throw InputError(option, "", "an empty path; expected a file name (or '-' for standard output)");
    refuse_non_regular(path, option);
    OutputTarget t(path, option);
    refuse_protected(t, path, option, inputs);
    if (t.existed() && !force && !is_output_of_kind(t.where(), kind))
        throw InputError(path, option,
                         "exists and is not " + describe(kind) +
                             "; refusing to overwrite it (choose another file name, or force the replacement)",
                         {{"force", ""}});
    std::string probe;  // the folder takes a new file: tried, not guessed
    ::close(t.new_temp(probe));
    t.discard(probe);
    return t;
}

void check_output_file(const std::string& path, const std::string& option, OutputKind kind,
                       const std::vector<ProtectedFile>& inputs, bool force) {
    if (path == "-") return;
    auto t = std::make_shared<OutputTarget>(check_output_target(path, option, kind, inputs, force));
    std::lock_guard<std::mutex> l(g_checked_mutex);
    g_checked[path] = std::move(t);
}

namespace {

/// Writes all of `n` bytes; false (errno set) on failure.
bool write_all(int fd, const char* data, size_t n) {
    for (size_t done = 0; done < n;) {
        const ssize_t w = ::write(fd, data + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return false;
        }
        done += size_t(w);
    }
    return true;
}

/// The held target of `path`: the one checked before the work, else held now.
std::shared_ptr<OutputTarget> held_target(const std::string& path, const std::string& option,
                                          const std::string& unchanged) {
    {
        std::lock_guard<std::mutex> l(g_checked_mutex);
        if (auto it = g_checked.find(path); it != g_checked.end()) {
            auto t = it->second;
            g_checked.erase(it);
            return t;
        }
    }
    try {
        return std::make_shared<OutputTarget>(path, option);
    } catch (const InputError& e) {
        throw OutputWriteError(path + ": " + option + ": " + e.expected() + unchanged);
    }
}

/// Writes through `fill` (false with errno set on failure) into a new file of the target, flushes
/// it and renames it over the target.
void write_through(const OutputTarget& t, const std::string& option, const std::function<bool(int)>& fill) {
    const std::string unchanged =
        t.existed() ? "; nothing was written, the existing file is unchanged" : "; nothing was written";
    std::string tmp;
    int fd = -1;
    try {
        fd = t.new_temp(tmp);
    } catch (const InputError& e) {
        throw OutputWriteError(t.path() + ": " + option + ": " + e.expected() + unchanged);
    }
    bool ok = fill(fd);
    if (ok && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) ok = false;
    const int err = errno;
    if (::close(fd) != 0 && ok)
        ok = false;
    else
        errno = err;
    if (!ok) {
        const std::string reason = std::strerror(errno);
        t.discard(tmp);
        throw OutputWriteError(t.path() + ": " + option + ": cannot write: " + reason + unchanged);
    }
    t.commit(tmp);
}

}  // namespace

void write_output_file(const std::string& path, const std::string& option, const std::string& text) {
    const auto t = held_target(path, option, "; nothing was written");
    write_through(*t, option, [&](int fd) { return write_all(fd, text.data(), text.size()); });
}

void copy_to_target(const OutputTarget& target, int from, const std::string& option) {
    write_through(target, option, [from](int fd) {
        if (::lseek(from, 0, SEEK_SET) != 0) return false;
        std::vector<char> buf(size_t(1) << 20);
        for (;;) {
            const ssize_t n = ::read(from, buf.data(), buf.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return false;
            if (n == 0) return true;
            if (!write_all(fd, buf.data(), size_t(n))) return false;
        }
    });
}

}  // namespace ampscope::storage
