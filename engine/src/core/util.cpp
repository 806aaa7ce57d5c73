// SPDX-License-Identifier: MIT
#include <openssl/evp.h>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/files.h"
#include "ampscope/engine/hash.h"
#include "ampscope/engine/run.h"

namespace ampscope {

struct Sha256::Impl {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~Impl() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : d(std::make_unique<Impl>()) {
    EVP_DigestInit_ex(d->ctx, EVP_sha256(), nullptr);
}
Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t size) {
    EVP_DigestUpdate(d->ctx, data, size);
}

std::string Sha256::hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(d->ctx, md, &len);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
        out += digits[md[i] >> 4];
        out += digits[md[i] & 15];
    }
    return out;
}

std::string sha256_file(const std::string& path) {
    require_regular_file(path, "", "a file (checkpoint, batch, model or probe file)");  // a FIFO would block, /dev/zero never end
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, "", "cannot open file for reading");
    Sha256 h;
    char buf[1 << 16];
    while (in) {
        in.read(buf, sizeof buf);
        if (in.gcount() > 0) h.update(buf, size_t(in.gcount()));
    }
    return h.hex();
}

std::string version() {
    return AMPSCOPE_VERSION;
}

std::string now_iso8601() {
    const auto now = std::chrono::system_clock::now();
    const auto t = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                  tm.tm_min, tm.tm_sec, int(ms));
    return buf;
}

std::string make_uuid() {
    std::random_device rd;
    std::mt19937_64 gen((uint64_t(rd()) << 32) ^ rd() ^ uint64_t(std::chrono::high_resolution_clock::now().time_since_epoch().count()));
    uint64_t a = gen(), b = gen();
    a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
    b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 1
    char buf[40];
    std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", unsigned(a >> 32), unsigned((a >> 16) & 0xffff), unsigned(a & 0xffff),
                  unsigned(b >> 48), (unsigned long long)(b & 0xffffffffffffULL));
    return buf;
}

void require_regular_file(const std::string& path, const std::string& field, const std::string& expected) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw InputError(path, field, "cannot be read (" + std::string(std::strerror(errno)) + "); expected " + expected);
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
    if (!f) throw InputError(path, field, "cannot be read (" + std::string(std::strerror(errno)) + "); expected " + expected);
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

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path, const std::string& field, const std::string& expected) {
    require_regular_file(path, field, expected);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw InputError(path, field, "cannot be read (" + std::string(std::strerror(errno)) + "); expected " + expected);
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
                         "cannot be mapped into memory (" + std::string(std::strerror(err)) + ", " + std::to_string(size) +
                             " bytes); expected " + expected);
    return std::shared_ptr<const MappedFile>(new MappedFile(static_cast<char*>(p), size));
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(data_, size_);
}

}  // namespace ampscope
