// SPDX-License-Identifier: MIT
#pragma once
/// \file errors.h
/// Typed errors the engine throws. The CLI maps them to exit codes (InputError 2,
/// ModelError/BackendError 3, Cancelled 130); the GUI to dialogs.

#include <stdexcept>
#include <string>
#include <vector>

namespace ampscope {

/// A setting that lets a refused input through, named as a field ("force", "no_db",
/// "strip_prefix" with value "model.", "non_strict"); the message says it in words, and each
/// front end says how its users give it (the CLI its flag: cli/common.cpp named_by_flag).
struct Remedy {
    std::string field;
    std::string value;  ///< what to give it, where it takes one
};

/// Bad input: names the file, the field and what was expected.
class InputError : public std::runtime_error {
public:
    InputError(std::string file, std::string field, std::string expected, std::vector<Remedy> remedies = {})
        : std::runtime_error(compose(file, field, expected)),
          file_(std::move(file)),
          field_(std::move(field)),
          expected_(std::move(expected)),
          remedies_(std::move(remedies)) {}
    const std::string& file() const { return file_; }
    const std::string& field() const { return field_; }
    const std::string& expected() const { return expected_; }
    const std::vector<Remedy>& remedies() const { return remedies_; }

private:
    static std::string compose(const std::string& file, const std::string& field, const std::string& expected) {
        std::string s = file.empty() ? std::string() : file;
        if (!field.empty()) s += (s.empty() ? "" : ": ") + std::string("field '") + field + "'";
        return s + (s.empty() ? "" : ": ") + expected;
    }
    std::string file_, field_, expected_;
    std::vector<Remedy> remedies_;
};

/// The model failed while running (shape mismatch inside, unsupported op, out of memory).
class ModelError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// The requested device or dtype is not available.
class BackendError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// The user cancelled; partial results stay recorded.
class Cancelled : public std::runtime_error {
public:
    Cancelled() : std::runtime_error("cancelled") {}
};

}  // namespace ampscope
