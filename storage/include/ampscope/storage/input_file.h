// SPDX-License-Identifier: MIT
#pragma once
// Small input files users hand to the CLI and the GUI alike (Qt-free, so both read them by the
// same rules): a bounded read that never blocks on a FIFO or a device, and the FP32-regions file
// (--keep-fp32-file, the GUI's "Keep in FP32" Load…).

#include <cstddef>
#include <string>
#include <vector>

namespace ampscope::storage {

/// The bytes of a regular file of at most `max_bytes`; InputError(path, what, ...) for a missing
/// file, a directory, a FIFO, a device or a socket (refused before any read: nothing blocks), or
/// a file larger than the limit (also one that grows while read). `what` names what the file is
/// to the user (a CLI flag, a dialog field).
std::string read_small_file(const std::string& path, const std::string& what,
                            std::size_t max_bytes = std::size_t(1) << 20);

/// Which list a regions file fills: the FP32 regions of fp16/bf16 passes (an advise JSON's
/// "keep_fp32") or the modules FP8 passes leave in BF16 (an FP8 recipe's advise JSON, "keep_bf16").
enum class RegionsList { KeepFp32, KeepBf16 };

/// The module globs of a regions file (at most 1 MB, read as read_small_file): either the advise
/// JSON (an object with a "keep_fp32" list of non-empty module-path strings, or "keep_bf16" for
/// RegionsList::KeepBf16; an advice of the other kind refused, naming its list; "outcome":
/// "unverified" refused unless `allow_unverified`) or text, one module-path glob a line ('#'
/// starts a comment; blank lines skipped; surrounding spaces, tabs and CR trimmed; a glob holding
/// a space, a tab or a comma refused, naming its line). A UTF-8 byte-order mark is skipped;
/// control bytes (NUL, binary files) and text that is not UTF-8 are refused; a text file without
/// any glob is refused (an advise JSON's empty list is no region). Errors are InputError naming
/// the file and the field ("keep_fp32", "keep_bf16", "outcome", "line N", or `what` for the file
/// as a whole).
std::vector<std::string> read_regions_file(const std::string& path, const std::string& what, bool allow_unverified,
                                           RegionsList list = RegionsList::KeepFp32);

}  // namespace ampscope::storage
