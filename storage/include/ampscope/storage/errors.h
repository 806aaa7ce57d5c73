// SPDX-License-Identifier: MIT
#pragma once
/// \file errors.h
/// The storage library's error type.

#include <stdexcept>

namespace ampscope::storage {

/// Database problems: unreadable, not SQLite, newer schema, hostile content. Messages name
/// the file (and, for a malformed column, the run and the column).
class StoreError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace ampscope::storage
