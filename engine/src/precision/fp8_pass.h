// SPDX-License-Identifier: MIT
#pragma once
// The simulated FP8 and block-scaled passes (--precision fp8, fp8-rowwise, mxfp8, nvfp4; issue
// 30), each as torchao 0.18 emulates its recipe on CPU, the model under torch.autocast("cpu",
// torch.bfloat16). Every linear layer's GEMM (aten::linear) takes its input and weight
// quantize-dequantized (precision/fp8.h) along the reduction dimension K:
//  - fp8: tensorwise E4M3, one current scale each (torchao's Float8Linear, recipe "tensorwise",
//    emulate=True);
//  - fp8-rowwise: E4M3, a power-of-two scale per row of the input and per row of the weight
//    [N, K] (per column of W^T; torchao's recipe "rowwise", emulate=True);
//    for both the product is mm in FP32, cast to the autocast dtype (BF16), then + bias in BF16;
//  - mxfp8: E4M3 elements, an E8M0 scale per 32 along K (MXTensor.to_mx, FLOOR);
//  - nvfp4: E2M1 elements, an E4M3 scale per 16 along K and a per-tensor FP32 scale of the
//    operand's amax (NVFP4Tensor.to_nvfp4 with per_tensor_amax_to_scale);
//    for both the product is torchao's emulated block-scaled GEMM on FP32 operands, addmm(bias,
//    x, W^T) in FP32 (the bias inside the FP32 accumulation, as the hardware's scaled GEMM adds
//    it), then cast to BF16;
//  - fp8-delayed: Transformer Engine's DelayedScaling (precision/fp8.h DelayedScaling: history
//    1024, margin 0, amax_compute_algo max) with the fp8 GEMM: each operand cast to E4M3 with the
//    scale its amax history gave at the end of the batch before (batches in probe order, one
//    batch a step; the first batch scale 1, an empty history), its amax then recorded; values
//    above the stale scale's range saturate (QuantStats::saturated).
// Every other op runs under BF16 autocast. Inside an FP32 region (--keep-fp32, autocast off) a
// linear runs as it would without FP8; inside a module of the BF16 list (PassContext::keep_bf16,
// RunSpec::keep_bf16) it runs as autocast's BF16 linear, not quantized (torchao's module_filter_fn). matmul/bmm
// (attention) and convolutions are not quantized: neither torchao's float8 training nor Transformer Engine's recipes
// quantize them; Fp8AllGemmsScope (run, advise) and Fp8PassGuard::Training::all_gemms (train, replay) do.
//
// The hook is a kernel for aten::linear on a dispatch key LibTorch leaves unused on CPU and CUDA
// (AutocastPrivateUse1, a fallthrough for every other op), included in (and no longer excluded
// from) the calling thread's dispatch keys while an Fp8PassGuard lives: whatever runs the model (demo models,
// TorchScript, the torch.export interpreter) reaches it through the dispatcher.

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ampscope/engine/fp8.h"
#include "ampscope/engine/types.h"

namespace ampscope::detail {

/// The autocast policy under a pass of precision p: BF16 for an FP8 pass (its non-GEMM ops), p otherwise.
inline Precision autocast_precision(Precision p) {
    return is_fp8(p) ? Precision::Bf16 : p;
}

/// fp8-delayed: the recipe's settings (Transformer Engine's amax_history_len and margin).
struct DelayedOptions {
    int amax_history = 1024;
    int margin = 0;
};

/// fp8-delayed training (train --precision fp8-delayed): Transformer Engine's DelayedScaling of
/// every FP8 tensor of the run's linear layers, carried over its steps and kept in its
/// checkpoints (train/checkpoint.cpp). Each linear's input and weight are cast to E4M3 in the
/// forward, its grad_output to E5M2 in the backward (TE's HYBRID format), each with the scale its
/// own amax history gave at the end of the micro-batch before; the micro-batch's amax enters the
/// history and end_micro_batch() updates every scale (DelayedScaling::update). TE's step is a
/// micro-batch: its fp8_autocast, which Megatron and NeMo open around each micro-batch, updates
/// the histories and scales when it exits, so under gradient accumulation (--accumulate N) the
/// scales move N times per optimizer step. The weights are cast anew in every micro-batch (TE's
/// default), or with weight_cache once a step (TE given is_first_microbatch). The backward GEMMs take the forward's
/// FP8 input and weight (TE keeps the casts):
///   grad_input = grad_output_q @ weight_q, grad_weight = grad_output_q^T @ input_q,
/// each an FP32 mm cast to grad_output's dtype, as the forward's mm is cast to the autocast dtype.
struct DelayedTraining {
    explicit DelayedTraining(DelayedOptions o) : options(o) {}
    DelayedOptions options;
    /// By tensor: "module/input" | "module/weight" | "module/grad_output" (a linear without a
    /// module name: "#k", its call index in the forward).
    std::map<std::string, DelayedScaling> slots;
    bool record = true;        ///< false in the diagnostic re-runs: the step's scales, no history or count changed
    int64_t saturated = 0;     ///< this step's elements beyond their stale scale's range (clamped)
    std::string saturated_at;  ///< the first tensor of the step that had one
    int calls = 0;             ///< linears run in this forward (names the GEMMs without a module)
    /// Transformer Engine's is_first_microbatch (TrainSpec::fp8_weight_cache): a weight is cast in
    /// the step's first micro-batch only; the others reuse that cast and record no amax for it.
    bool weight_cache = false;
    /// A resumed run's tensors whose histories came from the checkpoint (train --resume); the
    /// first step then says which of them the model did not cast and which it cast anew.
    std::set<std::string> restored;
    std::set<std::string> used;  ///< with `restored`: the tensors cast since the resume

