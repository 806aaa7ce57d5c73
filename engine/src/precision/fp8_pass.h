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
// quantize them.
//
// The hook is a kernel for aten::linear on a dispatch key LibTorch leaves unused on CPU and CUDA
// (AutocastPrivateUse1, a fallthrough for every other op), included in (and no longer excluded
// from) the calling thread's dispatch keys while an Fp8PassGuard lives: whatever runs the model (demo models,
// TorchScript, the torch.export interpreter) reaches it through the dispatcher.

#include <ATen/ATen.h>

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

/// fp8-delayed: where a probe run's scales come from and the first batch's history, as the run
/// states it (a warning).
std::string delayed_scaling_note(const DelayedOptions& d);

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
    explicit Fp8WhatIfGuard(std::vector<Fp8Operand>* sink);
    ~Fp8WhatIfGuard();
    Fp8WhatIfGuard(const Fp8WhatIfGuard&) = delete;
    Fp8WhatIfGuard& operator=(const Fp8WhatIfGuard&) = delete;

private:
    bool on_ = false;
    bool prev_ = false, prev_excluded_ = false, prev_what_if_ = false;
    std::vector<Fp8Operand>* prev_sink_ = nullptr;
};

/// `o` merged into `into`'s entry of the same module, operand and scheme (a what-if has one per
/// recipe), or appended: a pass's batches, and torchrun ranks' shards (run/shard.cpp).
void merge_operand(std::vector<Fp8Operand>& into, Fp8Operand o);

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
    explicit Fp8PassGuard(Precision p, std::vector<Fp8Operand>* sink = nullptr, DelayedOptions delayed = {});
    /// A training step's forward (train, replay): a linear whose operands need gradients runs as
    /// torchao's autograd function (forward and backward GEMMs in FP8); fp8 and fp8-rowwise only.
    struct Training {};
    Fp8PassGuard(Precision p, Training);
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
};

}  // namespace ampscope::detail
