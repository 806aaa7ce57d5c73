// SPDX-License-Identifier: MIT
#pragma once
// run/ owns running things end to end: one pass over the probe set (pass.h), the comparison
// runner, the backend report, the benchmark and operator coverage (the public run.h API).

#include <ATen/ATen.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ampscope/engine/run.h"
#include "ampscope/engine/types.h"
#include "model/model.h"
#include "probes/probes.h"

namespace ampscope::detail {

struct Fp8GemmCounts;

/// The informative line of an error (TorchScript wraps the real message after a traceback).
std::string first_line(const std::string& s);
/// "cpu" | "cuda" | "cuda:N"; InputError when malformed or absent.
at::Device parse_device(const std::string& d);

/// One pass over the probe set (passes.cpp).
struct PassOptions {
    Precision precision = Precision::Fp32;
    std::vector<std::string> keep_fp32;
    std::vector<std::string> keep_bf16;  ///< FP8 passes only: modules whose GEMMs stay BF16
    bool train = false;
    uint64_t seed = 0;
    int batch_size = 64;
    bool inspect = true;
    /// fp8-delayed: the amax history's length and the margin of each operand's DelayedScaling.
    int fp8_amax_history = 1024;
    int fp8_margin = 0;
    bool fp8_what_if = false;  ///< a BF16 pass: every current-scaling recipe's operand statistics (Fp8WhatIfGuard)
    bool fp8_real_gemm = false;
    MxScaling mx_scaling = MxScaling::Floor;  ///< mxfp8 and the what-if's MX statistics: the block scales
    bool fp8_all_gemms = false;  ///< FP8 passes and the what-if: the model's own products too (Fp8AllGemmsScope)
    /// FP8 passes: the linear layers quantized and the other matrix products, counted here.
    Fp8GemmCounts* gemm_counts =
        nullptr;  ///< fp8 / fp8-rowwise: torch._scaled_mm GEMMs, not the emulation (no statistics)
    /// When given: set to true if the model changed its input tensors in place (each pass
    /// gets its own copies, so this only warns).
    bool* inputs_mutated = nullptr;
    /// The advisor's sensitivity passes: autocast only inside this module (everything else in
    /// FP32), and the outputs of these modules captured (needs inspect).
    std::optional<std::string> amp_only;
    std::vector<std::string> capture_modules;
    std::map<std::string, std::vector<at::Tensor>>* module_outputs = nullptr;
};

/// The warnings FP8 pass `pass` adds from its GEMM counts: products left unquantized and BF16 globs
/// that kept nothing (`first_fp8`, the run's first FP8 pass, only: every recipe alike), and the
/// convolutions its recipe left in BF16; of the BF16 pass of an FP8 what-if that met no GEMM, that
/// the what-if has nothing to show.
void add_fp8_warnings(std::vector<std::string>& warnings, const PassResult& pass, const Fp8GemmCounts& c,
                      const PassOptions& o, bool first_fp8);

/// The warnings of a training step's FP8 recipe `p` from its first forward's GEMM counts: the
/// model's products left unquantized, BF16 globs that kept nothing, the convolutions its recipe
/// left in BF16.
void add_fp8_coverage_warnings(std::vector<std::string>& warnings, Precision p, const Fp8GemmCounts& c,
                               const std::vector<std::string>& keep_bf16, bool all_gemms);

PassResult run_pass(Model& model, const ProbeSet& probes, const at::Device& device, const PassOptions& o,
                    ProgressObserver* progress, bool first_pass);

}  // namespace ampscope::detail
