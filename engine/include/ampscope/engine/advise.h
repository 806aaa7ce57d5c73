// SPDX-License-Identifier: MIT
#pragma once
/// \file advise.h
/// The precision advisor: which modules must stay in FP32 for the AMP passes to meet the
/// run's fixed criteria. Per-module sensitivity (the error a module itself introduces, on the
/// FP32 reference's own inputs), then a search for a minimal FP32 set in which every
/// candidate is checked by a real pass against one reference.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ampscope/engine/run.h"
#include "ampscope/engine/types.h"

namespace ampscope {

/// Which modules are candidates: "leaf" (modules without children), "block" (each element of
/// a numbered container such as `blocks.0` or `layers.3`, and every leaf outside one), or a
/// depth N >= 1 (modules with N path components, and shallower leaves).
struct Granularity {
    enum class Kind { Leaf, Block, Depth } kind = Kind::Leaf;
    int depth = 0;
};
/// "leaf" | "block" | a positive integer; InputError otherwise (field `--granularity`).
Granularity parse_granularity(const std::string& text);
std::string to_string(const Granularity& g);
/// The candidate modules of `modules` (dotted paths as named_modules() gives, root "") at `g`.
std::vector<std::string> candidate_modules(const std::vector<std::string>& modules, const Granularity& g);

/// The error one module introduces under autocast, measured on the FP32 reference's own
/// inputs to it (everything else runs in FP32), against its FP32 output.
struct ModuleSensitivity {
    std::string module;
    Precision precision = Precision::Fp16;
    int order = 0;          ///< execution order of the module's first op
    double sqnr_db = 0;     ///< 20 log10(|ref| / |amp - ref|), as torch.ao.ns compute_sqnr; +inf when equal
    double rel_error = 0;   ///< |amp - ref| / |ref| (Frobenius norms)
    int64_t overflow = 0;   ///< output elements finite in FP32, non-finite under AMP
    int64_t underflow = 0;  ///< output elements non-zero in FP32, zero under AMP
    int64_t elements = 0;   ///< output elements compared
    bool origin = false;    ///< the AMP pass's first non-finite value is born in it
};

/// Why a module is in the set: the criterion that fails without it.
struct AdviceReason {
    std::string module;
    std::string why;     ///< "origin" | "overflow" | "flips" | "tolerance" | "quality" | "nonfinite"
    std::string detail;  ///< the failing criterion's detail when the module is left out
};

/// The search over an ordered candidate list for a minimal set that passes. `passes(set)` is
/// a real evaluation, called once per distinct set: at most 2 k ceil(log2 n) + 2 times for n
/// candidates and an answer of k when the criteria are monotone in the set (more FP32 never
/// hurts), one fewer when `empty_set_fails` (the caller already saw the empty set fail, e.g.
/// the plain AMP passes: it is not evaluated again). The result is then checked one removal
/// at a time so that no single member can be dropped even when they are not monotone.
struct SearchOutcome {
    bool found = false;            ///< false: even the whole candidate list fails
    std::vector<std::string> set;  ///< minimal: dropping any member fails
    int evaluations = 0;           ///< calls of `passes`
};
SearchOutcome minimal_passing_set(const std::vector<std::string>& ordered,
                                  const std::function<bool(const std::vector<std::string>&)>& passes,
                                  bool empty_set_fails = false);

struct AdviseSpec {
    RunSpec run;  ///< model, probes, precisions, device, mode, criteria, seed, batch size
    Granularity granularity;
    /// The verifying run of the set found (e.g. a recorded comparison with keep_fp32 = the
    /// set): its verdict decides between Found (accepted) and Unverified. Unset: the result
    /// stays Found, not yet verified (apply_verification when the verdict is known).
    std::function<Verdict(const std::vector<std::string>& keep_fp32)> verify;
    /// Advising a recorded run (advise_spec_of): its id and the model and probe set it ran
    /// on; the advice refuses files that changed since (sha256, weights_sha256). Empty: a new
    /// spec, nothing to compare.
    std::string recorded_run;
    ModelInfo recorded_model;
    ProbeInfo recorded_probes;
};

/// The advice of recorded run `r` (both front ends): its model, probes, precisions, device,
/// mode, seed, batch size and criteria as fixed before its first pass, without its kept sets
/// and FP8 what-if statistics; advised_from = its id. The advice checks that the model and
/// probe files are still the ones the run used.
AdviseSpec advise_spec_of(const RunResult& r, Granularity granularity);

struct AdviseResult {
    /// Unverified: the search's passes accepted the set but its verifying run did not (the
    /// model's passes are not reproducible); the set is reported, not offered as advice.
    enum class Outcome { Found, AlreadyAccepted, InvalidReference, Fp32CannotPass, WholeModelOnly, Unverified };
    Outcome outcome = Outcome::Found;
    std::string message;  ///< plain statement of the outcome and its reason
    BackendReport backend;
    ModelInfo model;
    std::vector<std::string> candidates;         ///< in search order
    std::vector<ModuleSensitivity> sensitivity;  ///< per candidate and precision, ranked (worst first)
    std::vector<std::string> keep_fp32;          ///< the minimal set (execution order), kept in `kept_in`
    /// Fp32: the set runs without autocast (fp16/bf16 passes, RunSpec::keep_fp32); Bf16: an FP8
    /// recipe's set, left out of FP8 in BF16 autocast (RunSpec::keep_bf16).
    Precision kept_in = Precision::Fp32;
    std::vector<AdviceReason> reasons;
    int evaluations = 0;                              ///< candidate sets checked by real passes
    int passes_used = 0;                              ///< forward passes over the probe set (all of them)
    double fp32_share_ops = 0, fp32_share_flops = 0;  ///< of the model's ops and FLOPs in the set (kept_in)
    std::vector<Comparison> final_comparisons;        ///< of the set found, one per precision
    /// What every run of the model says (its weights not float32, a static batch, ...).
    std::vector<std::string> warnings;
};

/// Progress stages: "reference", "sensitivity", "search", "shares". Cancel between passes
/// throws Cancelled; `partial` (when given) holds what was found so far.
AdviseResult advise(const AdviseSpec& spec, ProgressObserver* progress = nullptr, AdviseResult* partial = nullptr);

/// The verifying run's verdict on a Found set: Found when accepted, else Unverified (with a
/// message saying why the set is not advice). Other outcomes are left as they are.
void apply_verification(AdviseResult& r, Verdict verdict);

/// A Python snippet applying the same FP32 regions to the user's own nn.Module; for an FP8
/// recipe (is_fp8), torchao's conversion leaving the set out of FP8 (module_filter_fn).
std::string python_snippet(const std::vector<std::string>& keep_fp32, Precision precision, bool all_gemms = false);

std::string to_string(AdviseResult::Outcome o);

}  // namespace ampscope
