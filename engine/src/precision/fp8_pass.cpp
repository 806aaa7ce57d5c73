// SPDX-License-Identifier: MIT
// The simulated FP8 and block-scaled passes: the aten::linear kernel that quantizes its operands
// as the pass's recipe says (fp8_pass.h).
#include "precision/fp8_pass.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <ATen/ops/matmul_compositeimplicitautograd_dispatch.h>
#include <torch/library.h>

#include <algorithm>
#include <string_view>
#include <tuple>
#include <utility>

#include "ampscope/engine/errors.h"
#include "precision/fp8.h"
#include "precision/precision.h"

namespace ampscope::detail {
namespace {

constexpr auto kFp8Key = c10::DispatchKey::AutocastPrivateUse1;
thread_local std::vector<Fp8Operand>* t_sink = nullptr;
thread_local Precision t_precision = Precision::Fp8;
thread_local DelayedOptions t_delayed;  ///< fp8-delayed: history length and margin of new operands
thread_local int t_calls = 0;  ///< linear calls in this batch (fp8-delayed keys GEMMs without a module name by it)
/// An Fp8WhatIfGuard: statistics of every recipe, the linear itself unchanged.
thread_local bool t_what_if = false;
thread_local bool t_real = false;                ///< real FP8 GEMMs (torch._scaled_mm) instead of the emulation
thread_local Fp8GemmCounts* t_counts = nullptr;  ///< Fp8GemmCounter's
thread_local bool t_training = false;            ///< an Fp8PassGuard of a training step (Fp8PassGuard::Training)
thread_local MxScaling t_mx_scaling = MxScaling::Floor;  ///< the guard's mxfp8 block scales (recipe_spec)
thread_local bool t_all_gemms = false;  ///< Fp8AllGemmsScope: the model's own matrix products quantized too
thread_local bool t_gw_hp = false;      ///< a training guard's Training::rowwise_gw_hp
/// The model's own products run in this batch, by "module/op": fp8-delayed keys each by its index there.
thread_local std::map<std::string, int> t_products;

/// The block-scaled recipes, whose emulated GEMM is torchao's addmm on dequantized operands.
bool block_scaled(Precision p) {
    return p == Precision::Mxfp8 || p == Precision::Nvfp4;
}

/// fp8-delayed: the operand's delayed scaling in this pass, created with an empty history (scale 1)
/// the first time the GEMM runs. Keyed by `key` (quantize_operand's slot).
DelayedScaling& delayed_state(const std::string& key) {
    auto& states = pass_context().fp8_delayed;
    auto it = states.find(key);
    if (it == states.end())
        it = states.emplace(key, DelayedScaling(Fp8Element::E4M3, t_delayed.amax_history, t_delayed.margin)).first;
    return it->second;
}

/// `st` merged into the sink's entry of (module, op, operand, scheme), or a new entry.
void merge_into_sink(const std::string& module, const char* op, const char* operand, const QuantStats& st) {
    merge_operand(*t_sink, {module, op, operand, st});
}

/// The operand of `op` quantize-dequantized (along its last dimension); its statistics merged into
/// the pass's sink when there is one. fp8-delayed keys its scaling by `slot`: a linear's
/// "module/operand" (a linear without a module name "#k/operand", k its call index in the batch:
/// the same linears run in the same order each batch), a product's "module/op#k/operand".
at::Tensor quantize_operand(const at::Tensor& t, const char* operand, int call, const char* op = "aten::linear",
                            const std::string& slot = {}) {
    QuantSpec s = recipe_spec(t_precision);
    const auto& scope = pass_context().scope;
    const std::string module = scope.empty() ? std::string() : scope.back();
    DelayedScaling* delayed = nullptr;
    if (t_precision == Precision::Fp8Delayed) {
        delayed = &delayed_state(
            !slot.empty() ? slot : (module.empty() ? "#" + std::to_string(call) : module) + "/" + operand);
        s.given_scale = delayed->scale();  // the scale of the batches before, stale for this one
    }
    if (!t_sink && !delayed) return quantize_dequantize(t, s);
    if (!t_sink) {  // delayed scaling without statistics: the history needs this batch's amax alone
        auto q = quantize_dequantize(t, s);
        delayed->record(float(operand_amax(t)));
        return q;
    }
    QuantStats st;
    auto q = quantize_dequantize(t, s, &st);
    if (delayed) delayed->record(float(st.amax));  // this batch's amax enters the history
    merge_into_sink(module, op, operand, st);
    return q;
}

/// Whether `op` is one of the convolutions an FP8 pass of all GEMMs quantizes (quantized_conv).
bool is_conv(std::string_view op) {
    return op == "aten::conv1d" || op == "aten::conv2d" || op == "aten::conv3d" || op == "aten::convolution";
}

/// Whether autocast would cast `t` (FP32, BF16, FP16; not float64 or integers, which it leaves
/// alone): the FP8 passes quantize only the GEMMs whose operands are.
bool autocast_eligible(const at::Tensor& t) {
    const auto s = t.scalar_type();
    return s == at::kFloat || s == at::kBFloat16 || s == at::kHalf;
}

/// Whether the GEMM running now lies in a module of the pass's BF16 list (PassContext::keep_bf16):
/// left out of FP8, the module noted in the pass's Fp8GemmCounts::kept_bf16.
bool kept_in_bf16() {
    const auto& ctx = pass_context();
    if (ctx.keep_bf16.empty() || ctx.scope.empty()) return false;
    const auto region = fp32_region_of(ctx.scope.back(), ctx.keep_bf16);
    if (region && t_counts && !t_what_if) t_counts->kept_bf16.insert(*region);
    return bool(region);
}

/// The what-if: both operands as each current-scaling recipe would quantize them, counted; the
/// quantized values are dropped (the pass's own linear runs as it would). A product's (op not
/// aten::linear): its mat1 and mat2^T, as the pass of all GEMMs quantizes them (quantized_product);
/// a convolution's input and weight, as tensorwise only (the one recipe that quantizes them).
void what_if_statistics(const at::Tensor& x, const at::Tensor& w, at::DeviceType dt, const char* op = "aten::linear") {
    const bool linear = std::string_view(op) == "aten::linear", conv = is_conv(op);
    at::RecordFunctionGuard quiet(false);  // the statistics' ops are not the model's
    c10::impl::ExcludeDispatchKeyGuard no_autocast(at::autocast::get_autocast_dispatch_key_from_device_type(dt));
    const auto& scope = pass_context().scope;
    const std::string module = scope.empty() ? std::string() : scope.back();
    // torchao's Float8Linear gets its input in the autocast dtype under CUDA autocast (fp8_linear)
    const auto x_cast = dt == at::kCUDA && !conv ? x.to(at::autocast::get_autocast_dtype(dt)) : x;
    for (Precision p : kWhatIfRecipes) {
        if (conv && p != Precision::Fp8) continue;
        for (const auto& [operand, t] :
             {std::pair<const char*, const at::Tensor&>{linear || conv ? "input" : "mat1",
                                                        p == Precision::Fp8 || p == Precision::Fp8Rowwise ? x_cast : x},
              {linear || conv ? "weight" : "mat2", w}}) {
            QuantStats st;
            quantize_dequantize(t, recipe_spec(p), &st);
            merge_into_sink(module, op, operand, st);
        }
    }
}

/// The GEMM of the quantize-dequantized operands (FP32; x2 [M, K], wq [N, K]) in the output
/// dtype: torchao's Float8Linear in emulation, mm in FP32 cast to the autocast dtype (autocast's
/// cast of the Float8TrainingTensors only changes their output dtype), then + bias in that dtype;
/// torchao's emulated MX / NVFP4 GEMM, addmm(bias, x, W^T) on the FP32 operands, then the cast.
at::Tensor gemm(const at::Tensor& x2, const at::Tensor& wq, const std::optional<at::Tensor>& bias,
                at::ScalarType out_dtype) {
    const bool has_bias = bias && bias->defined();
    if (block_scaled(t_precision))
        return (has_bias ? at::addmm(bias->to(at::kFloat), x2, wq.t()) : at::mm(x2, wq.t())).to(out_dtype);
    auto out = at::mm(x2, wq.t()).to(out_dtype);
    return has_bias ? out + bias->to(out.scalar_type()) : out;
}

at::Tensor fp8_linear_quantized(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                                at::ScalarType out_dtype);

/// aten::linear under the pass: both operands quantize-dequantized as the recipe says, then gemm().
at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias) {
    c10::impl::ExcludeDispatchKeyGuard no_fp8(kFp8Key);
    const auto dt = x.device().type();
    if (!at::autocast::is_autocast_enabled(dt) || !at::isFloatingType(x.scalar_type()) ||
        !at::isFloatingType(w.scalar_type()))
        return at::linear(x, w, bias);                  // an FP32 region, or not a floating GEMM
    if (kept_in_bf16()) return at::linear(x, w, bias);  // autocast's linear, not quantized
    if (t_what_if) {
        if (t_sink) what_if_statistics(x, w, dt);
        return at::linear(x, w, bias);  // the pass's own linear
    }
    const auto out_dtype = at::autocast::get_autocast_dtype(dt);
    at::RecordFunctionGuard quiet(false);  // the emulation's own ops are not the model's: aten::linear is
    c10::impl::ExcludeDispatchKeyGuard no_autocast(at::autocast::get_autocast_dispatch_key_from_device_type(dt));
    if (dt == at::kCUDA && (t_precision == Precision::Fp8 || t_precision == Precision::Fp8Rowwise))
        // torchao's Float8Linear casts its input to the autocast dtype when CUDA autocast is on
        // (torch.is_autocast_enabled() without a device is CUDA's; on CPU it does not): the same
        // cast here (not yet run on a GPU: tools/gpu-check.sh compares with torchao there)
        return fp8_linear_quantized(x.to(out_dtype), w, bias, out_dtype);
    return fp8_linear_quantized(x, w, bias, out_dtype);
}

/// fp8_linear's FP8 GEMM once the linear is known to be quantized: `x` as the recipe receives it.
at::Tensor fp8_linear_quantized(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                                at::ScalarType out_dtype) {
    if (t_counts) ++t_counts->quantized;
    const auto add_bias = [&](const at::Tensor& out) {
        return bias && bias->defined() ? out + bias->to(out.scalar_type()) : out;
    };
    if (t_training && t_precision == Precision::Fp8Delayed && delayed_training()) {  // grad or not (re-runs)
        const auto& scope = pass_context().scope;
        return add_bias(
            delayed_training_linear(x, w, out_dtype, *delayed_training(), scope.empty() ? "" : scope.back()));
    }
    if (t_real) {  // CUDA's torch._scaled_mm takes K and N in multiples of 16 only: the others emulated
        if (x.numel() > 0 && w.numel() > 0 && (!x.is_cuda() || (x.size(-1) % 16 == 0 && w.size(0) % 16 == 0)))
            return real_linear(x, w, bias, t_precision, out_dtype);
        if (t_counts) ++t_counts->real_emulated;
    }
    if (t_training) {  // a training step's forward, with gradients or without (the diagnostic re-runs)
        if (t_precision == Precision::Nvfp4) return add_bias(nvfp4_training_linear(x, w, out_dtype));
        if (t_precision != Precision::Fp8 && t_precision != Precision::Fp8Rowwise && t_precision != Precision::Mxfp8)
            throw InputError("", "precision",
                             "'" + to_string(t_precision) +
                                 "' in a training step; expected fp8, fp8-rowwise, mxfp8, nvfp4 or fp8-delayed (" +
                                 to_string(t_precision) + " runs with `run` and `advise` only)");
        return add_bias(fp8_training_linear(x, w, t_precision, out_dtype, t_mx_scaling));
    }
    const int call = t_calls++;
    const auto xq = quantize_operand(x, "input", call);
    const auto wq = quantize_operand(w, "weight", call);
    auto sizes = x.sizes().vec();
    sizes.back() = w.size(0);
    return gemm(rows_of(xq), wq, bias, out_dtype).reshape(sizes);
}

/// The model's own addmm / mm under an FP8 pass that quantizes linear layers only: counted
/// (Fp8GemmCounter), then run as they would.
bool counts_product(const at::Tensor& a) {
    return t_counts && !t_what_if && !t_all_gemms && at::autocast::is_autocast_enabled(a.device().type());
}

/// Under an Fp8AllGemmsScope: whether the model's own GEMM of `a` and `b` is the pass's (under
/// autocast, floating, outside the BF16 list).
bool all_gemms_take(const at::Tensor& a, const at::Tensor& b) {
    if (!t_all_gemms) return false;
    const auto dt = a.device().type();
    if (!at::autocast::is_autocast_enabled(dt) || !autocast_eligible(a) || !autocast_eligible(b)) return false;
    return !kept_in_bf16();
}

/// Whether the model's own product of `a` and `b` is quantized (all_gemms_take). Under an
/// Fp8WhatIfGuard its statistics are gathered instead (every recipe, mat1 and mat2^T) and false
/// returned: the product runs as it would.
bool takes_product(const char* op, const at::Tensor& a, const at::Tensor& b) {
    if (!all_gemms_take(a, b)) return false;
    if (!t_what_if) return true;
    if (t_sink) what_if_statistics(a, b.transpose(-1, -2).contiguous(), a.device().type(), op);
    return false;
}

/// Whether the model's convolution of `x` and `w` is quantized: all_gemms_take, in a recipe of
/// per-tensor scales (fp8, fp8-delayed: the scaling cuDNN's FP8 convolution takes); the other
/// recipes' passes run it under autocast, counted (Fp8GemmCounts::convs_bf16). Under an
/// Fp8WhatIfGuard its tensorwise statistics are gathered instead and false returned.
bool takes_conv(const char* op, const at::Tensor& x, const at::Tensor& w) {
    if (!all_gemms_take(x, w)) return false;
    if (t_what_if) {
        if (t_sink) what_if_statistics(x, w, x.device().type(), op);
        return false;
    }
    if (t_precision == Precision::Fp8 || t_precision == Precision::Fp8Delayed) return true;
    if (t_counts) ++t_counts->convs_bf16;
    return false;
}

/// fp8-delayed's key prefix of the model's product or convolution `op` running now:
/// "module/op#k/", k its place among that module's calls of `op` in this batch.
std::string product_slot(const char* op) {
    const auto& scope = pass_context().scope;
    const std::string at_module = (scope.empty() ? std::string() : scope.back()) + "/" + op;
    return at_module + "#" + std::to_string(t_products[at_module]++) + "/";
}

/// A convolution of the model under an FP8 pass of all GEMMs (takes_conv): input and weight
/// quantize-dequantized with one scale each (E4M3; fp8-delayed: each its own delayed scaling,
/// "module/op#k/input"), `conv` of the two in FP32 without the bias, cast to the autocast dtype,
/// then + bias in that dtype, as the recipe adds a linear's; `as_input`: in x's dtype instead (an op
/// autocast does not cast). A real-GEMM pass emulates it too (torch._scaled_mm has no convolution),
/// counted.
template <class Conv>
at::Tensor quantized_conv(const char* op, const at::Tensor& x, const at::Tensor& w,
                          const std::optional<at::Tensor>& bias, const Conv& conv, bool as_input = false) {
    const auto dt = x.device().type();
    const auto out_dtype = as_input ? x.scalar_type() : at::autocast::get_autocast_dtype(dt);
    at::RecordFunctionGuard quiet(false);  // the emulation's own ops are not the model's
    c10::impl::ExcludeDispatchKeyGuard no_autocast(at::autocast::get_autocast_dispatch_key_from_device_type(dt));
    if (t_counts) {
        ++t_counts->products;
        if (t_real) ++t_counts->products_emulated;
    }
    const std::string slot = product_slot(op);
    at::Tensor out;
    if (t_training) {  // the casts around LibTorch's own convolution, differentiated by autograd
        auto* d = training_state(t_precision);
        const auto xq = training_cast(x, d, slot + "input", false, out_dtype);
        const auto wq = training_cast(w, d, slot + "weight", true, out_dtype);
        out = training_grad_cast(training_conv(conv, xq, wq), d, slot + "grad_output", out_dtype);
    } else {
        const auto xq = quantize_operand(x, "input", 0, op, slot + "input");
        const auto wq = quantize_operand(w, "weight", 0, op, slot + "weight");
        IeeeConv ieee(dt);
        out = conv(xq, wq).to(out_dtype);
    }
    if (!bias || !bias->defined()) return out;
    std::vector<int64_t> shape(size_t(w.dim() - 1), 1);  // [C, 1, ..]: over an unbatched input too
    shape[0] = -1;
    return out + bias->to(out_dtype).reshape(shape);
}

/// aten::conv1d / conv2d / conv3d (`Op`, padding as numbers or as a string) under the pass.
template <auto Op, const char* Name, class Padding>
at::Tensor fp8_conv(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                    c10::SymIntArrayRef stride, Padding padding, c10::SymIntArrayRef dilation, c10::SymInt groups) {
    c10::impl::ExcludeDispatchKeyGuard no_fp8(kFp8Key);
    if (!takes_conv(Name, x, w)) return Op(x, w, bias, stride, padding, dilation, groups);
    return quantized_conv(Name, x, w, bias, [&](const at::Tensor& xq, const at::Tensor& wq) {
        return Op(xq, wq, std::nullopt, stride, padding, dilation, groups);
    });
}

constexpr char kConv1d[] = "aten::conv1d", kConv2d[] = "aten::conv2d", kConv3d[] = "aten::conv3d";

/// Whether autocast casts aten::convolution on devices of type `dt` (CUDA's lists name it, the
/// CPU's do not: there a decomposed program's convolutions run in their own dtype in every pass).
bool autocast_casts_convolution(at::DeviceType dt) {
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
    return op.hasKernelForDispatchKey(at::autocast::get_autocast_dispatch_key_from_device_type(dt));
}

/// aten::convolution, the convolution of a decomposed program (run_decompositions(), core ATen),
/// as fp8_conv takes conv1d/2d/3d, its result in the dtype the program's own convolution gives
/// (autocast's, or where autocast leaves it alone the input's: an unquantized convolution after it,
/// a transposed one or one of the BF16 list, then takes operands of one dtype); a transposed one
/// runs as autocast runs it.
at::Tensor fp8_convolution(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                           c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                           bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups) {
    c10::impl::ExcludeDispatchKeyGuard no_fp8(kFp8Key);
    if (transposed && t_counts && !t_what_if && all_gemms_take(x, w)) ++t_counts->convs_transposed;
    if (transposed || !takes_conv("aten::convolution", x, w))
        return at::convolution_symint(x, w, bias, stride, padding, dilation, transposed, output_padding, groups);
    return quantized_conv(
        "aten::convolution", x, w, bias,
        [&](const at::Tensor& xq, const at::Tensor& wq) {
            return at::convolution_symint(xq, wq, std::nullopt, stride, padding, dilation, false, output_padding,
                                          groups);
        },
        !autocast_casts_convolution(x.device().type()));
}

/// fp8_conv of at::convNd_symint with padding of type `Padding` (its two overloads).
template <const char* Name, class Padding>
constexpr auto conv_kernel() {
    using Fn = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                              c10::SymIntArrayRef, Padding, c10::SymIntArrayRef, c10::SymInt);
    constexpr Fn op = Name == kConv1d   ? Fn(&at::conv1d_symint)
                      : Name == kConv2d ? Fn(&at::conv2d_symint)
                                        : Fn(&at::conv3d_symint);
    return &fp8_conv<op, Name, Padding>;
}

