// SPDX-License-Identifier: MIT
#pragma once
// A nesting limit for JSON read from outside (checkpoint headers, index files, bundles):
// nlohmann parses without recursion, but printing a value (an error message about it),
// comparing or copying it recurse, so a value nested 100k deep crashed the process with a
// stack overflow instead of being refused. Header-only: for the targets that link nlohmann-json.
#include <string>

#include <nlohmann/json.hpp>

#include "ampscope/engine/errors.h"

namespace ampscope {

/// Deeper than any file ampscope or the frameworks write (a safetensors header nests 3 levels,
/// a run or replay JSON under 10), far below what overflows a thread's stack.
constexpr int kMaxJsonDepth = 64;

/// Throws InputError(file, field, "nests deeper than 64 levels; expected <expected>") once a
/// parse callback's `depth` passes kMaxJsonDepth (for callbacks that watch more than depth).
inline void check_json_depth(int depth, const std::string& file, const std::string& field,
                             const std::string& expected) {
    if (depth > kMaxJsonDepth)
        throw InputError(file, field,
                         "nests deeper than " + std::to_string(kMaxJsonDepth) + " levels; expected " + expected);
}

/// A callback for nlohmann::json::parse doing only check_json_depth.
inline auto json_depth_limit(std::string file, std::string field, std::string expected) {
    return [file = std::move(file), field = std::move(field), expected = std::move(expected)](
               int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        check_json_depth(depth, file, field, expected);
        return true;
    };
}

}  // namespace ampscope
