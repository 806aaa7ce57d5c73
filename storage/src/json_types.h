// SPDX-License-Identifier: MIT
// nlohmann's to_json / from_json for engine types, the one place that defines them (the engine
// defines none): `ordered_json(m)` writes the stored shape (keys in the stored order),
// `j.get<T>()` reads it. Readers throw json::exception on a missing key or a wrong type, which
// the callers turn into a StoreError naming the column.
#pragma once

#include <nlohmann/json.hpp>

#include <utility>

#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"
#include "ampscope/engine/types.h"

namespace ampscope {

/// source, kind, sha256, weights_sha256, mode, parameters, modules, format; every key read
/// with `at` except format (absent before torch.export programs: "").
void to_json(nlohmann::ordered_json& j, const ModelInfo& m);
void from_json(const nlohmann::json& j, ModelInfo& m);

/// enabled, init_scale, growth_factor, backoff_factor, growth_interval; every key optional when
/// read (a header of an earlier build lacks some): ScalerOptions' defaults.
void to_json(nlohmann::ordered_json& j, const ScalerOptions& s);
void from_json(const nlohmann::json& j, ScalerOptions& s);

/// The backend report (device, versions, capabilities, notes); read with `at`, the keys a run
/// header stored before schema v7 (cc, cuda_devices, bf16, fp16, threads) read where the new
/// ones are absent.
void to_json(nlohmann::ordered_json& j, const BackendReport& b);
void from_json(const nlohmann::json& j, BackendReport& b);

/// source, sha256, count, tags, input_shapes, has_labels, has_targets, then label_width for
/// token labels only (written when > 0, read as 0 when absent); the other keys read with `at`.
void to_json(nlohmann::ordered_json& j, const ProbeInfo& p);
void from_json(const nlohmann::json& j, ProbeInfo& p);

/// A training run's spec, every key read with `at` (TrainSpec::output is not stored); the
/// precision is one `train` runs (see training_precision).
void to_json(nlohmann::ordered_json& j, const TrainSpec& s);
void from_json(const nlohmann::json& j, TrainSpec& s);

/// The first non-finite op: keys in alphabetical order (grad_fn, index, module, op, samples,
/// stage), as runs have always been shown; grad_fn only for the backward pass (read as ""
/// when absent), the other keys read with `at`. A run without one stores null (jmap::origin).
void to_json(nlohmann::ordered_json& j, const Origin& o);
void from_json(const nlohmann::json& j, Origin& o);

namespace storage::jtypes {
/// A training's precision: one of kTrainingPrecisions, what `train` runs; anything else (fp32, an
/// unknown word) is a json::type_error naming `field`.
Precision training_precision(const nlohmann::json& v, const char* field);
/// A spec's "fp8_delayed" object: {amax_history, margin} as `run` and `train` accept them
/// (--fp8-amax-history, --fp8-margin), checked before narrowing to int: a stored run is never
/// shown with other settings. InputError naming spec.fp8_delayed.<key>.
std::pair<int, int> fp8_delayed_settings(const nlohmann::json& d);
}  // namespace storage::jtypes

}  // namespace ampscope
