// SPDX-License-Identifier: MIT
#pragma once
/// \file types.h
/// Plain value types of the engine's public API. No LibTorch here: storage, UI, CLI and
/// tests include this without paying for LibTorch headers.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ampscope/engine/fp8.h"

namespace ampscope {

/// Numeric policy of one pass. The reference is always Fp32; Fp16/Bf16 mean autocast
/// (a per-op policy), never a model converted with .half(). The simulated FP8 and block-scaled
/// passes (issue 30; linear layers' GEMMs on quantize-dequantized operands, the rest under BF16
/// autocast; engine/src/precision/fp8_pass.h), `run` only so far: Fp8 torchao's tensorwise
/// recipe (E4M3, one current scale per tensor), Fp8Rowwise torchao's rowwise recipe (a
/// power-of-two scale per row of the activation and per column of the weight), Mxfp8 (E4M3, an
/// E8M0 scale per 32 along the reduction dimension), Nvfp4 (E2M1, an E4M3 scale per 16 and a
/// per-tensor FP32 scale), Fp8Delayed Transformer Engine's delayed scaling (E4M3, one scale per
/// tensor from the amax history of the batches before).
enum class Precision { Fp32, Fp16, Bf16, Fp8, Fp8Rowwise, Mxfp8, Nvfp4, Fp8Delayed };
std::string to_string(Precision p);
/// Parses "fp32", "fp16", "bf16", "fp8", "fp8-rowwise", "mxfp8", "nvfp4", "fp8-delayed" (also "float16",
/// "bfloat16", "half"); nullopt otherwise.
std::optional<Precision> parse_precision(const std::string& s);
/// A simulated FP8 or block-scaled pass (Fp8, Fp8Rowwise, Mxfp8, Nvfp4, Fp8Delayed).
inline bool is_fp8(Precision p) {
    return p == Precision::Fp8 || p == Precision::Fp8Rowwise || p == Precision::Mxfp8 || p == Precision::Nvfp4 ||
           p == Precision::Fp8Delayed;
}

/// The current-scaling recipe that quantizes with scheme `s` (an FP8 what-if entry's recipe):
/// tensorwise fp8, rowwise fp8-rowwise, mx mxfp8, nvfp4 nvfp4.
inline Precision what_if_recipe(Fp8Scheme s) {
    switch (s) {
        case Fp8Scheme::Tensorwise: return Precision::Fp8;
        case Fp8Scheme::Rowwise: return Precision::Fp8Rowwise;
        case Fp8Scheme::Mx: return Precision::Mxfp8;
        case Fp8Scheme::Nvfp4: return Precision::Nvfp4;
    }
    return Precision::Fp8;
}

enum class Mode { Eval, Train };
std::string to_string(Mode m);

enum class TieRule { LowestIndex, Abstain };
std::string to_string(TieRule r);
std::optional<TieRule> parse_tie_rule(const std::string& s);

/// Perplexity and TokenAccuracy: sequence outputs with token labels [N, T] (causal-LM shift:
/// logits at position t predict the label at t + 1; label -100 ignored).
enum class QualityMetric { Accuracy, Mse, MaxAbsError, Perplexity, TokenAccuracy };
std::string to_string(QualityMetric m);
std::optional<QualityMetric> parse_quality_metric(const std::string& s);

/// A slice of the output vector with its own tolerances (e.g. logits vs a box head).
struct HeadTolerance {
    std::string name;
    int begin = 0;  ///< first score index
    int end = 0;    ///< one past the last score index
    double atol = 1e-3;
    double rtol = 1e-2;
};

/// Acceptance criteria: fixed (and timestamped) before the first pass, never edited after.
struct Criteria {
    double atol = 1e-3;
    double rtol = 1e-2;
    std::vector<HeadTolerance> heads;
    double tie_tolerance = 0.0;
    TieRule tie_rule = TieRule::LowestIndex;
    int max_flips = 0;
    QualityMetric quality_metric = QualityMetric::Accuracy;
    bool quality_metric_set = false;  ///< the user chose the metric explicitly
    double quality_threshold = 0.0;
    bool quality_threshold_set = false;
    bool allow_nonfinite = false;
    /// The model output compared (torch.export programs with several outputs: a name from the
    /// output tree or an index); "" = the first tensor output. Recorded as resolved.
    std::string output;
    /// Sequence outputs [N, T, V] (language models), judged per unmasked position: the largest
    /// fraction of positions whose top-1 token changes, the largest mean KL(ref || amp) of the
    /// softmax over V, the smallest fraction of positions with the same top-1.
    double max_flip_rate = 0.0;
    double max_mean_kld = 1e-3;
    double min_same_top = 0.99;
    /// The input whose nonzero entries mark the positions compared ("" = an input named
    /// attention_mask when the model has one, else every position); recorded as resolved.
    std::string mask_input;
    /// The output axis holding positions when the layout is not [N, T, V] (-1 = axis 1).
    int sequence_axis = -1;
    std::string fixed_at;  ///< ISO-8601 UTC, set by Runner before the first pass
};

/// Hardware and libraries a run used (or would use).
struct BackendReport {
    std::string device = "cpu";  ///< "cpu" or "cuda:N"
    std::string kind = "cpu";    ///< "cpu" | "cuda" | "hip" (ROCm still calls the device cuda)
    std::string torch_version;
    std::string cuda_version;  ///< empty when not a CUDA build / not used
    std::string cudnn_version;
    std::string hip_version;
    std::string name;  ///< CPU model or GPU name
    std::string compute_capability;
    bool cuda_available = false;
    int cuda_device_count = 0;
    bool bf16_supported = true;
    bool fp16_supported = true;
    int num_threads = 1;
    std::vector<std::string> notes;
};

/// One probe sample's identity.
struct SampleInfo {
    std::string id;
    std::string tag = "ordinary";
};

/// Statistics of one tensor in one pass over memory (see inspect/).
struct TensorStats {
    int64_t count = 0;
    int64_t nan = 0, posinf = 0, neginf = 0, zeros = 0;
    double min = 0, max = 0, absmax = 0;
    double min_nonzero_abs = 0;  ///< 0 when no finite non-zero element
    double mean = 0, rms = 0;    ///< over finite elements
    int64_t fp16_overflow = 0, fp16_subnormal = 0, fp16_underflow = 0;
    int64_t bf16_overflow = 0, bf16_subnormal = 0, bf16_underflow = 0;
    int64_t nonfinite() const { return nan + posinf + neginf; }
    /// Merges statistics of disjoint parts (e.g. batches).
    void merge(const TensorStats& o);
};

/// One observed op output in a pass.
struct LayerStat {
    int index = 0;               ///< execution index within one forward
    std::string module;          ///< dotted path as Python's named_modules() gives ("" = root)
    std::string op;              ///< ATen op name, e.g. "aten::linear"
    std::string dtype;           ///< output dtype ("float16", ...)
    std::vector<int64_t> shape;  ///< output shape of the first batch
    bool inputs_finite = true;   ///< all floating inputs finite, for every batch
    bool origin = false;         ///< non-finite born here (inputs finite, output not)
    bool autocast = false;       ///< autocast was enabled when the op ran
    double flops = 0;            ///< floating-point operations, summed over batches (see observer.cpp)
    TensorStats stats;
};

/// Where non-finite values were born.
struct Origin {
    std::string stage;  ///< "input" | "forward" | "loss" | "backward"
    std::string module;
    std::string op;
    int index = -1;
    std::vector<std::string> samples;
    std::string grad_fn;  ///< backward: the autograd node the op ran in (e.g. "MmBackward0")
};

/// Result of one pass over the probe set.
/// An fp8 / fp8-rowwise pass run again with real FP8 GEMMs (torch._scaled_mm on the same FP8
/// operands: torchao's Float8Linear without emulate), beside its simulated GEMMs (issue 30). The
/// pass itself, its comparison and its statistics stay the simulated ones; this says how far the
/// hardware's GEMMs land from them.
struct RealGemmCheck {
    bool ran = false;
    std::string reason;          ///< why it did not run ("" when it ran)
    std::string kernel;          ///< what ran: "aten::_scaled_mm on cpu" | "aten::_scaled_mm on cuda:0 (NAME, sm 9.0)"
    std::vector<float> outputs;  ///< the real GEMMs' scores [samples x num_outputs], as PassResult::outputs
    int64_t differing = 0;       ///< output values that differ from the simulated pass's (bitwise)
    double max_abs_diff = 0;     ///< max |real - simulated| over the finite pairs
    int decisions_differ = 0;    ///< samples whose decision differs from the simulated pass's
    int flips = 0;               ///< samples whose decision differs from the FP32 reference's (real)
    double seconds = 0;          ///< the real pass's time (the simulated one's is PassResult::seconds)
};

struct PassResult {
    Precision precision = Precision::Fp32;
    std::vector<std::string> keep_fp32;
    int num_outputs = 0;                         ///< scores per sample
    std::vector<int64_t> output_shape;           ///< the compared output's shape per sample (without N)
    std::vector<float> outputs;                  ///< [samples x num_outputs], row-major
    std::vector<std::string> nonfinite_samples;  ///< ids with any non-finite score
    std::optional<Origin> origin;
    std::optional<double> quality;
    std::vector<LayerStat> layers;  ///< empty unless inspection was on
    /// An FP8 pass with inspection on: each quantized GEMM operand (module, input/weight) with its
    /// quantization statistics over all batches (ampscope/engine/fp8.h); empty otherwise.
    std::vector<Fp8Operand> fp8_operands;
    double seconds = 0;
    /// An fp8 / fp8-rowwise pass run a second time with real FP8 GEMMs (RunSpec::fp8_real_gemm).
    std::optional<RealGemmCheck> real_gemm;
};

struct SampleDelta {
    std::string sample, tag;
    double abs = 0, rel = 0;
    bool finite = true;
    bool within_tolerance = true;
    int worst_index = 0;  ///< score index of the largest violation
};

struct Flip {
    std::string sample, tag;
    int ref = -1, amp = -1;  ///< -1 = abstained
    double ref_margin = 0;   ///< top-1 minus top-2 of the reference
    double amp_margin = 0;
    int position = -1;  ///< sequence outputs: the position in the sample; -1 otherwise
};

/// A position of a sequence output where the reference's top-2 margin is small.
struct BoundaryPosition {
    std::string sample;
    int position = 0;
    double ref_margin = 0;
};

/// Per-token comparison of a sequence output [N, T, V] over its unmasked positions, with the
/// definitions of llama.cpp's `perplexity --kl-divergence` (see docs/language-models.md).
struct TokenStats {
    int length = 0;                                 ///< T
    int vocab = 0;                                  ///< V
    int64_t positions = 0;                          ///< unmasked positions with finite logits in both passes
    int64_t masked = 0;                             ///< positions excluded by the mask
    double mean_kld = 0, p99_kld = 0, max_kld = 0;  ///< KL(ref || amp) of softmax over V
    double same_top = 1;                            ///< fraction of positions with the same top-1
    double top5_overlap = 1;                        ///< mean |top5(ref) & top5(amp)| / 5
    double rms_dp = 0;                              ///< RMS of p_amp - p_ref of the reference's top-1 token
    int64_t label_tokens = 0;                       ///< labels scored (causal shift, -100 ignored); 0 = no labels
    double ref_ce = 0, amp_ce = 0;                  ///< mean token cross-entropy (nats)
    double ref_ppl = 0, amp_ppl = 0;                ///< exp(cross-entropy)
    std::vector<float> kld;                         ///< per position [N x T]; NaN where not compared
    std::vector<BoundaryPosition> boundary;         ///< smallest reference top-2 margins, ascending
};

struct CriterionResult {
    std::string name;  ///< finite_outputs | score_tolerance | decision_flips | quality
    bool passed = true;
    std::string detail;
    std::vector<std::string> samples;
};

enum class Verdict { Accepted, Rejected, InvalidReference };
std::string to_string(Verdict v);

struct Comparison {
    Precision precision = Precision::Fp16;
    Verdict verdict = Verdict::Accepted;
    double max_abs_delta = 0, max_rel_delta = 0;
    std::vector<SampleDelta> deltas;
    std::vector<Flip> flips;
    std::vector<CriterionResult> criteria;
    std::vector<int> ref_decisions, amp_decisions;  ///< per sample; empty for regressors
    std::optional<TokenStats> tokens;               ///< sequence outputs only
};

}  // namespace ampscope
