// SPDX-License-Identifier: MIT
#pragma once
// The simulated FP8 pass (--precision fp8, issue 30): torchao's float8 training recipe
// "tensorwise" in emulation, as convert_to_float8_training(Float8LinearConfig(emulate=True))
// runs it under torch.autocast("cpu", torch.bfloat16). Every linear layer's GEMM (aten::linear)
// takes its input and weight quantize-dequantized to E4M3 with one current scale each
// (precision/fp8.h), multiplies them in FP32 and casts the product to the autocast dtype (BF16),
// then adds the bias in BF16; every other op runs under BF16 autocast. Inside an FP32 region
// (--keep-fp32, autocast off) a linear runs as it would without FP8. matmul/bmm (attention) and
// convolutions are not quantized: neither torchao's float8 training nor Transformer Engine's
// recipes quantize them.
//
// The hook is a kernel for aten::linear on a dispatch key LibTorch leaves unused on CPU and CUDA
// (AutocastPrivateUse1, a fallthrough for every other op), included in (and no longer excluded
// from) the calling thread's dispatch keys while an Fp8PassGuard lives: whatever runs the model (demo models,
// TorchScript, the torch.export interpreter) reaches it through the dispatcher.

#include <vector>

#include "ampscope/engine/types.h"

namespace ampscope::detail {

/// The autocast policy under a pass of precision p: BF16 for an FP8 pass (its non-GEMM ops), p otherwise.
inline Precision autocast_precision(Precision p) {
    return p == Precision::Fp8 ? Precision::Bf16 : p;
}

/// Whether an Fp8PassGuard is on in this thread.
bool fp8_pass_active();

/// While alive on this thread (and `on`), linear layers run as the FP8 pass does. With `sink`,
/// each quantized operand's statistics are merged into it, one entry per (module, operand); the
/// module is the innermost of the pass context's scope (precision/precision.h).
class Fp8PassGuard {
public:
    explicit Fp8PassGuard(bool on, std::vector<Fp8Operand>* sink = nullptr);
    ~Fp8PassGuard();
    Fp8PassGuard(const Fp8PassGuard&) = delete;
    Fp8PassGuard& operator=(const Fp8PassGuard&) = delete;

private:
    bool on_ = false;
    bool prev_ = false, prev_excluded_ = false;
    std::vector<Fp8Operand>* prev_sink_ = nullptr;
};

}  // namespace ampscope::detail
