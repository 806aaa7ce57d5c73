// SPDX-License-Identifier: MIT
#pragma once
#include <map>
#include <string>
#include <vector>

namespace ampscope::storage::schema {
/// migrations()[i] takes user_version i to i+1.
const std::vector<std::string>& migrations();
/// Tables and the columns ampscope reads (validation of files from others).
const std::map<std::string, std::vector<std::string>>& expected_tables();
}  // namespace ampscope::storage::schema
