// SPDX-License-Identifier: MIT
#pragma once
// Pieces of the torch.export archive reader shared by export_program.cpp and export_weights.cpp:
// bounded JSON parsing, the serialized dtype codes, and the weights/constants records.

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ampscope::detail::pt2 {

/// Parses a JSON record; malformed or deeper than 256 levels is an InputError naming file and field.
nlohmann::json parse_json(const void* data, size_t n, const std::string& file, const std::string& field);

/// The serialized dtype codes (torch/_export/serde/schema.py ScalarType), not c10's numbers.
std::optional<at::ScalarType> dtype_of_code(int64_t code);

/// The dtype a serialized code (a JSON integer) names; anything else is an InputError naming
/// `file` and `where`.
at::ScalarType dtype_named(const nlohmann::json& code, const std::string& file, const std::string& where);

/// The archive's bytes, owned, and its records stored uncompressed: a weight read from such a
/// record is a tensor over those bytes (no copy; it keeps them alive), as torch.load(mmap=True)
/// leaves weights in the file it maps.
struct SharedBytes {
    std::shared_ptr<std::vector<char>> owner;
    std::set<std::string> stored;
};

/// Reads the tensors a weights or constants config names (config record `config`, records in
/// `dir`) into `out` by FQN, every tensor_meta checked against its record. A missing config is
/// no tensors. `views`, when given, receives each FQN's record and view (dtype, sizes, strides,
/// offset) as one string: FQNs with equal strings are one tensor in the exported module (tied
/// weights: torch.export.save writes a shared storage once). `shared`: see SharedBytes. Throws InputError.
void read_weights(caffe2::serialize::PyTorchStreamReader& zip, const std::string& file, const std::string& config,
                  const std::string& dir, std::map<std::string, at::Tensor>& out,
                  std::map<std::string, std::string>* views = nullptr, const SharedBytes* shared = nullptr);

struct Program;

/// Each parameter, buffer and constant of program `name` against the dtype, rank and static
/// sizes its graph records for it (a damaged weights config is refused at load, naming the
/// config record and the weight), and the parameters the graph records with
/// requires_grad=False into p.frozen. Throws InputError.
void check_weights_against_graph(Program& p, const std::string& name);

}  // namespace ampscope::detail::pt2