/// A product of the model under an FP8 pass of all GEMMs: a [.., M, K] and b [.., K, N]
/// quantize-dequantized as the recipe quantizes a linear's input and weight, a along K (mat1),
/// b^T along K (mat2; a weight [N, K] of a linear), each with its own fp8-delayed scaling; the
/// FP32 product cast to the autocast dtype. `self` (addmm, baddbmm) is added as the recipe adds a
/// linear's bias when it is one (beta = alpha = 1, 1-D of size N: transformers' Conv1D, gemm()),
/// else inside the FP32 product (beta * self + alpha * a b, then the cast).
at::Tensor quantized_product(const char* op, const at::Tensor& a_in, const at::Tensor& b, const at::Tensor* self,
                             const at::Scalar& beta, const at::Scalar& alpha) {
    const auto dt = a_in.device().type();
    const auto out_dtype = at::autocast::get_autocast_dtype(dt);
    // mat1 as a linear's input: in the autocast dtype under CUDA autocast, as fp8_linear gives it
    const bool cast = dt == at::kCUDA && (t_precision == Precision::Fp8 || t_precision == Precision::Fp8Rowwise);
    const at::Tensor a = cast ? a_in.to(out_dtype) : a_in;
    at::RecordFunctionGuard quiet(false);  // the emulation's own ops are not the model's
    c10::impl::ExcludeDispatchKeyGuard no_autocast(at::autocast::get_autocast_dispatch_key_from_device_type(dt));
    if (t_counts) ++t_counts->products;
    const std::string slot = product_slot(op);
    const bool is_bias = self && beta.equal(1) && alpha.equal(1) && self->dim() == 1 && self->size(0) == b.size(-1);
    const auto bias = is_bias ? std::optional<at::Tensor>(*self) : std::nullopt;
    if (t_training) return training_product(slot, a, b, self, beta, alpha, bias, out_dtype, t_precision, t_mx_scaling);
    if (t_real) {  // a 2-D product as a linear of weight b^T (real_linear); the others emulated
        if (a.dim() == 2 && (!self || is_bias) && a.numel() > 0 && b.numel() > 0 &&
            (!a.is_cuda() || (a.size(-1) % 16 == 0 && b.size(-1) % 16 == 0)))
            return real_linear(a, b.transpose(-1, -2).contiguous(), bias, t_precision, out_dtype);
        if (t_counts) ++t_counts->products_emulated;
    }
    const auto aq = quantize_operand(a, "mat1", 0, op, slot + "mat1");
    // [.., N, K]; one scale per tensor is the same in either layout: no transposed copy of b
    const bool per_tensor = recipe_spec(t_precision).scheme == Fp8Scheme::Tensorwise;
    const auto wq = per_tensor ? quantize_operand(b, "mat2", 0, op, slot + "mat2").transpose(-1, -2)
                               : quantize_operand(b.transpose(-1, -2).contiguous(), "mat2", 0, op, slot + "mat2");
    if (a.dim() == 2 && (!self || is_bias)) return gemm(aq, wq, bias, out_dtype);
    const auto bq = wq.transpose(-1, -2);
    if (a.dim() == 2) return at::addmm(self->to(at::kFloat), aq, bq, beta, alpha).to(out_dtype);
    if (!self) return at::bmm(aq, bq).to(out_dtype);
    return at::baddbmm(self->to(at::kFloat), aq, bq, beta, alpha).to(out_dtype);
}

