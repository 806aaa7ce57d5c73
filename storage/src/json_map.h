// SPDX-License-Identifier: MIT
#pragma once
// The one JSON mapping of each value type that is both stored (run headers, benchmark
// results) and shown (--json output): criteria, origin, model identity.
// Writers give the keys of ../shared/CONTRACT.md; readers also accept what earlier builds
// stored, so that every recorded run still reads back.

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "ampscope/engine/run.h"

namespace ampscope::storage::jmap {

using nlohmann::json;
using nlohmann::ordered_json;

/// JSON has no NaN/Inf: non-finite numbers become strings "nan", "inf", "-inf".
ordered_json num(double v);
/// Reads what `num` wrote (a number, or one of its strings).
double read_num(const json& j);

/// Criteria with every key; fixed_at only when set.
ordered_json criteria(const Criteria& c);
/// Criteria from `j` over `base`; every key optional, values checked. Throws InputError naming
/// `file` and the key (the criteria file the user gives, and stored criteria alike).
Criteria read_criteria(const json& j, const std::string& file, Criteria base = {});

ordered_json origin(const std::optional<Origin>& o);
std::optional<Origin> read_origin(const json& j);

/// Source and hashes of a model (what benchmark and training JSON show).
ordered_json model_identity(const ModelInfo& m);
/// Reads model_identity's keys, each optional.
ModelInfo read_model_identity(const json& j);

}  // namespace ampscope::storage::jmap