    /// The tensor's delayed scaling, created with an empty history (scale 1) the first time.
    DelayedScaling& slot(const std::string& name, Fp8Element element);
    /// `t` cast with its slot's scale and dequantized (FP32); recorded: its amax enters the
    /// history, clamped elements are counted.
    at::Tensor cast(const at::Tensor& t, const std::string& name, Fp8Element element);
    /// A weight's cast (E4M3): cast(), or with weight_cache, after the step's first micro-batch,
    /// the cast that micro-batch made.
    at::Tensor cast_weight(const at::Tensor& w, const std::string& name);
    /// The start of a micro-batch's forward; `keep`: the scales it casts with are kept for a
    /// diagnostic re-run of the step (Rewind; the trainer keeps them when it runs the guards).
    /// Only each tensor's scale is kept, not its history (a re-run records nothing).
    void begin_micro_batch(bool keep);
    /// The end of a micro-batch's backward: every scale updated from its history.
    void end_micro_batch();
    /// The end of a training step: the step's counts and kept scales dropped.
    void end_step();

    /// While alive, the slots are those micro-batch `k` of this step cast with (a diagnostic
    /// re-run of it, with DelayedTrainingScope::Quiet); afterwards the current ones again.
    class Rewind {
    public:
        Rewind(DelayedTraining* d, size_t k);
        ~Rewind();
        Rewind(const Rewind&) = delete;
        Rewind& operator=(const Rewind&) = delete;

    private:
        DelayedTraining* d_ = nullptr;
        std::map<std::string, DelayedScaling> current_;  ///< the slots set aside while rewound
    };

private:
    struct Kept {
        Fp8Element element;
        float scale;
    };
    std::vector<std::map<std::string, Kept>> before;  ///< each micro-batch's scales at its start
    int begun = 0;                                    ///< micro-batches begun in this step
    std::map<std::string, at::Tensor> weights;        ///< weight_cache: the first micro-batch's casts
};

/// While alive on this thread, an FP8 pass of precision fp8-delayed under an
/// Fp8PassGuard(Training) runs its linears as `d` says (one at a time; nullptr: none).
class DelayedTrainingScope {
public:
    explicit DelayedTrainingScope(DelayedTraining* d);
    ~DelayedTrainingScope();
    DelayedTrainingScope(const DelayedTrainingScope&) = delete;
    DelayedTrainingScope& operator=(const DelayedTrainingScope&) = delete;
    /// While alive, the thread's DelayedTraining (if any) only reads its scales: a diagnostic
    /// re-run of a step that already recorded its amaxes.
    class Quiet {
    public:
        Quiet();
        ~Quiet();
        Quiet(const Quiet&) = delete;
        Quiet& operator=(const Quiet&) = delete;