at::Tensor counted_addmm(const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2, const at::Scalar& beta,
                         const at::Scalar& alpha) {
    c10::impl::ExcludeDispatchKeyGuard no_fp8(kFp8Key);
    if (takes_product("aten::addmm", m1, m2)) return quantized_product("aten::addmm", m1, m2, &self, beta, alpha);
    if (counts_product(m1)) ++t_counts->addmm;
    return at::addmm(self, m1, m2, beta, alpha);
}

at::Tensor counted_mm(const at::Tensor& a, const at::Tensor& b) {
    c10::impl::ExcludeDispatchKeyGuard no_fp8(kFp8Key);
    if (takes_product("aten::mm", a, b)) return quantized_product("aten::mm", a, b, nullptr, 1, 1);
    if (counts_product(a)) ++t_counts->mm;
    return at::mm(a, b);
}

/// aten::matmul under an FP8 pass of all GEMMs: autocast's matmul would cast both operands and
/// run the mm / bmm it reduces to with autocast off, where they are not the pass's; here
/// LibTorch's own reduction runs (the composite kernel) and its mm / bmm reach this key, quantized
/// as the model's products. 1-D operands (mv, dot) and matmuls the pass does not take run as
/// autocast runs them.
at::Tensor product_matmul(const at::Tensor& a, const at::Tensor& b) {
    if (a.dim() >= 2 && b.dim() >= 2 && all_gemms_take(a, b)) return at::compositeimplicitautograd::matmul(a, b);
    // a matmul by a 2-D right operand (x @ W, a weight) reduces to the mm of a linear: counted as one
    if (a.dim() >= 2 && b.dim() == 2 && counts_product(a) && autocast_eligible(a) && autocast_eligible(b))
        ++t_counts->mm;
    c10::impl::ExcludeDispatchKeyGuard no_fp8(kFp8Key);
    return at::matmul(a, b);
}

