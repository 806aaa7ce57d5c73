// SPDX-License-Identifier: MIT
#pragma once
// Storage-internal JSON forms of what a run's columns hold. Every kind of run has one header
// layout: {"kind", "spec", "backend", "model", "warnings", "tool_version", ...}, written from
// typed values and read back into them, field for field. Readers also take the layouts that
// earlier builds stored (tests/fixtures/store holds one file of each).

#include <nlohmann/json.hpp>

#include <string>

#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"

namespace ampscope::storage::ser {

/// The header of a comparison run (spec, criteria, backend, model, probes, ...).
nlohmann::ordered_json header(const RunResult& r);
/// Fills spec, criteria, backend, model, probes, warnings, labels, targets, tool_version.
/// Throws StoreError naming `column` (e.g. "file: run UUID: column runs.header_json").
void read_header(const std::string& text, RunResult& r, const std::string& column);

/// The header of a training run (spec, backend, model, resume, warnings, ...).
nlohmann::ordered_json train_header(const TrainResult& t);
/// Fills the header fields of `t` (not steps, checkpoints or totals); reads the layout of
/// earlier builds too (the training JSON without its steps). Throws StoreError naming `column`.
void read_train_header(const std::string& text, TrainResult& t, const std::string& column);

/// A benchmark result column (the JSON of json::bench_to_json): what was measured.
/// Throws StoreError naming `column`.
BenchResult read_bench(const std::string& text, const std::string& column);

/// A JSON column; StoreError naming `column` when it is not valid JSON.
nlohmann::json parse_column(const std::string& text, const std::string& column);

}  // namespace ampscope::storage::ser
