// SPDX-License-Identifier: MIT
#pragma once
/// \file errors.h
/// The storage library's error type.

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ampscope/engine/errors.h"

namespace ampscope::storage {

/// Database problems: unreadable, not SQLite, newer schema, hostile content. Messages name
/// the file (and, for a malformed column, the run and the column); `remedies`, the settings
/// that avoid the problem (engine/errors.h Remedy: "no_db").
class StoreError : public std::runtime_error {
public:
    explicit StoreError(const std::string& what, std::vector<Remedy> remedies = {})
        : std::runtime_error(what), remedies_(std::move(remedies)) {}
    explicit StoreError(const char* what) : std::runtime_error(what) {}
    const std::vector<Remedy>& remedies() const { return remedies_; }

private:
    std::vector<Remedy> remedies_;
};

}  // namespace ampscope::storage
