// SPDX-License-Identifier: MIT
#pragma once
// torch.save archives read with every record, pickle opcode and tensor checked against the
// bytes the file holds (LibTorch's own reader trusts the archive).

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <caffe2/serialize/inline_container.h>

#include <map>
#include <memory>
#include <set>
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
/// LibTorch's zip reader over `bytes` (which must outlive it), after the central directory's
/// declared sizes and every record's size were checked against the file. Throws InputError or
/// c10::Error (not a zip).
/// `stored`, when given, receives the names (as the reader names them) of the records stored
/// uncompressed: their bytes in `bytes` are the record's.
std::shared_ptr<caffe2::serialize::PyTorchStreamReader> open_checked_zip(const std::vector<char>& bytes,
                                                                         const std::string& file,
                                                                         std::set<std::string>* stored = nullptr);
/// The same over `size` bytes at `data` (a mapped file), which must outlive the reader.
std::shared_ptr<caffe2::serialize::PyTorchStreamReader> open_checked_zip(const char* data, size_t size,
                                                                         const std::string& file,
                                                                         std::set<std::string>* stored = nullptr);
/// Unpickles a torch.save zip archive. Throws InputError naming the file. With
/// `skipped_objects` (checkpoints written by Python training code), Python objects LibTorch
/// cannot build are skipped (read as empty dicts when built without arguments, so that their
/// items arrive, else as None; object state dropped) and their classes appended to it by name;
/// a pickled GradScaler object is read as its state_dict(); shared references are resolved
/// once each (linear in the pickle's size).
PtArchive read_pt_archive(const std::vector<char>& bytes, const std::string& file,
                          std::vector<std::string>* skipped_objects = nullptr);
/// The same over `size` bytes at `data` (a mapped file: only the records read are touched).
PtArchive read_pt_archive(const char* data, size_t size, const std::string& file,
                          std::vector<std::string>* skipped_objects = nullptr);
/// Checks a loaded tensor against the bytes its file holds: storage size, sizes, strides,
/// offset (overflow-safe), and no more elements than stored. Throws InputError.
void check_tensor_fits(const at::Tensor& t, size_t record_bytes, const std::string& file, const std::string& field);

}  // namespace ampscope::detail
