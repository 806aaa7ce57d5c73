// SPDX-License-Identifier: MIT
#pragma once
// probes/ owns the data the passes run on: the demo models' built-in probe and training sets,
// and probe files (.pt written by torch.save, .csv), every field checked against what the file
// holds before anything is trusted (pt_archive.h reads the torch.save zip).

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/run.h"
#include "ampscope/engine/types.h"
#include "model/model.h"

namespace ampscope::detail {

/// A probe set in memory, on the CPU: floating inputs as float32, integer and bool inputs (token
/// ids, masks, positions) in their own dtype.
struct ProbeSet {
    std::vector<at::Tensor> inputs;  ///< each [N, ...]
    std::vector<SampleInfo> samples;
    std::vector<int64_t> labels;  ///< N, N x label_width (token labels, -100 ignored) or empty
    int label_width = 0;          ///< token labels [N, T]: T; 0 = one class label per sample
    std::vector<float> targets;   ///< N x target_width or empty
    int target_width = 0;
    ProbeInfo info;
};

/// Loads "demo" (the model's built-in set) or a .pt / .csv file and checks it against the
/// model's expected input shapes. Throws InputError naming the file and field.
/// `scalar_inputs`: 0-d inputs after the first (a per-batch value, e.g. Hugging Face's
/// num_items_in_batch) are taken whole (training data, replays); else refused by name.
ProbeSet load_probes(const std::string& source, Model& model, uint64_t seed, bool scalar_inputs = false);

/// Reads a probe-format file (.pt written by torch.save, or .csv) without a model: every
/// tensor checked against the data the file holds, dtypes, labels, ids (unique, non-empty,
/// UTF-8) validated. Throws InputError naming the file and field. (Fuzzed: tests/fuzz.)
ProbeSet read_probe_file(const std::string& path);

/// Training data: "demo" (a learnable set for the demo model, in file order) or a probe-format
/// file with labels or targets (`need_truth`; a program that returns its own loss needs neither).
/// `field`: what the caller calls the file ("data"; a replay's "batch_file"), the field a refusal of
/// the file itself names.
ProbeSet load_training_data(const std::string& source, Model& model, uint64_t seed, bool need_truth = true,
                            const std::string& field = "data");

/// Whether token labels [N, T] score anything: a label other than -100 at a position from 1 to
/// T - 1 (the logits at t predict the label at t + 1: position 0's label never is).
bool scores_a_token_label(const ProbeSet& ps);

/// The InputError for token labels that score nothing (`what`: what would have used them).
InputError no_token_label_scored(const std::string& file, const std::string& what);

/// Labels and targets of a probe or training set against the scores the model gives.
void check_outputs_fit(const ProbeSet& probes, const std::string& file, int num_outputs);

}  // namespace ampscope::detail
