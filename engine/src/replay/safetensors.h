// SPDX-License-Identifier: MIT
#pragma once
// safetensors files read by ampscope itself (no Python): the layout of the reference
// implementation (huggingface/safetensors), every field checked before any byte is copied.

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ampscope {
class MappedFile;
}

namespace ampscope::detail {

/// The tensors and metadata of one safetensors file (tensors own their memory, on the CPU).
struct Safetensors {
    std::map<std::string, at::Tensor> tensors;
    std::map<std::string, std::string> metadata;  ///< `__metadata__`
};

/// The largest JSON header read (the reference implementation's limit).
constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;

/// Parses a safetensors file's bytes: 8-byte little-endian header length, a JSON header of
/// {name: {dtype, shape, data_offsets}} plus an optional `__metadata__` string map, then the
/// data, whose entries must follow each other without holes or overlap and cover it whole.
/// Throws InputError naming `file` and the key at fault. With `owner` (the mapping `bytes` lie
/// in), tensors are built over it without copying (each holds the mapping); else copied.
Safetensors parse_safetensors(const char* bytes, size_t size, const std::string& file,
                              const std::shared_ptr<const MappedFile>& owner);
/// The same over a buffer, tensors copied out of it.
Safetensors parse_safetensors(const std::vector<char>& bytes, const std::string& file);
/// Maps and parses a file (InputError when it cannot be read): tensors over the mapping.
Safetensors read_safetensors(const std::string& path);

}  // namespace ampscope::detail