at::Tensor product_bmm(const at::Tensor& a, const at::Tensor& b) {
    c10::impl::ExcludeDispatchKeyGuard no_fp8(kFp8Key);
    if (takes_product("aten::bmm", a, b)) return quantized_product("aten::bmm", a, b, nullptr, 1, 1);
    return at::bmm(a, b);
}

at::Tensor product_baddbmm(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                           const at::Scalar& alpha) {
    c10::impl::ExcludeDispatchKeyGuard no_fp8(kFp8Key);
    if (takes_product("aten::baddbmm", b1, b2)) return quantized_product("aten::baddbmm", b1, b2, &self, beta, alpha);
    return at::baddbmm(self, b1, b2, beta, alpha);
}

/// Includes the FP8 key in (and no longer excludes it from) this thread's dispatch keys: LibTorch
/// excludes the autocast keys of devices without autocast by default. Returns the state before.
std::pair<bool, bool> include_fp8_key() {
    const std::pair<bool, bool> before{c10::impl::tls_is_dispatch_key_included(kFp8Key),
                                       c10::impl::tls_is_dispatch_key_excluded(kFp8Key)};
    c10::impl::tls_set_dispatch_key_included(kFp8Key, true);
    c10::impl::tls_set_dispatch_key_excluded(kFp8Key, false);
    return before;
}

