// SPDX-License-Identifier: MIT
#pragma once
/// \file hash.h
/// Incremental SHA-256 (OpenSSL) for model files, weights and probe sets.

#include <cstddef>
#include <memory>
#include <string>

namespace ampscope {

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void update(const void* data, size_t size);
    void update(const std::string& s) { update(s.data(), s.size()); }
    /// Lower-case hex digest; the object is finished afterwards.
    std::string hex();

private:
    struct Impl;
    std::unique_ptr<Impl> d;
};

/// SHA-256 of a whole file; throws InputError when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace ampscope
