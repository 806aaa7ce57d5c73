// SPDX-License-Identifier: MIT
#pragma once
// Checkpoints written by Python training code hold objects LibTorch's unpickler cannot build
// (a config dataclass, pathlib.Path, numpy values, a pickled GradScaler): the pickle is
// rewritten so that each becomes a stand-in (None, its name, or a GradScaler's state dict),
// named in the warnings. Engine-internal; used by read_pt_archive (pt_archive.cpp).

#include <ATen/core/ivalue.h>

#include <map>
#include <string>
#include <vector>

namespace ampscope::detail {

/// Deeper than any checkpoint (check_tensors refuses past 64 levels with its own message).
constexpr int kMaxPickleDepth = 100;

/// A pickle rewritten for LibTorch's unpickler, and the globals it renamed `ampscope.g<k>`.
struct Lenient {
    std::string pickle;
    std::vector<std::string> globals;  ///< k -> module.name as the file wrote it
};

/// Rewrites `data` for LibTorch's unpickler: the globals it cannot build renamed `ampscope.g<k>`
/// (their classes appended to `skipped` by name), integers beyond 32 bits made readable.
Lenient lenient_pickle(const char* data, size_t size, const std::string& file, std::vector<std::string>& skipped);

/// The type resolver and object loader for the globals lenient_pickle renamed `ampscope.g<k>`:
/// each object is built as a one-slot Object holding its stand_in(), unwrapped by
/// resolve_stand_ins() (the unpickler's loader must return an Object).
struct StandInLoader {
    const Lenient& lenient;
    std::vector<std::string>& skipped;
    std::map<std::string, c10::ClassTypePtr> types;

    c10::StrongTypePtr resolve(const c10::QualifiedName& qn);
    c10::intrusive_ptr<c10::ivalue::Object> load(const c10::StrongTypePtr& type, const c10::IValue& args);
};

/// The stand-ins' values in place of their one-slot Objects, containers walked once each.
c10::IValue resolve_stand_ins(const c10::IValue& root);
/// Refuses a value nested deeper than kMaxPickleDepth (a reference cycle included).
void check_depth(const c10::IValue& root, const std::string& file);

}  // namespace ampscope::detail