    private:
        bool prev_ = true;
    };

private:
    DelayedTraining* prev_ = nullptr;
};

/// fp8-delayed: where a probe run's scales come from and the first batch's history, as the run
/// states it (a warning).
std::string delayed_scaling_note(const DelayedOptions& d);
// Said when fp8-delayed runs its probes as one batch (static_batch: the program's, 0 when none).
std::string one_batch_delayed_note(int64_t probes, int64_t static_batch);

/// The what-if (RunSpec::fp8_what_if): the current-scaling recipes whose statistics a BF16 pass
/// gathers on its own GEMM operands (what_if_recipe names an entry's recipe by its scheme).
inline constexpr Precision kWhatIfRecipes[] = {Precision::Fp8, Precision::Fp8Rowwise, Precision::Mxfp8,
                                               Precision::Nvfp4};

/// While alive on this thread with a sink, every linear layer's input and weight (as the pass
/// hands them to aten::linear, outside FP32 regions) are quantized as each of kWhatIfRecipes
/// would, and the statistics merged into `sink`, one entry per (module, operand, recipe); the
/// linear itself runs unchanged, so the pass's outputs are those of the pass without it.
class Fp8WhatIfGuard {
public:
    explicit Fp8WhatIfGuard(std::vector<Fp8Operand>* sink, MxScaling mx_scaling = MxScaling::Floor);
    ~Fp8WhatIfGuard();
    Fp8WhatIfGuard(const Fp8WhatIfGuard&) = delete;
    Fp8WhatIfGuard& operator=(const Fp8WhatIfGuard&) = delete;

private:
    bool on_ = false;
    bool prev_ = false, prev_excluded_ = false, prev_what_if_ = false;
    std::vector<Fp8Operand>* prev_sink_ = nullptr;
    MxScaling prev_mx_scaling_ = MxScaling::Floor;
};

/// `o` merged into `into`'s entry of the same module, operand and scheme (a what-if has one per
/// recipe), or appended: a pass's batches, and torchrun ranks' shards (run/shard.cpp).
void merge_operand(std::vector<Fp8Operand>& into, Fp8Operand o);

/// How recipe `p` quantizes a GEMM operand: along its last dimension, the reduction dimension K
/// of the input [.., K] and of the weight [N, K]; mxfp8's block scales as this thread's guard says
/// (Fp8PassGuard, Fp8WhatIfGuard; FLOOR without one).
QuantSpec recipe_spec(Precision p);

/// The DelayedTraining of this thread's DelayedTrainingScope (nullptr: none).
DelayedTraining* delayed_training();

/// A training step's linear (no bias) under fp8 / fp8-rowwise / mxfp8: torchao's float8 autograd
/// function, its MXFP8 training linear's (precision/fp8_train.cpp).
at::Tensor fp8_training_linear(const at::Tensor& x, const at::Tensor& w, Precision p, at::ScalarType out_dtype,
                               MxScaling mx_scaling);

/// A training step's linear (no bias) under nvfp4: NVIDIA's NVFP4 training recipe, simulated
/// (16 x 16 weight tiles, stochastic rounding of gradients, a random Hadamard transform of the
/// weight-gradient GEMM's operands; precision/fp8_train.cpp).
at::Tensor nvfp4_training_linear(const at::Tensor& x, const at::Tensor& w, at::ScalarType out_dtype);

/// A training step's linear (no bias) under fp8-delayed: its FP8 tensors named after `module`
/// (empty: its call index), cast with `d`'s stale scales; with gradients, an autograd function
/// whose backward casts grad_output (DelayedTraining).
at::Tensor delayed_training_linear(const at::Tensor& x, const at::Tensor& w, at::ScalarType out_dtype,
                                   DelayedTraining& d, const std::string& module);

/// The rows of a GEMM operand [.., K]: [M, K] (leading dimensions flattened, a 1-D operand one
/// row; K may be 0, where reshape({-1, K}) fails).
at::Tensor rows_of(const at::Tensor& t);

/// A training step's product of the model under fp8 / fp8-rowwise / mxfp8 (train --fp8-all-gemms):
/// a [.., M, K] @ b [K, N] or a [B, M, K] @ b [B, K, N] as torchao's float8 autograd function runs
/// a linear of input a and weight b^T (precision/fp8_train.cpp Fp8ProductFn), the product in
/// `out_dtype`, the gradients of a and b in `grad_dtype`.
at::Tensor fp8_training_product(const at::Tensor& a, const at::Tensor& b, Precision p, at::ScalarType out_dtype,
                                MxScaling mx_scaling, at::ScalarType grad_dtype);

/// A training step's tensorwise E4M3 cast of an operand (a convolution's under fp8; a product's or
/// a convolution's under fp8-delayed, with `d`'s stale scale of `slot`, recorded, a weight through
/// DelayedTraining::cast_weight): the cast values forward, the gradient straight through in
/// `grad_dtype` backward. training_grad_cast after the op (its result as a new tensor of
/// `out_dtype`) casts the gradient arriving at it to E5M2
/// (`d`'s slot, or current scaling when `d` is null): the op's own backward then runs on E5M2
/// grad_output and the E4M3 operands, as the linear's backward GEMMs do.
at::Tensor training_cast(const at::Tensor& t, DelayedTraining* d, const std::string& slot, bool weight,
                         at::ScalarType grad_dtype);
at::Tensor training_grad_cast(const at::Tensor& t, DelayedTraining* d, const std::string& slot,
                              at::ScalarType out_dtype);

/// While alive: cuDNN's FP32 convolutions in IEEE FP32 (its default is TF32, a 10-bit mantissa)
/// on devices of type `dt` when CUDA; nothing on the others.
class IeeeConv {
public:
    explicit IeeeConv(at::DeviceType dt);
    ~IeeeConv();
    IeeeConv(const IeeeConv&) = delete;
    IeeeConv& operator=(const IeeeConv&) = delete;

private:
    bool on_ = false;
    at::Float32Precision before_ = at::Float32Precision::NONE;
};

/// A training step's convolution `conv` of its cast operands xq and wq, differentiable, forward
/// and backward under IeeeConv: autograd's convolution backward runs later, outside any guard
/// around the forward, so the convolution's graph is built and differentiated inside an autograd
/// function (a reentrant backward) whose backward holds the guard too.
at::Tensor training_conv(const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& conv,
                         const at::Tensor& xq, const at::Tensor& wq);

/// The DelayedTraining of a training step under precision `p` when it is fp8-delayed (InputError
/// without one), nullptr in the other recipes (current scaling).
DelayedTraining* training_state(Precision p);

/// A training step's product of the model under recipe `p` (Fp8PassGuard::Training::all_gemms;
/// fp8_pass.cpp quantized_product): a [.., M, K] @ b [.., K, N] as fp8_training_product, or
/// fp8-delayed's casts (training_cast, each operand and the grad_output its own history under
/// `slot`) around LibTorch's differentiable matmul; `bias` (the `self` of an addmm that is one) as a
/// linear's, another `self` added to the FP32 product (beta * self + alpha * a b, then the cast).
at::Tensor training_product(const std::string& slot, const at::Tensor& a, const at::Tensor& b, const at::Tensor* self,
                            const at::Scalar& beta, const at::Scalar& alpha, const std::optional<at::Tensor>& bias,
                            at::ScalarType out_dtype, Precision p, MxScaling mx);

/// Whether this thread's training guard runs fp8-rowwise as torchao's rowwise_with_gw_hp.
bool rowwise_gw_hp();

/// Whether an Fp8PassGuard of an FP8 pass is on in this thread (not a what-if).
bool fp8_pass_active();

/// Under an Fp8WhatIfGuard: counts `x` and `w` as the linear layer's operands for every recipe,
/// as its aten::linear kernel does (for models whose linears never reach aten::linear: the demo
/// zoo's nn::Linear); elsewhere nothing.
void note_what_if(const at::Tensor& x, const at::Tensor& w);

/// While alive on this thread (and `p` is an FP8 pass, is_fp8), linear layers run as that pass
/// does (p's recipe); for any other precision the guard does nothing. With `sink`,
/// each quantized operand's statistics are merged into it, one entry per (module, operand); the
/// module is the innermost of the pass context's scope (precision/precision.h).
class Fp8PassGuard {
public:
    /// real_gemm (fp8, fp8-rowwise; no sink): the GEMMs are torch._scaled_mm on the FP8 operands
    /// (real_linear), not the emulation; run/real_gemm.cpp says where it cannot run.
    explicit Fp8PassGuard(Precision p, std::vector<Fp8Operand>* sink = nullptr, DelayedOptions delayed = {},
                          bool real_gemm = false, MxScaling mx_scaling = MxScaling::Floor);
    /// A training step's forward (train, replay): a linear whose operands need gradients runs as
    /// torchao's autograd function (forward and backward GEMMs in FP8); fp8, fp8-rowwise and mxfp8, and
    /// fp8-delayed inside a DelayedTrainingScope (every linear, with gradients or not).
    struct Training {
        MxScaling mx_scaling = MxScaling::Floor;  ///< mxfp8: the block scales (TrainSpec::mx_scaling)
        /// TrainSpec::fp8_all_gemms: the model's products and convolutions too (Fp8AllGemmsScope), in
        /// fp8, fp8-rowwise, mxfp8 and fp8-delayed (convolutions in fp8 and fp8-delayed), forward
        /// and backward.
        bool all_gemms = false;
        /// fp8-rowwise: torchao's recipe "rowwise_with_gw_hp" (TrainSpec::rowwise_gw_hp): grad_input
        /// with a power-of-two tensorwise weight, the weight gradient's GEMM in high precision.
        bool rowwise_gw_hp = false;
    };
    Fp8PassGuard(Precision p, Training t);
    ~Fp8PassGuard();
    Fp8PassGuard(const Fp8PassGuard&) = delete;
    Fp8PassGuard& operator=(const Fp8PassGuard&) = delete;

private:
    bool on_ = false;
    bool prev_ = false, prev_excluded_ = false;
    std::vector<Fp8Operand>* prev_sink_ = nullptr;
    Precision prev_precision_ = Precision::Fp8;
    DelayedOptions prev_delayed_;
    bool prev_training_ = false;
    bool prev_real_ = false;
    MxScaling prev_mx_scaling_ = MxScaling::Floor;
    bool prev_all_gemms_ = false;
    bool prev_gw_hp_ = false;
};

/// While alive on this thread with `on` (RunSpec::fp8_all_gemms), an FP8 pass also quantizes the
/// model's own matrix products under autocast (aten::addmm, mm, bmm, baddbmm; torch.matmul reaches
/// mm or bmm), outside the BF16 list: the left operand as the recipe quantizes a linear's input
/// (along K; operand "mat1"), the right one transposed as it quantizes a weight [N, K] ("mat2"),
/// the FP32 product cast to the autocast dtype (quantized_product in fp8_pass.cpp); an
/// Fp8WhatIfGuard then gathers their statistics too. Convolutions are quantized in fp8 and
/// fp8-delayed (quantized_conv). A training step's take Fp8PassGuard::Training::all_gemms instead.
class Fp8AllGemmsScope {
public:
    explicit Fp8AllGemmsScope(bool on);
    ~Fp8AllGemmsScope();
    Fp8AllGemmsScope(const Fp8AllGemmsScope&) = delete;
    Fp8AllGemmsScope& operator=(const Fp8AllGemmsScope&) = delete;

private:
    bool prev_ = false;
};

/// The matrix products of an FP8 pass: linear layers quantized, and the model's own addmm / mm
/// calls under autocast that no recipe quantizes (transformers' Conv1D is an addmm; a 2-D weight
/// through torch.matmul or torch.mm is an mm). Attention's batched products (bmm) are not counted.
/// Under an Fp8AllGemmsScope the model's products are quantized too (`products`), none counted unquantized.
struct Fp8GemmCounts {
    int64_t quantized = 0;  ///< aten::linear calls quantized
    int64_t addmm = 0, mm = 0;
    /// The model's own addmm / mm / bmm / baddbmm quantized (Fp8AllGemmsScope), and its
    /// convolutions in a recipe of per-tensor scales (fp8, fp8-delayed).
    int64_t products = 0;
    int64_t convs_bf16 = 0;           ///< Fp8AllGemmsScope: convolutions run under autocast (recipes of finer scales)
    int64_t convs_transposed = 0;     ///< Fp8AllGemmsScope: transposed convolutions, run under autocast (every recipe)
    std::set<std::string> kept_bf16;  ///< the modules of PassContext::keep_bf16 that left a GEMM out of FP8
    /// A real-GEMM pass (Fp8PassGuard real_gemm): linear calls left to the emulation because CUDA's
    /// torch._scaled_mm takes no K or N that is not a multiple of 16.
    int64_t real_emulated = 0;
    /// A real-GEMM pass under an Fp8AllGemmsScope: the model's products left to the emulation (a
    /// bmm / baddbmm, an addmm whose self is not a bias; on CUDA K or N not a multiple of 16).
    int64_t products_emulated = 0;
    int64_t unquantized() const { return addmm + mm; }
};

/// While alive on this thread, an FP8 pass's matrix products are counted into `c` (nullptr: none).
class Fp8GemmCounter {
public:
    explicit Fp8GemmCounter(Fp8GemmCounts* c);
    ~Fp8GemmCounter();
    Fp8GemmCounter(const Fp8GemmCounter&) = delete;
    Fp8GemmCounter& operator=(const Fp8GemmCounter&) = delete;

private:
    Fp8GemmCounts* prev_ = nullptr;
};

/// A linear layer as torchao's Float8Linear runs it without emulate: `x` [.., K] and `w` [N, K]
/// cast to E4M3 with the recipe's scales (the simulated pass's own elements and scales), then
/// torch._scaled_mm(x_fp8, w_fp8^T, 1 / x_scale, 1 / w_scale, out_dtype, use_fast_accum=true),
/// + bias in out_dtype.
at::Tensor real_linear(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias, Precision p,
                       at::ScalarType out_dtype);

}  // namespace ampscope::detail
