// SPDX-License-Identifier: MIT
#pragma once
/// \file fp8.h
/// FP8 and block-scaled formats (issue 30): what a quantizer is asked to do (QuantSpec), what it
/// reports per quantized operand (QuantStats) and Transformer Engine's delayed scaling as a small
/// stateful object. Plain values, no LibTorch: the quantizers themselves live in the engine
/// (precision/fp8.cpp) and are proven bitwise against torchao 0.18 (tests/engine/fp8_test.cpp).

#include <cstdint>
#include <string>
#include <vector>

namespace ampscope {

/// Element formats. E4M3 is torch.float8_e4m3fn (no inf, max 448), E5M2 torch.float8_e5m2
/// (max 57344), E2M1 the FP4 element of NVFP4 (values 0, 0.5, 1, 1.5, 2, 3, 4, 6).
enum class Fp8Element { E4M3, E5M2, E2M1 };
std::string to_string(Fp8Element e);

/// Largest finite value, smallest normal value of an element format.
double max_finite(Fp8Element e);
double min_normal(Fp8Element e);

/// How an operand's scales are chosen.
enum class Fp8Scheme {
    Tensorwise,  ///< one scale per tensor: scale = max / amax (torchao tensorwise); or a given scale (delayed scaling)
    Rowwise,     ///< one scale per slice along the reduction axis, rounded down to a power of two (torchao rowwise)
    Mx,  ///< blocks of 32 along the reduction axis, E8M0 scale 2^(floor(log2 amax) - emax) (OCP MX v1.0, torchao to_mx)
    Nvfp4,  ///< E2M1 elements, blocks of 16 along the reduction axis with an E4M3 scale, a per-tensor FP32 scale
};
std::string to_string(Fp8Scheme s);

/// How an MX block's E8M0 scale is chosen (torchao's ScaleCalculationMode): Floor, the OCP MX
/// specification's 2^(floor(log2 amax) - emax), which the probe passes take; Rceil,
/// 2^ceil(log2(amax / fmax)) as cuBLAS and Transformer Engine compute it, torchao's MXFP8Linear's
/// default and every torchao MXFP8 training recipe's, which never clamps a block's largest value.
enum class MxScaling { Floor, Rceil };

/// One operand's quantization.
struct QuantSpec {
    Fp8Scheme scheme = Fp8Scheme::Tensorwise;
    /// Tensorwise / Rowwise: E4M3 or E5M2; Mx: E4M3 (E5M2 allowed); Nvfp4: E2M1 (set by the scheme).
    Fp8Element element = Fp8Element::E4M3;
    /// The reduction dimension of the GEMM the operand enters (negative counts from the end):
    /// Rowwise takes one amax per slice along it, Mx and Nvfp4 form their blocks along it.
    int64_t axis = -1;
    /// Tensorwise only: when > 0, this scale is used instead of the operand's own amax (delayed
    /// scaling: the scale DelayedScaling::scale() gives for this step).
    float given_scale = 0.0f;
    /// Rowwise: scales rounded down to a power of two (torchao's rowwise recipe does).
    bool pow2_scales = true;
    /// Mx: how each block's scale is chosen.
    MxScaling mx_scaling = MxScaling::Floor;
    /// Nvfp4, a 2-D operand: one block scale per 16 x 16 tile (16 slices of 16 along the axis) instead
    /// of per 1 x 16 block: NVIDIA's NVFP4 training recipe quantizes weights so, and the transposed
    /// weight of the backward GEMM then holds the same values.
    bool tiles_2d = false;
    /// Nvfp4: the elements rounded stochastically instead of to nearest even (the recipe's gradients):
    /// a value between two E2M1 neighbours lo < hi rounds up when u < (|v| - lo) / (hi - lo), u one
    /// uniform draw in [0, 1) per element of the operand, as the quantizer lays it out (the axis last,
    /// padded), from the default generator of its device (at::rand).
    bool stochastic = false;
};

/// Statistics of one quantized operand. Counts are over the operand's elements; `share()` turns
/// them into fractions of all elements, as Transformer Engine's debug features report them.
/// Scales follow torchao's float8 convention: a multiplier into the format's range (element =
/// x * scale; the dequantized value is element / scale). For Mx that is 2^-e of the E8M0 exponent
/// e, for Nvfp4 1 / (tensor_scale * block scale).
struct QuantStats {
    Fp8Scheme scheme = Fp8Scheme::Tensorwise;
    Fp8Element element = Fp8Element::E4M3;
    int64_t numel = 0;
    int64_t nonfinite = 0;  ///< NaN or Inf inputs
    int64_t nonzero = 0;    ///< finite nonzero inputs
    int64_t underflow = 0;  ///< finite nonzero inputs that dequantize to zero
    int64_t subnormal =
        0;  ///< nonzero elements in the element format's subnormal range (|element| < min_normal), dequantized finite
    int64_t saturated =
        0;  ///< finite inputs whose scaled value lies beyond the format's range after rounding (the clamp changed it)
    int64_t nonfinite_out = 0;  ///< finite inputs that dequantize to NaN or Inf (a NaN or Inf scale)
    double amax = 0.0;          ///< max |x| over the operand (NaN when it holds a NaN), the figure the scales come from
    int64_t scales = 0;         ///< number of scales chosen (1 for Tensorwise, one per slice or block otherwise)
    double scale_min = 0.0;     ///< smallest and largest scale chosen (multipliers, see above)
    double scale_max = 0.0;
    double tensor_scale = 1.0;  ///< Nvfp4: the per-tensor FP32 scale amax / (448 * 6); 1 otherwise
    /// Quantization SQNR in dB, 10 log10(sum x^2 / sum (x - q)^2) over the elements where the
    /// input and its dequantized value are finite; +inf when they are all equal, NaN when there
    /// is no such element (an all-NaN or all-inf operand, or every value dequantized to NaN / inf:
    /// nothing was measured; stored as NULL, "nan" in JSON).
    double sqnr_db = 0.0;
    double signal = 0.0, noise = 0.0;  ///< the SQNR's sums, kept so that merge() can add them