void restore_fp8_key(bool included, bool excluded) {
    c10::impl::tls_set_dispatch_key_included(kFp8Key, included);
    c10::impl::tls_set_dispatch_key_excluded(kFp8Key, excluded);
}

void ensure_registered() {
    static const bool registered = [] {
        static torch::Library fallback(torch::Library::IMPL, "_", kFp8Key, __FILE__, __LINE__);
        fallback.fallback(torch::CppFunction::makeFallthrough());
        static torch::Library impl(torch::Library::IMPL, "aten", kFp8Key, __FILE__, __LINE__);
        impl.impl("linear", TORCH_FN(fp8_linear));
        impl.impl("addmm", TORCH_FN(counted_addmm));
        impl.impl("mm", TORCH_FN(counted_mm));
        impl.impl("bmm", TORCH_FN(product_bmm));
        impl.impl("matmul", TORCH_FN(product_matmul));
        impl.impl("baddbmm", TORCH_FN(product_baddbmm));
        impl.impl("conv1d", TORCH_FN((conv_kernel<kConv1d, c10::SymIntArrayRef>())));
        impl.impl("conv1d.padding", TORCH_FN((conv_kernel<kConv1d, c10::string_view>())));
        impl.impl("conv2d", TORCH_FN((conv_kernel<kConv2d, c10::SymIntArrayRef>())));
        impl.impl("conv2d.padding", TORCH_FN((conv_kernel<kConv2d, c10::string_view>())));
        impl.impl("conv3d", TORCH_FN((conv_kernel<kConv3d, c10::SymIntArrayRef>())));
        impl.impl("conv3d.padding", TORCH_FN((conv_kernel<kConv3d, c10::string_view>())));
        impl.impl("convolution", TORCH_FN(fp8_convolution));
        return true;
    }();
    (void)registered;
}

}  // namespace

