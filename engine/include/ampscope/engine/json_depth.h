// SPDX-License-Identifier: MIT
#pragma once
// A nesting limit for JSON read from outside (checkpoint headers, index files, bundles,
// criteria): nlohmann parses without recursion, but printing a value (an error message about
// it), comparing or copying it recurse, so a value nested 100k deep crashed the process with a
// stack overflow instead of being refused. Header-only: for the targets that link nlohmann-json.
#include <nlohmann/json.hpp>

namespace ampscope {

/// Deeper than any file ampscope or the frameworks write (a safetensors header nests 3 levels,
/// a run or replay JSON under 10), far below what overflows a thread's stack.
constexpr int kMaxJsonDepth = 64;

/// A callback for nlohmann::json::parse that calls `fail()` (which throws the caller's error,
/// naming the file and field) as soon as the nesting passes kMaxJsonDepth; `also` sees every
/// event as a parse callback would (return its answer), for callers that watch keys too.
template <class Fail>
auto json_depth_limit(Fail fail) {
    return [fail](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > kMaxJsonDepth) fail();
        return true;
    };
}

}  // namespace ampscope
