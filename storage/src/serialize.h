// SPDX-License-Identifier: MIT
#pragma once
// Storage-internal JSON forms of a run's header (spec, criteria, backend, model, probes):
// stored as text so that a run read back equals the run written, field for field.

#include <nlohmann/json.hpp>

#include "ampscope/engine/run.h"

namespace ampscope::storage::ser {

nlohmann::json header(const RunResult& r);
/// Fills spec, criteria, backend, model, probes, warnings, labels, targets; throws
/// nlohmann::json::exception on malformed input.
void read_header(const nlohmann::json& j, RunResult& r);

nlohmann::json origin(const std::optional<Origin>& o);
std::optional<Origin> read_origin(const nlohmann::json& j);

}  // namespace ampscope::storage::ser
