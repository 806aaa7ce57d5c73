// SPDX-License-Identifier: MIT
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace ampscope::storage {
/// The most scores per sample a stored pass may hold (PassResult::num_outputs is an int): a
/// language model's [T, V] logits are T x V per sample, 6.4 M for GPT-2 at 128 tokens.
constexpr int64_t kMaxOutputsPerSample = std::numeric_limits<int>::max();
}  // namespace ampscope::storage

namespace ampscope::storage::schema {
/// migrations()[i] takes user_version i to i+1.
const std::vector<std::string>& migrations();
/// Tables and the columns ampscope reads (validation of files from others).
const std::map<std::string, std::vector<std::string>>& expected_tables();
}  // namespace ampscope::storage::schema
