// SPDX-License-Identifier: MIT
// Users' files read safely: regular files only (a FIFO would block, /dev/zero never end), read
// whole or mapped read-only.
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/files.h"

namespace ampscope {

void require_regular_file(const std::string& path, const std::string& field, const std::string& expected) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw InputError(path, field,
                         "cannot be read (" + std::string(std::strerror(errno)) + "); expected " + expected);
    if (!S_ISREG(st.st_mode)) {
        const char* what = S_ISFIFO(st.st_mode)                         ? "a FIFO"
                           : S_ISDIR(st.st_mode)                        ? "a folder"
                           : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                        : "not a regular file";
        throw InputError(path, field, std::string("is ") + what + ", not a regular file; expected " + expected);
    }
}

std::vector<char> read_regular_file(const std::string& path, const std::string& field, const std::string& expected) {
    require_regular_file(path, field, expected);
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
        throw InputError(path, field,
                         "cannot be read (" + std::string(std::strerror(errno)) + "); expected " + expected);
    std::vector<char> out;
    struct stat st {};
    if (::fstat(fileno(f), &st) == 0 && st.st_size > 0) out.reserve(size_t(st.st_size));
    char buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.insert(out.end(), buf, buf + n);
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    if (failed) throw InputError(path, field, "could not be read to its end; expected " + expected);
    return out;
}

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path, const std::string& field,
                                                   const std::string& expected) {
    require_regular_file(path, field, expected);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throw InputError(path, field,
                         "cannot be read (" + std::string(std::strerror(errno)) + "); expected " + expected);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw InputError(path, field, "is not a regular file; expected " + expected);
    }
    const size_t size = size_t(st.st_size);
    void* p = size ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0) : nullptr;
    const int err = errno;
    ::close(fd);
    if (p == MAP_FAILED)
        throw InputError(path, field,
                         "cannot be mapped into memory (" + std::string(std::strerror(err)) + ", " +
                             std::to_string(size) + " bytes); expected " + expected);
    return std::shared_ptr<const MappedFile>(new MappedFile(static_cast<char*>(p), size));
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(data_, size_);
}

}  // namespace ampscope
