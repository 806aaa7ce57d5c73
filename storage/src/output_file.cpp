// SPDX-License-Identifier: MIT
// The guard of every output path, and writes that never leave a half-written file.
#include "ampscope/storage/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>

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

bool has_fields(const nlohmann::json& j, std::initializer_list<std::pair<const char*, nlohmann::json::value_t>> fields) {
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
            return has_fields(j, {{"run_id", T::string}, {"verdict", T::string}, {"criteria", T::object}, {"passes", T::array}});
        case OutputKind::TrainJson:
            return has_fields(j, {{"run_id", T::string}, {"scaler", T::object}, {"steps", T::array}, {"summary", T::object}});
        case OutputKind::AdviseJson:
            return has_fields(j, {{"outcome", T::string}, {"keep_fp32", T::array}, {"passes_used", T::number_integer}});
        case OutputKind::BenchJson: return has_fields(j, {{"validations", T::array}, {"figures", T::array}, {"timer", T::string}});
        case OutputKind::ReplayJson:
            return has_fields(j, {{"run_id", T::string}, {"kind", T::string}, {"steps", T::array}, {"checkpoint", T::object}}) &&
                   j["kind"] == "replay";
        default: return false;
    }
}

std::vector<ProtectedFile> protected_database(const std::string& db_path, const std::string& role) {
    std::vector<ProtectedFile> out;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) out.push_back({db_path + suffix, role});
    return out;
}

std::string write_target(const std::string& path) {
    struct stat lst;
    std::error_code ec;
    if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
        const auto target = fs::canonical(path, ec);
        if (!ec) return target.string();
    }
    return path;
}

std::string make_temp_next_to(const std::string& path, const std::string& option) {
    const fs::path target(write_target(path));
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::string tmpl = (dir / ("." + target.filename().string() + ".XXXXXX.partial")).string();
    const int fd = mkstemps(tmpl.data(), 8);
    if (fd < 0) throw InputError(path, option, "cannot create a file in " + dir.string() + ": " + std::strerror(errno));
    const mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    close(fd);
    return tmpl;
}

void check_output_file(const std::string& path, const std::string& option, OutputKind kind, const std::vector<ProtectedFile>& inputs,
                       bool force) {
    if (path == "-") return;
    if (path.empty()) throw InputError(option, "", "an empty path; expected a file name (or '-' for standard output)");
    struct stat lst, st;
    const bool linked = ::lstat(path.c_str(), &lst) == 0;
    const bool exists = ::stat(path.c_str(), &st) == 0;
    if (linked && !exists)
        throw InputError(path, option, "a symbolic link to a missing file; refusing to write through it: give the file's own path");
    if (exists && S_ISDIR(st.st_mode)) throw InputError(path, option, "is a directory; expected a file path to write");
    if (exists && !S_ISREG(st.st_mode))
        throw InputError(
            path, option,
            std::string("is ") + file_type(st.st_mode) +
                ", not a regular file; refusing to replace it, even with --force: give a file path, or '-' for standard output");
    const Location out = locate(path);
    for (const auto& in : inputs)
        if (!in.path.empty() && same_file(out, locate(in.path)))
            throw InputError(
                path, option,
                "is " + in.role + " (" + in.path + "); refusing to overwrite it, even with --force: choose another output file");
    if (exists && !force && !is_output_of_kind(path, kind))
        throw InputError(
            path, option,
            "exists and is not " + describe(kind) + "; refusing to overwrite it (choose another file name, or pass --force to replace it)");
    const std::string probe = make_temp_next_to(path, option);  // the folder takes a new file: tried, not guessed
    std::remove(probe.c_str());
}

void write_output_file(const std::string& path, const std::string& option, const std::string& text) {
    const std::string target = write_target(path);
    const bool existed = ::access(target.c_str(), F_OK) == 0;
    const std::string unchanged = existed ? "; nothing was written, the existing file is unchanged" : "; nothing was written";
    std::string tmp;
    try {
        tmp = make_temp_next_to(target, option);
    } catch (const InputError& e) {
        throw OutputWriteError(path + ": " + option + ": " + e.expected() + unchanged);
    }
    auto fail = [&](const char* what) {
        const std::string reason = std::strerror(errno);
        std::remove(tmp.c_str());
        throw OutputWriteError(path + ": " + option + ": " + what + ": " + reason + unchanged);
    };
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) fail("cannot open a new file next to it");
    for (size_t done = 0; done < text.size();) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = EIO;
            const int err = errno;
            ::close(fd);
            errno = err;
            fail("cannot write");
        }
        done += size_t(n);
    }
    if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
        const int err = errno;
        ::close(fd);
        errno = err;
        fail("cannot write");
    }
    if (::close(fd) != 0) fail("cannot write");
    if (std::rename(tmp.c_str(), target.c_str()) != 0) fail("cannot replace the file");
}

}  // namespace ampscope::storage
