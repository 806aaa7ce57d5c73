// SPDX-License-Identifier: MIT
// Sequence outputs in a comparison run: an output [N, T, V] (or [N, V, T] with --sequence-axis 2)
// is judged per position, positions masked out by the mask input excluded, token labels [N, T]
// checked against it. The comparison itself is torch-free (compare/tokens.cpp).
#include <algorithm>

#include "ampscope/engine/errors.h"
#include "run/comparison.h"

namespace ampscope::detail {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
    std::string out = "[N";
    for (auto d : s) out += ", " + std::to_string(d);
    return out + "]";
}

std::string joined(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out.empty() ? "(none named)" : out;
}

/// Scores [N, V, T] per sample reordered to [N, T, V].
PassResult positions_first(const PassResult& p, const SequenceLayout& s) {
    PassResult r;
    r.precision = p.precision;
    r.num_outputs = p.num_outputs;
    r.outputs.resize(p.outputs.size());
    const size_t T = size_t(s.length), V = size_t(s.vocab), per = T * V;
    for (size_t i = 0; i * per < p.outputs.size(); ++i)
        for (size_t v = 0; v < V; ++v)
            for (size_t t = 0; t < T; ++t) r.outputs[i * per + t * V + v] = p.outputs[i * per + v * T + t];
    return r;
}

/// The mask input as N x T bytes (nonzero: compared).
std::vector<uint8_t> mask_of(const at::Tensor& m, const std::string& name, const std::string& file, int64_t n,
                             int length) {
    if (m.dim() != 2 || m.size(0) != n || m.size(1) != length)
        throw InputError(file, name,
                         "the mask input is " + std::string(c10::toString(m.scalar_type())) + " " +
                             c10::str(m.sizes()) + "; expected [N, T] = [" + std::to_string(n) + ", " +
                             std::to_string(length) +
                             "], one entry per position of the sequence output (nonzero: compared)");
    const auto b = m.ne(0).to(at::kByte).contiguous().cpu();
    return std::vector<uint8_t>(b.data_ptr<uint8_t>(), b.data_ptr<uint8_t>() + b.numel());
}

}  // namespace

Truth ComparisonRun::truth() const {
    return Truth{probes.labels, probes.targets, probes.label_width};
}

void ComparisonRun::resolve_sequence_inputs() {
    auto& c = res.criteria;
    const auto& names = model->input_names;
    const bool named = !c.mask_input.empty();
    if (named && std::find(names.begin(), names.end(), c.mask_input) == names.end())
        throw InputError("", "mask_input",
                         "'" + c.mask_input + "': the model has no input of that name; its inputs: " + joined(names));
    if (!named && std::find(names.begin(), names.end(), "attention_mask") != names.end())
        c.mask_input = "attention_mask";
    const bool token_metric =
        c.quality_metric == QualityMetric::Perplexity || c.quality_metric == QualityMetric::TokenAccuracy;
    if (c.quality_metric_set && token_metric && probes.label_width == 0)
        throw InputError(
            spec.probes, "labels",
            "quality_metric " + to_string(c.quality_metric) + " needs token labels [N, T] in the probe set");
    if (!c.quality_metric_set && probes.label_width > 0) c.quality_metric = QualityMetric::Perplexity;
    if (c.quality_metric_set && c.quality_metric == QualityMetric::Accuracy && probes.label_width > 0)
        throw InputError(
            spec.probes, "labels",
            "token labels [N, " + std::to_string(probes.label_width) +
                "] cannot be scored by quality_metric accuracy (class labels [N], one decision per sample); expected "
                "quality_metric token_accuracy or perplexity for token labels");
    if (token_metric && c.sequence_axis == 2)
        throw InputError("", "sequence_axis",
                         "2: quality_metric " + to_string(c.quality_metric) + " reads outputs laid out [N, T, V]");
}

void ComparisonRun::setup_sequence(const PassResult& ref) {
    const auto& c = res.criteria;
    const auto& shape = ref.output_shape;
    const bool wanted = c.sequence_axis >= 1 || (shape.size() == 2 && probes.targets.empty());
    if (!wanted) {
        if (probes.label_width > 0)
            throw InputError(spec.probes, "labels",
                             "token labels [N, " + std::to_string(probes.label_width) +
                                 "] need a sequence output [N, T, V]; the model's output is " + shape_str(shape) +
                                 " (a classifier takes labels [N])");
        return;
    }
    if (shape.size() != 2)
        throw InputError("", "sequence_axis",
                         std::to_string(c.sequence_axis) +
                             ": needs an output of rank 3 ([N, T, V] or [N, V, T]); the model's output is " +
                             shape_str(shape));
    sequence_axis = c.sequence_axis >= 1 ? c.sequence_axis : 1;
    SequenceLayout s;
    s.length = int(shape[size_t(sequence_axis - 1)]);
    s.vocab = int(shape[size_t(2 - sequence_axis)]);
    const auto& names = model->input_names;
    if (!c.mask_input.empty()) {
        const auto at = size_t(std::find(names.begin(), names.end(), c.mask_input) - names.begin());
        s.mask = mask_of(probes.inputs.at(at), c.mask_input, spec.probes, int64_t(probes.samples.size()), s.length);
        if (std::none_of(s.mask.begin(), s.mask.end(), [](uint8_t m) { return m != 0; }))
            throw InputError(
                spec.probes, c.mask_input,
                "every position is masked (the mask input holds only zeros): nothing would be compared; expected a "
                "nonzero entry at each position to compare");
    }
    check_labels_fit(shape, s);
    sequence = std::move(s);
}

void ComparisonRun::check_labels_fit(const std::vector<int64_t>& shape, const SequenceLayout& s) const {
    if (probes.labels.empty()) return;
    const size_t w = size_t(probes.label_width);
    if (w == 0)
        throw InputError(spec.probes, "labels",
                         "class labels [N] on a sequence output " + shape_str(shape) +
                             ": one label per sample has no position to score; expected token labels [N, T] = [N, " +
                             std::to_string(s.length) + "] (-100 ignored) or no labels");
    if (probes.label_width != s.length)
        throw InputError(spec.probes, "labels",
                         "token labels have " + std::to_string(probes.label_width) +
                             " positions; the sequence output has " + std::to_string(s.length) + " (" +
                             shape_str(shape) + ")");
    for (size_t i = 0; i < probes.labels.size(); ++i)
        if (probes.labels[i] != kIgnoreLabel && probes.labels[i] >= s.vocab)
            throw InputError(spec.probes, "labels",
                             "token label " + std::to_string(probes.labels[i]) + " of sample '" +
                                 probes.samples[i / w].id + "' position " + std::to_string(i % w) +
                                 " is out of range; the output has " + std::to_string(s.vocab) + " tokens");
    if (!scores_a_token_label(probes)) throw no_token_label_scored(spec.probes, "scored");
}

Comparison ComparisonRun::compare_pass(const PassResult& ref, const PassResult& amp) const {
    if (!sequence) return compare(ref, amp, probes.samples, truth(), res.criteria);
    if (sequence_axis == 1) return compare(ref, amp, probes.samples, truth(), res.criteria, &*sequence);
    return compare(positions_first(ref, *sequence), positions_first(amp, *sequence), probes.samples, truth(),
                   res.criteria, &*sequence);
}

}  // namespace ampscope::detail
