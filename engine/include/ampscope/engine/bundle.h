// SPDX-License-Identifier: MIT
#pragma once
// An incident bundle (docs/capture.md, format "ampscope-incident" version 1): the folder the
// Python capture package (python/ampscope_capture) writes at a training job's first non-finite
// loss, gradient, gradient norm or skipped step, read back for `ampscope-cli replay BUNDLE` and the GUI's File → Open
// incident….

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ampscope/engine/replay.h"

namespace ampscope {

/// What incident.json says, with the named files as paths inside the bundle.
struct IncidentBundle {
    std::string dir;    ///< the bundle folder as given
    std::string model;  ///< dir/model.pt2, or "" when export failed (export_error says why)
    std::string
        checkpoint;  ///< dir/checkpoint.pt: model, optimizer (groups with param_names), scaler, lr_scheduler, rng_state
    std::string batch;                   ///< dir/batch.pt: inputs in the program's order, labels or targets
    std::string loss;                    ///< model | ce | mse | lm
    std::string precision;               ///< fp16 | bf16 (the job's autocast dtype)
    std::string device_type;             ///< cpu | cuda (where the job ran)
    std::string optimizer_kind;          ///< sgd | adam | adamw | other
    std::string optimizer_class;         ///< the qualified Python class name
    std::vector<std::string> keep_fp32;  ///< module-path globs the job ran outside autocast
    std::optional<double> clip_grad_norm;
    bool scaler = false;  ///< a GradScaler ran (its state is the checkpoint's "scaler")
    int64_t step = 0, rank = 0, world_size = 1, accumulation_steps = 1;
    std::string detected_what;  ///< loss | grad | grad_norm | skip | spike
    std::string detected_detail, framework, framework_version, export_error;
    std::vector<int64_t>
        origin_ranks;  ///< under torchrun with watch_ddp: the ranks the incident started on (else empty)
};

/// Reads and checks DIR/incident.json (JSON nested at most kMaxJsonDepth, format and version,
/// every field's type and value) and that every file it names is a regular file in the
/// bundle. Throws InputError naming the file and the field: exit 2 in the CLI.
IncidentBundle read_bundle(const std::string& dir);

/// The replay the bundle asks for: its model, checkpoint, batch, loss, precision, FP32 regions,
/// clipping (given: null is no clipping), optimizer kind, scaler (none: no_scaler) and what the
/// job saw (spec.incident). `ampscope-cli replay BUNDLE` and the GUI's Open incident… start here.
ReplaySpec replay_spec_of(const IncidentBundle& b);

/// A replay of an incident bundle in words: what the job saw (step, rank of world size,
/// framework) and whether the replay reproduces it; "" for a replay started from files. The
/// CLI's summary and the GUI's Replay tab say the same.
std::string incident_in_words(const ReplayResult& r);

}  // namespace ampscope
