// SPDX-License-Identifier: MIT
#pragma once
/// \file compare.h
/// Score- and decision-level comparison of an AMP pass against the FP32 reference.
/// Pure C++ (no LibTorch): tested directly with hand-made vectors.

#include "ampscope/engine/types.h"

namespace ampscope {

/// Decisions that are not a class index.
constexpr int kAbstain = -1;    ///< a tie under TieRule::Abstain
constexpr int kNonFinite = -2;  ///< a score vector holding NaN or +Inf (or only -Inf): no decision at all

/// Decision for one score vector: argmax, where every score within `tie_tolerance` of the
/// maximum counts as tied; LowestIndex picks the lowest tied index, Abstain returns kAbstain
/// on a tie. -inf scores (masked entries: probability 0) are never chosen. A vector with a NaN or
/// +inf score, or with every score -inf, has no decision: kNonFinite (unlike torch.argmax, which
/// returns the index of a NaN, or of +inf: neither is a class the model chose, both are an
/// overflow).
int decide(const float* scores, int n, double tie_tolerance, TieRule rule);

/// "3", "abstain" or "non-finite": how a decision is shown in tables and summaries.
std::string decision_label(int decision);

/// Top-1 minus top-2 over finite scores (0 for fewer than two finite scores).
double margin(const float* scores, int n);

/// Ground truth for quality: labels (classifiers) or targets (regressors), or neither.
struct Truth {
    std::vector<int64_t> labels;  ///< size N (or N x label_width) or empty
    std::vector<float> targets;   ///< N x num_outputs or empty
    int label_width = 0;          ///< token labels [N, T]: T; 0 = one class label per sample
};

/// Label that a token position ignores (Hugging Face's ignore_index).
constexpr int64_t kIgnoreLabel = -100;

/// The layout of a sequence output: each sample's scores are [length, vocab], row-major, and
/// positions whose mask entry is 0 are not compared (mask empty: every position).
struct SequenceLayout {
    int length = 0;
    int vocab = 0;
    std::vector<uint8_t> mask;  ///< N x length, or empty
};

/// Quality of one pass's outputs under the criteria's metric; nullopt when the metric has
/// no ground truth to use.
std::optional<double> quality(const PassResult& pass, const Truth& truth, const Criteria& criteria,
                              int* worst_sample = nullptr);

/// Whether the run is a classifier (decisions and flips are meaningful).
bool is_classifier(int num_outputs, const Truth& truth);

/// Compares `amp` against `ref` (same samples, same outputs) under fixed criteria. With a
/// sequence layout, decisions, flips and the token criteria are per unmasked position, and
/// masked positions take no part in the score deltas either.
Comparison compare(const PassResult& ref, const PassResult& amp, const std::vector<SampleInfo>& samples,
                   const Truth& truth, const Criteria& criteria, const SequenceLayout* sequence = nullptr);

/// Per-token figures of one sequence output against the reference (compare/tokens.cpp), and the
/// decision_flips, mean_kld and same_top criteria they decide. Scores: N x length x vocab.
void compare_tokens(const PassResult& ref, const PassResult& amp, const std::vector<SampleInfo>& samples,
                    const Truth& truth, const Criteria& criteria, const SequenceLayout& seq, Comparison& out,
                    std::vector<CriterionResult>& results);

/// Mean token cross-entropy (nats) of one sequence output against token labels, causal-LM
/// shift (logits at t predict the label at t + 1, kIgnoreLabel skipped); nullopt without
/// labels. `scored` receives the number of labels scored and `correct` the top-1 hits.
std::optional<double> token_cross_entropy(const float* scores, size_t n, const SequenceLayout& seq, const Truth& truth,
                                          int64_t* scored = nullptr, int64_t* correct = nullptr);

}  // namespace ampscope
