// SPDX-License-Identifier: MIT
#pragma once
/// \file compare.h
/// Score- and decision-level comparison of an AMP pass against the FP32 reference.
/// Pure C++ (no LibTorch): tested directly with hand-made vectors.

#include "ampscope/engine/types.h"

namespace ampscope {

/// Decision for one score vector: argmax, where every score within `tie_tolerance` of the
/// maximum counts as tied; LowestIndex picks the lowest tied index, Abstain returns -1 on a
/// tie. Non-finite scores: NaN never wins; returns -1 when no score is finite.
int decide(const float* scores, int n, double tie_tolerance, TieRule rule);

/// Top-1 minus top-2 over finite scores (0 for fewer than two finite scores).
double margin(const float* scores, int n);

/// Ground truth for quality: labels (classifiers) or targets (regressors), or neither.
struct Truth {
    std::vector<int64_t> labels;  ///< size N or empty
    std::vector<float> targets;   ///< N x num_outputs or empty
};

/// Quality of one pass's outputs under the criteria's metric; nullopt when the metric has
/// no ground truth to use.
std::optional<double> quality(const PassResult& pass, const Truth& truth,
                              const Criteria& criteria, int* worst_sample = nullptr);

/// Whether the run is a classifier (decisions and flips are meaningful).
bool is_classifier(int num_outputs, const Truth& truth);

/// Compares `amp` against `ref` (same samples, same outputs) under fixed criteria.
Comparison compare(const PassResult& ref, const PassResult& amp,
                   const std::vector<SampleInfo>& samples, const Truth& truth,
                   const Criteria& criteria);

}  // namespace ampscope
