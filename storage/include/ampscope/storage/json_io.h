// SPDX-License-Identifier: MIT
#pragma once
/// \file json_io.h
/// The run-result JSON of ../shared/CONTRACT.md and the criteria file, both ways (one mapping
/// per type: storage/src/json_map.h, shared with what the store keeps).
/// nlohmann-json stays inside the .cpp; callers see strings.

#include <string>
#include <vector>

#include "ampscope/engine/advise.h"
#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"
#include "ampscope/engine/rules.h"

namespace ampscope::json {

/// Reads a criteria JSON document (every key optional) over `base`. Throws InputError
/// naming `file` and the offending key.
Criteria parse_criteria(const std::string& text, const std::string& file, Criteria base = {});

/// Serialises a criteria object (with fixed_at when set).
std::string criteria_to_json(const Criteria& c);

/// The run result as the contract's JSON. `with_outputs` adds passes[].outputs (scores per
/// sample) and comparisons[].decisions. `damaged` (parts of a stored run that could not be
/// read, see Store::load_run) becomes a "damaged" array when not empty.
std::string run_to_json(const RunResult& r, bool with_outputs = false, int indent = 2,
                        const std::vector<std::string>& damaged = {});

/// The training result JSON of ../shared/CONTRACT.md.
std::string train_to_json(const TrainResult& r, int indent = 2);

/// A benchmark result as JSON: the benchmarked policy (`spec`: FP32 regions, mode), and per AMP
/// precision the validation run it relies on (its review and criteria) or why none does.
/// "validated" is true when every precision has one; "validation_run" is the first's.
std::string bench_to_json(const BenchResult& r, const BenchSpec& spec, const std::vector<Validation>& validations,
                          int indent = 2);

/// Operator coverage as JSON.
std::string ops_to_json(const OpsReport& r, int indent = 2);

/// The backend report as JSON.
std::string backend_to_json(const BackendReport& b, int indent = 2);

/// What `ampscope-cli advise` adds to the advisor's result: the verifying run and, measured
/// only after it was accepted, the AMP pass with the set against full AMP and FP32.
struct AdviseRecord {
    std::string verified_run;      ///< "" when none
    std::string verified_verdict;  ///< "accepted" | "rejected" | ""
    std::string advised_from;      ///< the recorded run advised on, "" when the flags gave the run
    std::string granularity;
    const BenchResult* full_amp = nullptr;  ///< FP32 and AMP without regions
    const BenchResult* with_set = nullptr;  ///< AMP with the set in FP32
};
/// The advise JSON of CONTRACT.md (also a --keep-fp32-file: its "keep_fp32" list).
std::string advise_to_json(const AdviseResult& r, const AdviseRecord& rec, int indent = 2);

}  // namespace ampscope::json