Fp8WhatIfGuard::Fp8WhatIfGuard(std::vector<Fp8Operand>* sink, MxScaling mx_scaling) : on_(sink != nullptr) {
    if (!on_) return;
    prev_mx_scaling_ = t_mx_scaling;
    t_mx_scaling = mx_scaling;
    prev_sink_ = t_sink;
    t_sink = sink;
    prev_what_if_ = t_what_if;
    t_what_if = true;
    ensure_registered();
    std::tie(prev_, prev_excluded_) = include_fp8_key();
}

Fp8WhatIfGuard::~Fp8WhatIfGuard() {
    if (!on_) return;
    t_sink = prev_sink_;
    t_what_if = prev_what_if_;
    t_mx_scaling = prev_mx_scaling_;
    restore_fp8_key(prev_, prev_excluded_);
}

QuantSpec recipe_spec(Precision p) {
    QuantSpec s;                                                    // fp8: tensorwise, E4M3, current scaling
    if (p == Precision::Fp8Rowwise) s.scheme = Fp8Scheme::Rowwise;  // power-of-two scales (pow2_scales)
    if (p == Precision::Mxfp8) {
        s.scheme = Fp8Scheme::Mx;
        s.mx_scaling = t_mx_scaling;
    }
    if (p == Precision::Nvfp4) {
        s.scheme = Fp8Scheme::Nvfp4;
        s.element = Fp8Element::E2M1;
    }
    return s;
}

