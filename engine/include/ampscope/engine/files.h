// SPDX-License-Identifier: MIT
#pragma once
// Reading the files users name (checkpoints, batches, probe files): regular files only.
#include <string>
#include <vector>

namespace ampscope {

/// Throws InputError(path, field, ...) unless `path` is a regular file (after symlinks): a
/// FIFO would block the open until a writer comes (and ignore SIGTERM meanwhile), a device such
/// as /dev/zero never ends, a folder reads as an I/O error. `expected` says what it should be.
void require_regular_file(const std::string& path, const std::string& field, const std::string& expected);

/// The whole of a regular file (require_regular_file), read into a buffer of its size at once.
std::vector<char> read_regular_file(const std::string& path, const std::string& field, const std::string& expected);

}  // namespace ampscope
