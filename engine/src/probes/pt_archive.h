// SPDX-License-Identifier: MIT
#pragma once
// torch.save archives read with every record, pickle opcode and tensor checked against the
// bytes the file holds (LibTorch's own reader trusts the archive).

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <map>
#include <string>
#include <vector>

namespace ampscope::detail {

/// A torch.save archive read with every record size checked against the file.
struct PtArchive {
    c10::IValue root;
    std::map<const void*, size_t> record_bytes;  ///< storage data pointer -> bytes in the file
    /// Bytes the file holds for this tensor's storage (0 when it came from no record).
    size_t bytes_for(const at::Tensor& t) const;
};
/// Unpickles a torch.save zip archive. Throws InputError naming the file.
PtArchive read_pt_archive(const std::vector<char>& bytes, const std::string& file);
/// Checks a loaded tensor against the bytes its file holds: storage size, sizes, strides,
/// offset (overflow-safe), and no more elements than stored. Throws InputError.
void check_tensor_fits(const at::Tensor& t, size_t record_bytes, const std::string& file, const std::string& field);

}  // namespace ampscope::detail