Fp8GemmCounter::Fp8GemmCounter(Fp8GemmCounts* c) : prev_(t_counts) {
    t_counts = c;
}

Fp8GemmCounter::~Fp8GemmCounter() {
    t_counts = prev_;
}

Fp8AllGemmsScope::Fp8AllGemmsScope(bool on) : prev_(t_all_gemms) {
    t_all_gemms = on;
}

Fp8AllGemmsScope::~Fp8AllGemmsScope() {
    t_all_gemms = prev_;
}

bool rowwise_gw_hp() {
    return t_gw_hp;
}

bool fp8_pass_active() {
    return !t_what_if && c10::impl::tls_is_dispatch_key_included(kFp8Key) &&
           !c10::impl::tls_is_dispatch_key_excluded(kFp8Key);
}

void note_what_if(const at::Tensor& x, const at::Tensor& w) {
    if (!t_what_if || !t_sink) return;
    const auto dt = x.device().type();
    if (!at::autocast::is_autocast_enabled(dt) || !at::isFloatingType(x.scalar_type()) ||
        !at::isFloatingType(w.scalar_type()))
        return;  // an FP32 region, or not a floating GEMM: no recipe would quantize it
    c10::impl::ExcludeDispatchKeyGuard no_fp8(kFp8Key);
    what_if_statistics(x, w, dt);
}