    double share(int64_t count) const { return numel > 0 ? double(count) / double(numel) : 0.0; }
    /// Adds the statistics of another quantization of the same operand (another batch): counts
    /// and the SQNR's sums added, amax and the scales' range widened.
    void merge(const QuantStats& o);
};

/// `s`'s SQNR from its sums and counts (QuantStats::sqnr_db).
double sqnr_of(const QuantStats& s);

/// One GEMM operand of a simulated FP8 pass, its statistics over all batches.
struct Fp8Operand {
    std::string module;   ///< dotted module path of the GEMM ("" = root)
    std::string op;       ///< "aten::linear"; with RunSpec::fp8_all_gemms also "aten::addmm", "aten::mm", "aten::bmm",
                          ///< "aten::baddbmm"
    std::string operand;  ///< "input" | "weight" (a linear's); "mat1" | "mat2" (a product's left and right operand)
    QuantStats stats;
};

/// Which amax of the history a delayed scale is computed from (Transformer Engine's amax_compute_algo).
enum class AmaxAlgo { Max, MostRecent };

/// Delayed scaling as Transformer Engine's DelayedScaling recipe does it, for one operand (one
/// FP8 tensor slot): the scale used at a step comes from the amaxes of earlier steps.
///  - history()[0] holds the current step's amax (record() keeps the max of what is recorded);
///  - update() at the end of a step: amax = max of the whole history (Max) or history()[0]
///    (MostRecent); the history rolls by one (the current amax moves to the end, the oldest is
///    dropped) and slot 0 is zeroed; scale = (fmax / amax) / 2^margin in FP32, kept as it was when
///    amax is 0 or not finite, FLT_MAX when it overflows.
///  - the first step's scale is 1 (the recipe's initial scale), its history zeros.
class DelayedScaling {
public:
    explicit DelayedScaling(Fp8Element element = Fp8Element::E4M3, int history_len = 1024, int margin = 0,
                            AmaxAlgo algo = AmaxAlgo::Max);
    /// The scale this step's cast uses (a multiplier, see QuantStats).
    float scale() const { return scale_; }
    /// This step's amax of the operand (several casts in one step: their max).
    void record(float amax);
    /// End of step: the next scale from the history, the history rolled.
    void update();
    const std::vector<float>& history() const { return history_; }
    /// Restores a state history() / scale() / steps() described (a training checkpoint);
    /// std::invalid_argument when the history's length is not this one's.
    void restore(const std::vector<float>& history, float scale, int steps);
    int steps() const { return steps_; }
    int margin() const { return margin_; }
    Fp8Element element() const { return element_; }

private:
    Fp8Element element_;
    int margin_;
    AmaxAlgo algo_;
    std::vector<float> history_;
    float scale_ = 1.0f;
    int steps_ = 0;
};

}  // namespace ampscope
