// SPDX-License-Identifier: MIT
#pragma once
// Reading the files users name (checkpoints, batches, probe files): regular files only.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace ampscope {

/// Throws InputError(path, field, ...) unless `path` is a regular file (after symlinks): a
/// FIFO would block the open until a writer comes (and ignore SIGTERM meanwhile), a device such
/// as /dev/zero never ends, a folder reads as an I/O error. `expected` says what it should be.
void require_regular_file(const std::string& path, const std::string& field, const std::string& expected);

/// The whole of a regular file (require_regular_file), read into a buffer of its size at once.
std::vector<char> read_regular_file(const std::string& path, const std::string& field, const std::string& expected);

/// A regular file (require_regular_file) mapped into memory, private and writable (copy on
/// write: tensors may be built over it without copying; the file never changes). Pages are read
/// when touched, so a file larger than memory costs address space, not memory.
class MappedFile {
public:
    /// Throws InputError(path, field, ...) when the file cannot be opened or mapped.
    static std::shared_ptr<const MappedFile> open(const std::string& path, const std::string& field,
                                                  const std::string& expected);
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();
    const char* data() const { return data_; }
    char* writable() const { return data_; }  ///< private pages: writing never reaches the file
    size_t size() const { return size_; }

private:
    MappedFile(char* data, size_t size) : data_(data), size_(size) {}
    char* data_;
    size_t size_;
};

}  // namespace ampscope