Fp8PassGuard::Fp8PassGuard(Precision p, std::vector<Fp8Operand>* sink, DelayedOptions delayed, bool real_gemm,
                           MxScaling mx_scaling)
    : on_(is_fp8(p)) {
    if (!on_) return;
    prev_mx_scaling_ = t_mx_scaling;
    t_mx_scaling = mx_scaling;
    prev_sink_ = t_sink;
    t_sink = sink;
    prev_precision_ = t_precision;
    t_precision = p;
    prev_delayed_ = t_delayed;
    t_delayed = delayed;
    t_calls = 0;
    t_products.clear();
    prev_training_ = t_training;
    t_training = false;  // a probe pass (the training constructor turns it on)
    prev_real_ = t_real;
    t_real = real_gemm;
    ensure_registered();
    std::tie(prev_, prev_excluded_) = include_fp8_key();  // while the guard lives
}

Fp8PassGuard::Fp8PassGuard(Precision p, Training t) : Fp8PassGuard(p, nullptr, {}, false, t.mx_scaling) {
    if (!on_) return;
    t_training = true;  // the state before is kept by the constructor above
    prev_all_gemms_ = t_all_gemms;
    t_all_gemms = t.all_gemms;
    prev_gw_hp_ = t_gw_hp;
    t_gw_hp = t.rowwise_gw_hp;
    if (auto* d = delayed_training()) d->calls = 0;  // a forward: GEMMs without a module counted from 0
}

Fp8PassGuard::~Fp8PassGuard() {
    if (!on_) return;
    if (t_training) {  // a training guard's (set by its constructor)
        t_all_gemms = prev_all_gemms_;
        t_gw_hp = prev_gw_hp_;
    }
    t_training = prev_training_;
    t_real = prev_real_;
    t_mx_scaling = prev_mx_scaling_;
    if (t_precision == Precision::Fp8Delayed)  // the end of a batch, a step of the recipe
        for (auto& [key, state] : pass_context().fp8_delayed) state.update();
    t_sink = prev_sink_;
    t_precision = prev_precision_;
    t_delayed = prev_delayed_;
    restore_fp8_key(prev_, prev_excluded_);
}

}  // namespace ampscope::detail
