// SPDX-License-Identifier: MIT
// A training step's linear layers under the FP8 recipes (fp8_pass.h): torchao 0.18's float8
// autograd function for fp8 and fp8-rowwise and its MXFP8 training linear for mxfp8, Transformer
// Engine's delayed scaling for fp8-delayed, with its state carried over the steps
// (DelayedTraining); with train --fp8-all-gemms the model's own products and convolutions too.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "ampscope/engine/errors.h"
#include "precision/fp8.h"
#include "precision/fp8_pass.h"

namespace ampscope::detail {
namespace {

thread_local DelayedTraining* t_delayed_training = nullptr;

/// `p`'s quantization of one operand of a training step's GEMMs (torchao's Float8LinearConfig for
/// the recipe): tensorwise, rowwise (power-of-two scales) or MX blocks as the recipe, `element` and the
/// reduction dimension `axis` of the GEMM the operand enters.
QuantSpec role_spec(Precision p, Fp8Element element, int64_t axis, MxScaling mx_scaling) {
    QuantSpec s = recipe_spec(p);
    s.element = element;
    s.axis = axis;
    s.mx_scaling = mx_scaling;
    return s;
}

/// The forward GEMM of a linear: a [M, K] @ b [N, K]^T in FP32, cast to `dtype`, shaped as the
/// layer's input `x` with its last dimension N.
at::Tensor output_product(const at::Tensor& a, const at::Tensor& b, const at::Tensor& x, at::ScalarType dtype) {
    auto sizes = x.sizes().vec();
    sizes.back() = b.size(0);
    return at::mm(a, b.t()).to(dtype).reshape(sizes);
}

/// The backward's grad_input GEMM: go_q [M, N] @ w_q [N, K] in FP32, cast to grad_output `go`'s
/// dtype, shaped as `go` with its last dimension K.
at::Tensor input_gradient(const at::Tensor& go_q, const at::Tensor& w_q, const at::Tensor& go) {
    auto sizes = go.sizes().vec();
    sizes.back() = w_q.size(1);
    return at::mm(go_q, w_q).to(go.scalar_type()).reshape(sizes);
}

/// `t` quantize-dequantized by `s` in t's own layout, as torchao's casts (elementwise) keep it: a
/// transposed operand (the weight_hp_t = W^T of a linear, attention's K^T) gives a transposed
/// result, so the GEMMs after it take the operands torchao's emulation takes.
at::Tensor quantized_as_laid(const at::Tensor& t, QuantSpec s) {
    if (t.dim() < 2 || t.is_contiguous() || !t.transpose(-1, -2).is_contiguous()) return quantize_dequantize(t, s);
    const int64_t axis = c10::maybe_wrap_dim(s.axis, t.dim());
    s.axis = axis == t.dim() - 1 ? t.dim() - 2 : axis == t.dim() - 2 ? t.dim() - 1 : axis;
    return quantize_dequantize(t.transpose(-1, -2), s).transpose(-1, -2);
}

/// `t` cast to E4M3 with one scale, torchao's tensorwise scale rounded down to a power of two
/// (round_scales_to_power_of_2, as its rowwise recipes round every scale; ATen's log2 and exp2, as
/// torchao's), dequantized in t's own layout.
at::Tensor pow2_tensorwise(const at::Tensor& t) {
    const double amax = operand_amax(t);
    const float scale = float((1.0 / (std::isnan(amax) ? amax : std::max(amax, 1e-12))) * 448.0);
    QuantSpec s;  // tensorwise E4M3
    s.given_scale = at::exp2(at::floor(at::log2(at::scalar_tensor(scale, at::kFloat)))).item<float>();
    return quantized_as_laid(t, s);
}

/// A training step's GEMM a [.., M, K] @ b [K, N] (or batched, a [B, M, K] @ b [B, K, N]) under
/// fp8 / fp8-rowwise / mxfp8, line for line torchao 0.18's matmul_with_hp_or_float8_args with
/// emulate=True with `b` as its weight_hp_t: a linear layer is this GEMM of input x and W^T
/// (Float8Linear passes weight.t()), a product of the model (train --fp8-all-gemms) of its mat1
/// and mat2, each batch of a batched one as that GEMM (a tensorwise scale spans the whole
/// operand). mxfp8 quantizes as torchao's MXFP8 training linear (mx_mm) in the same operand roles.
/// Forward: a and b along K (E4M3), the FP32 product cast to the autocast dtype. Backward (outside
/// autocast): grad_output along N (fp8: E5M2 tensorwise; fp8-rowwise: E4M3, power-of-two scales
/// per row; mxfp8: E4M3, MX blocks) with b along N, grad_a = go @ b^T; grad_output and a along M,
/// grad_b = (go^T @ a)^T; FP32 products cast to `grad_dtype` (the autocast dtype: a linear's
/// grad_output's; autograd casts them to the operands'). Each operand quantized in its own layout (quantized_as_laid),
/// as torchao's emulation multiplies them. mxfp8's products are BF16 as the hardware's scaled GEMM writes them
/// (torchao's real branch: torch._scaled_mm(out_dtype=bfloat16)); torchao's emulation returns their FP32 values
/// instead, so it is torchao's emulation with the hardware's output dtype (tests/cli/test_mxfp8_train.py).
struct Fp8ProductFn : public torch::autograd::Function<Fp8ProductFn> {
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b,
                              int64_t precision, int64_t out_dtype, int64_t mx_scaling, bool gw_hp,
                              int64_t grad_dtype) {
        ctx->save_for_backward({a, b});
        ctx->saved_data["grad_dtype"] = grad_dtype;
        ctx->saved_data["precision"] = precision;
        ctx->saved_data["mx_scaling"] = mx_scaling;
        ctx->saved_data["gw_hp"] = gw_hp;
        const auto p = Precision(precision);
        const auto mx = MxScaling(mx_scaling);
        const auto aq = quantized_as_laid(a, role_spec(p, Fp8Element::E4M3, -1, mx));
        const auto bq = quantized_as_laid(b, role_spec(p, Fp8Element::E4M3, -2, mx));
        if (b.dim() == 3) return at::bmm(aq, bq).to(at::ScalarType(out_dtype));
        return output_product(rows_of(aq), bq.t(), a, at::ScalarType(out_dtype));  // K may be 0
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        const auto& a = saved[0];
        const auto& b = saved[1];
        const auto p = Precision(ctx->saved_data["precision"].toInt());
        const auto mx = MxScaling(ctx->saved_data["mx_scaling"].toInt());
        const bool per_slice = p == Precision::Fp8Rowwise || p == Precision::Mxfp8;  // a scale per row / block
        const auto go_element = per_slice ? Fp8Element::E4M3 : Fp8Element::E5M2;
        const auto& go = grads[0];
        const auto gd = at::ScalarType(ctx->saved_data["grad_dtype"].toInt());
        const bool batched = b.dim() == 3;
        const auto go2 = batched ? go : rows_of(go);
        const auto go_rows = quantized_as_laid(go2, role_spec(p, go_element, -1, mx));  // along N
        const auto a2 = batched ? a : rows_of(a);
        if (ctx->saved_data["gw_hp"].toBool()) {  // torchao's rowwise_with_gw_hp
            const auto grad_a = at::matmul(go_rows, pow2_tensorwise(b).transpose(-1, -2));
            const auto grad_b = at::matmul(go2.transpose(-1, -2), a2.to(go.scalar_type()));  // high precision
            return {grad_a.to(gd).reshape(a.sizes()), grad_b.to(gd).transpose(-1, -2), {}, {}, {}, {}, {}};
        }
        const auto b_for_a = quantized_as_laid(b, role_spec(p, Fp8Element::E4M3, per_slice ? -1 : -2, mx));
        const auto grad_a = at::matmul(go_rows, b_for_a.transpose(-1, -2)).to(gd).reshape(a.sizes());
        const auto go_cols = per_slice ? quantized_as_laid(go2, role_spec(p, go_element, -2, mx)) : go_rows;  // along M
        const auto a_cols = quantized_as_laid(a2, role_spec(p, Fp8Element::E4M3, per_slice ? -2 : -1, mx));
        const auto grad_b = at::matmul(go_cols.transpose(-1, -2), a_cols).to(gd).transpose(-1, -2);
        return {grad_a, grad_b, {}, {}, {}, {}, {}};
    }
};

/// The tensorwise cast of a training step's convolution operand (fp8) or product operand and
/// convolution operand (fp8-delayed), as a straight-through function: the forward gives `t` cast
/// to E4M3 and dequantized (current scaling, or the DelayedTraining's stale scale of `slot`,
/// recorded), the backward passes the gradient through in `grad_dtype` (a linear's gradients are
/// its grad_output's dtype): the op after it then runs, and differentiates, on the cast values.
struct FakeCastFn : public torch::autograd::Function<FakeCastFn> {
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& t, int64_t state,
                              const std::string& slot, bool weight, int64_t grad_dtype) {
        ctx->saved_data["grad_dtype"] = grad_dtype;
        auto* d = reinterpret_cast<DelayedTraining*>(intptr_t(state));
        if (!d) return quantize_dequantize(t, recipe_spec(Precision::Fp8));
        return weight ? d->cast_weight(t, slot) : d->cast(t, slot, Fp8Element::E4M3);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        return {grads[0].to(at::ScalarType(ctx->saved_data["grad_dtype"].toInt())), at::Tensor(), at::Tensor(),
                at::Tensor(), at::Tensor()};
    }
};

/// The gradient cast of FakeCastFn's op: the forward passes `t` on as a new tensor of `out_dtype`
/// (a copy in t's dtype: a model may write into it in place, which an input handed back as it is
/// forbids), the backward casts the gradient arriving, in t's dtype, to E5M2 (current scaling, or
/// the DelayedTraining's stale scale of `slot`, recorded), the grad_output the op's backward GEMMs take.
struct GradCastFn : public torch::autograd::Function<GradCastFn> {
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& t, int64_t state,
                              const std::string& slot, int64_t out_dtype) {
        ctx->saved_data["state"] = state;
        ctx->saved_data["slot"] = slot;
        ctx->saved_data["dtype"] = int64_t(t.scalar_type());
        return t.to(at::ScalarType(out_dtype), /*non_blocking=*/false, /*copy=*/true);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        auto* d = reinterpret_cast<DelayedTraining*>(intptr_t(ctx->saved_data["state"].toInt()));
        QuantSpec e5m2 = recipe_spec(Precision::Fp8);
        e5m2.element = Fp8Element::E5M2;
        const auto dtype = at::ScalarType(ctx->saved_data["dtype"].toInt());
        const auto go = grads[0].to(dtype);
        auto g =
            d ? d->cast(go, ctx->saved_data["slot"].toStringRef(), Fp8Element::E5M2) : quantize_dequantize(go, e5m2);
        return {g.to(dtype), at::Tensor(), at::Tensor(), at::Tensor()};
    }
};

/// training_conv's function: LibTorch's convolution of (x, w) built into a graph of its own in the
/// forward (on detached copies) and differentiated by a reentrant backward, both under IeeeConv.
struct IeeeConvFn : public torch::autograd::Function<IeeeConvFn> {
    using Conv = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                              const Conv& conv) {
        at::AutoGradMode on(true);
        const auto xd = x.detach().requires_grad_(x.requires_grad());
        const auto wd = w.detach().requires_grad_(w.requires_grad());
        IeeeConv ieee(x.device().type());
        const auto out = conv(xd, wd);
        ctx->saved_data["out"] = out;
        ctx->saved_data["x"] = xd;
        ctx->saved_data["w"] = wd;
        return out.detach();
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        // once, and without a graph of its own (ampscope differentiates a step once, create_graph off)
        if (!ctx->saved_data.count("out") || at::GradMode::is_enabled())
            throw std::runtime_error("a training step's FP8 convolution is differentiated once, without create_graph");
        const auto out = ctx->saved_data["out"].toTensor();
        const std::vector<at::Tensor> in = {ctx->saved_data["x"].toTensor(), ctx->saved_data["w"].toTensor()};
        for (const char* k : {"out", "x", "w"}) ctx->saved_data.erase(k);  // freed as the backward passes
        torch::autograd::variable_list wanted;
        for (const auto& t : in)
            if (t.requires_grad()) wanted.push_back(t);
        if (wanted.empty() || !out.requires_grad()) return {at::Tensor(), at::Tensor(), at::Tensor()};
        IeeeConv ieee(out.device().type());
        const auto got = torch::autograd::grad({out}, wanted, {grads[0]}, /*retain_graph=*/false);
        torch::autograd::variable_list res;
        size_t k = 0;
        for (const auto& t : in) res.push_back(t.requires_grad() ? got[k++] : at::Tensor());
        res.push_back(at::Tensor());
        return res;
    }
};

/// A training step's product whose `self` beta = 0 leaves out (PyTorch's addmm / baddbmm ignore
/// its values, NaN and inf included): forward alpha * prod in `out_dtype` (a new tensor: a model
/// may write into it in place); backward prod's gradient as autograd would give it, and `self`'s as
/// PyTorch's derivative does, grad * beta (zeros where the gradient is finite) summed to self's
/// shape, so that a parameter there still gets a gradient (weight decay, momentum).
struct IgnoredSelfFn : public torch::autograd::Function<IgnoredSelfFn> {
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& prod, const at::Tensor& self,
                              const at::Scalar& alpha, int64_t out_dtype) {
        ctx->saved_data["sizes"] = self.sizes().vec();
        ctx->saved_data["dtype"] = int64_t(self.scalar_type());
        ctx->saved_data["prod_dtype"] = int64_t(prod.scalar_type());
        ctx->saved_data["alpha"] = alpha;
        return (prod * alpha).to(at::ScalarType(out_dtype));
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto sizes = ctx->saved_data["sizes"].toIntVector();
        const auto zero = (grads[0] * 0).sum_to_size(sizes).to(at::ScalarType(ctx->saved_data["dtype"].toInt()));
        const auto g = grads[0].to(at::ScalarType(ctx->saved_data["prod_dtype"].toInt()));
        return {g * ctx->saved_data["alpha"].toScalar(), zero, at::Tensor(), at::Tensor()};
    }
};

/// NVIDIA's NVFP4 training recipe's random Hadamard transform: diag(signs) @ H16 / 4 (torchao
/// get_rht_matrix), FP32, the signs fixed: 1 where torch.rand(16) of a CPU generator seeded 0 is
/// >= 0.5, else -1 (torchao's get_wgrad_sign_vector draws them so, from the global generator).
const at::Tensor& rht_matrix() {
    static const at::Tensor m = [] {
        auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
        const auto signs = at::where(at::rand({16}, gen, at::kFloat) >= 0.5, 1.0, -1.0).to(at::kFloat);
        auto h = at::ones({1, 1}, at::kFloat);
        for (int n = 1; n < 16; n *= 2) h = at::cat({at::cat({h, h}, 1), at::cat({h, -h}, 1)}, 0);  // Sylvester
        return (at::diag(signs).matmul(h) * 0.25).contiguous();
    }();
    return m;
}

/// The transform of `t` [rows, M] along M in blocks of 16 (M padded with zeros to a multiple of 16;
/// the padding kept: both operands of the GEMM carry it): (block @ rht_matrix()) in FP32, cast to
/// BF16 as the recipe's kernel writes it, returned in FP32 [rows, M padded].
at::Tensor rht(const at::Tensor& t) {
    const int64_t pad = (16 - t.size(1) % 16) % 16;
    const auto tp = pad ? at::constant_pad_nd(t, {0, pad}) : t.contiguous();
    const auto& m = rht_matrix();
    return at::mm(tp.reshape({-1, 16}), m.to(tp.device())).to(at::kBFloat16).to(at::kFloat).reshape(tp.sizes());
}

QuantSpec nvfp4_spec(bool tiles_2d, bool stochastic) {
    QuantSpec s = recipe_spec(Precision::Nvfp4);
    s.tiles_2d = tiles_2d;
    s.stochastic = stochastic;
    return s;
}

/// A training step's linear under nvfp4: NVIDIA's NVFP4 training recipe, the GEMMs and roundings of
/// torchao 0.18's nvfp4_mm_triton (Blackwell GPUs), simulated with NVFP4Tensor.to_nvfp4's scale
/// arithmetic (the Triton kernel orders it differently: a block scale can differ by one E4M3 step). The operands cast
/// to BF16 first (the recipe's kernels take BF16), E2M1 elements with E4M3 block scales and a per-tensor FP32 scale
/// (the NVFP4 quantizer of the probe passes), products in FP32 cast to BF16:
///   forward     out = x_q @ W_q^T: x 1 x 16 along K, W in 16 x 16 tiles, both rounded to nearest;
///   dgrad       grad_input = go_q @ W_q: go 1 x 16 along N, rounded stochastically; the forward's W_q;
///   wgrad       grad_weight = RHT(go^T)_q @ RHT(x^T)_q^T: both transformed along M by the random
///               Hadamard transform (rht), then 1 x 16 along M; go's rounded stochastically.
/// Stochastic rounding draws from the default generator of the device (dgrad's, then wgrad's),
/// which the trainer reseeds before each micro-batch's forward.
struct Nvfp4LinearFn : public torch::autograd::Function<Nvfp4LinearFn> {
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                              int64_t out_dtype) {
        const auto xb = rows_of(x).to(at::kBFloat16).to(at::kFloat);
        const auto wq = quantize_dequantize(w.to(at::kBFloat16), nvfp4_spec(true, false));
        ctx->save_for_backward({xb, wq});
        const auto xq = quantize_dequantize(xb, nvfp4_spec(false, false));
        return output_product(xq, wq, x, at::ScalarType(out_dtype));
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        const auto& xb = saved[0];
        const auto& wq = saved[1];
        const auto& go = grads[0];
        const auto gob = rows_of(go).to(at::kBFloat16).to(at::kFloat);
        const auto goq = quantize_dequantize(gob, nvfp4_spec(false, true));
        const auto grad_input = input_gradient(goq, wq, go);
        const auto got = quantize_dequantize(rht(gob.t()), nvfp4_spec(false, true));
        const auto xt = quantize_dequantize(rht(xb.t()), nvfp4_spec(false, false));
        const auto grad_weight = at::mm(got, xt.t()).to(go.scalar_type());
        return {grad_input, grad_weight, at::Tensor()};
    }
};

/// fp8-delayed's linear in a training step (DelayedTraining): the forward's input and weight cast
/// before the function (their casts are the backward's operands), the grad_output's cast in the
/// backward. The DelayedTraining travels as an address: CUDA runs the backward on another thread.
struct DelayedLinearFn : public torch::autograd::Function<DelayedLinearFn> {
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                              const at::Tensor& x2q, const at::Tensor& wq, int64_t out_dtype, int64_t state,
                              const std::string& grad_slot) {
        ctx->save_for_backward({x2q, wq});
        ctx->saved_data["state"] = state;
        ctx->saved_data["slot"] = grad_slot;
        ctx->saved_data["in_dtype"] = int64_t(x.scalar_type());
        return output_product(x2q, wq, x, at::ScalarType(out_dtype));
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        auto& d = *reinterpret_cast<DelayedTraining*>(intptr_t(ctx->saved_data["state"].toInt()));
        const auto& go = grads[0];
        const auto goq = d.cast(rows_of(go), ctx->saved_data["slot"].toStringRef(), Fp8Element::E5M2);
        const auto grad_input = input_gradient(goq, saved[1], go);
        const auto grad_weight = at::mm(goq.t(), saved[0]).to(go.scalar_type());
        return {grad_input, grad_weight, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
};

}  // namespace

at::Tensor rows_of(const at::Tensor& t) {
    return t.dim() == 1 ? t.unsqueeze(0) : t.flatten(0, -2);
}

DelayedScaling& DelayedTraining::slot(const std::string& name, Fp8Element element) {
    if (!restored.empty()) used.insert(name);
    auto it = slots.find(name);
    if (it == slots.end())
        it = slots.emplace(name, DelayedScaling(element, options.amax_history, options.margin)).first;
    return it->second;
}

at::Tensor DelayedTraining::cast(const at::Tensor& t, const std::string& name, Fp8Element element) {
    DelayedScaling& s = slot(name, element);
    QuantSpec spec;  // tensorwise with the stale scale
    spec.element = element;
    spec.given_scale = s.scale();
    const auto x = t.to(at::kFloat).contiguous();  // once: the quantization and the figures below read it
    auto q = quantize_dequantize(x, spec);
    if (!record || x.numel() == 0) return q;  // an empty operand: no amax to record
    // the amax and the values beyond the stale scale's range (QuantStats::amax and ::saturated: the
    // scaled magnitude rounding past the largest value; E4M3's 448 keeps ties up to 464), one read;
    // an inf too: the cast clamps it to the largest value, as TE's saturating cast does (NaN stays)
    const double past = element == Fp8Element::E4M3 ? 464.0 : 61440.0;
    const auto scaled = at::abs(x * s.scale());
    const auto beyond = element == Fp8Element::E4M3 ? scaled > past : scaled >= past;  // NaN: false
    const auto host =
        at::stack({at::max(at::abs(x)).to(at::kDouble), beyond.sum().to(at::kDouble)}).to(at::kCPU).contiguous();
    const double* h = host.data_ptr<double>();
    s.record(float(h[0]));
    const auto n = int64_t(h[1]);
    if (n > 0 && saturated == 0) saturated_at = name;
    saturated += n;
    return q;
}

at::Tensor DelayedTraining::cast_weight(const at::Tensor& w, const std::string& name) {
    if (!weight_cache) return cast(w, name, Fp8Element::E4M3);
    if (begun > 1)  // a later micro-batch, or a diagnostic re-run of the step: the first one's cast
        if (const auto it = weights.find(name); it != weights.end()) return it->second;
    return weights[name] = cast(w, name, Fp8Element::E4M3);
}

void DelayedTraining::end_micro_batch() {
    for (auto& [name, s] : slots) s.update();
}

void DelayedTraining::end_step() {
    saturated = 0;
    saturated_at.clear();
    before.clear();
    begun = 0;
    weights.clear();
}

void DelayedTraining::begin_micro_batch(bool keep) {
    ++begun;
    if (!keep) return;
    auto& kept = before.emplace_back();
    for (const auto& [name, s] : slots) kept.emplace(name, Kept{s.element(), s.scale()});
}

DelayedTraining::Rewind::Rewind(DelayedTraining* d, size_t k) : d_(d && k < d->before.size() ? d : nullptr) {
    if (!d_) return;
    current_ = std::move(d_->slots);
    d_->slots.clear();
    for (const auto& [name, kept] : d_->before[k]) {  // a one-entry history: only the scale is read
        DelayedScaling s(kept.element, 1, d_->options.margin);
        s.restore({0.0f}, kept.scale, 0);
        d_->slots.emplace(name, s);
    }
}

DelayedTraining::Rewind::~Rewind() {
    if (d_) d_->slots = std::move(current_);
}

DelayedTrainingScope::DelayedTrainingScope(DelayedTraining* d) : prev_(t_delayed_training) {
    t_delayed_training = d;
}

DelayedTrainingScope::~DelayedTrainingScope() {
    t_delayed_training = prev_;
}

DelayedTrainingScope::Quiet::Quiet() {
    if (!t_delayed_training) return;
    prev_ = t_delayed_training->record;
    t_delayed_training->record = false;
}

DelayedTrainingScope::Quiet::~Quiet() {
    if (t_delayed_training) t_delayed_training->record = prev_;
}

DelayedTraining* delayed_training() {
    return t_delayed_training;
}

at::Tensor fp8_training_linear(const at::Tensor& x, const at::Tensor& w, Precision p, at::ScalarType out_dtype,
                               MxScaling mx_scaling) {
    return Fp8ProductFn::apply(x, w.t(), int64_t(p), int64_t(out_dtype), int64_t(mx_scaling),
                               p == Precision::Fp8Rowwise && rowwise_gw_hp(), int64_t(out_dtype));  // weight_hp_t
}

at::Tensor nvfp4_training_linear(const at::Tensor& x, const at::Tensor& w, at::ScalarType out_dtype) {
    return Nvfp4LinearFn::apply(x, w, int64_t(out_dtype));
}

at::Tensor delayed_training_linear(const at::Tensor& x, const at::Tensor& w, at::ScalarType out_dtype,
                                   DelayedTraining& d, const std::string& module) {
    const std::string name = module.empty() ? "#" + std::to_string(d.calls) : module;
    ++d.calls;
    at::Tensor x2q, wq;
    {
        at::NoGradGuard ng;  // the casts are the function's saved operands, not graph nodes
        x2q = d.cast(rows_of(x), name + "/input", Fp8Element::E4M3);
        wq = d.cast_weight(w, name + "/weight");
    }
    if (!at::GradMode::is_enabled() || !(x.requires_grad() || w.requires_grad()))
        return output_product(x2q, wq, x, out_dtype);
    return DelayedLinearFn::apply(x, w, x2q, wq, int64_t(out_dtype), int64_t(reinterpret_cast<intptr_t>(&d)),
                                  name + "/grad_output");
}

at::Tensor fp8_training_product(const at::Tensor& a, const at::Tensor& b, Precision p, at::ScalarType out_dtype,
                                MxScaling mx_scaling, at::ScalarType grad_dtype) {
    return Fp8ProductFn::apply(a, b, int64_t(p), int64_t(out_dtype), int64_t(mx_scaling),
                               p == Precision::Fp8Rowwise && rowwise_gw_hp(), int64_t(grad_dtype));
}

at::Tensor training_cast(const at::Tensor& t, DelayedTraining* d, const std::string& slot, bool weight,
                         at::ScalarType grad_dtype) {
    return FakeCastFn::apply(t, int64_t(reinterpret_cast<intptr_t>(d)), slot, weight, int64_t(grad_dtype));
}

at::Tensor training_grad_cast(const at::Tensor& t, DelayedTraining* d, const std::string& slot,
                              at::ScalarType out_dtype) {
    return GradCastFn::apply(t, int64_t(reinterpret_cast<intptr_t>(d)), slot, int64_t(out_dtype));
}

IeeeConv::IeeeConv(at::DeviceType dt) : on_(dt == at::kCUDA) {
    if (!on_) return;
    auto& ctx = at::globalContext();
    before_ = ctx.float32Precision(at::Float32Backend::CUDA, at::Float32Op::CONV);
    ctx.setFloat32Precision(at::Float32Backend::CUDA, at::Float32Op::CONV, at::Float32Precision::IEEE);
}

IeeeConv::~IeeeConv() {
    if (on_) at::globalContext().setFloat32Precision(at::Float32Backend::CUDA, at::Float32Op::CONV, before_);
}

at::Tensor training_conv(const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& conv,
                         const at::Tensor& xq, const at::Tensor& wq) {
    if (!at::GradMode::is_enabled() || !(xq.requires_grad() || wq.requires_grad())) {
        IeeeConv ieee(xq.device().type());
        return conv(xq, wq);
    }
    return IeeeConvFn::apply(xq, wq, conv);
}

DelayedTraining* training_state(Precision p) {
    if (p != Precision::Fp8Delayed) return nullptr;
    if (auto* d = delayed_training()) return d;
    throw InputError("", "precision", "fp8-delayed in a training step without its delayed-scaling state");
}

at::Tensor training_product(const std::string& slot, const at::Tensor& a, const at::Tensor& b, const at::Tensor* self,
                            const at::Scalar& beta, const at::Scalar& alpha, const std::optional<at::Tensor>& bias,
                            at::ScalarType out_dtype, Precision p, MxScaling mx) {
    const bool plain = !self || bias;
    const auto dtype = plain ? out_dtype : at::kFloat;  // the gradients in out_dtype either way
    at::Tensor prod;
    if (p == Precision::Fp8Delayed) {
        auto* d = training_state(p);
        const auto aq = training_cast(a, d, slot + "mat1", false, out_dtype);
        const auto bq = training_cast(b, d, slot + "mat2", false, out_dtype);
        prod = training_grad_cast(at::matmul(aq, bq), d, slot + "grad_output", dtype);
    } else if (p == Precision::Fp8 || p == Precision::Fp8Rowwise || p == Precision::Mxfp8) {
        prod = fp8_training_product(a, b, p, dtype, mx, out_dtype);
    } else {
        throw InputError(
            "", "fp8_all_gemms",
            "given with " + to_string(p) + " in a training step; expected fp8, fp8-rowwise, mxfp8 or fp8-delayed");
    }
    if (plain) return bias ? prod + bias->to(dtype) : prod;
    if (beta.equal(0)) {  // self ignored, NaN and inf too (PyTorch's rule); a zero gradient for it
        if (self->requires_grad() && at::GradMode::is_enabled())
            return IgnoredSelfFn::apply(prod, *self, alpha, int64_t(out_dtype));
        return (prod * alpha).to(out_dtype);
    }
    return (self->to(at::kFloat) * beta + prod * alpha).to(out_dtype);
}

std::string delayed_scaling_note(const DelayedOptions& d) {
    return "fp8-delayed: batches run in probe order, one batch a step of Transformer Engine's DelayedScaling "
           "(amax history " +
           std::to_string(d.amax_history) + ", margin " + std::to_string(d.margin) +
           ", amax_compute_algo max): each GEMM operand is cast with the scale the "
           "amaxes of the batches before it give; the first batch has an empty history and runs with scale 1 "
           "(the recipe's initial scale), so its values above 448 saturate";
}

std::string one_batch_delayed_note(int64_t probes, int64_t static_batch) {
    return "fp8-delayed: the " + std::to_string(probes) +
           " probes run as one batch, cast with the initial scale 1 before any amax is recorded: "
           "--fp8-amax-history and --fp8-margin change nothing in this run (" +
           (static_batch > 0 ? "the program's static batch is " + std::to_string(static_batch) +
                                   ": more probes than that run several batches"
                             : std::string("a --batch-size below the probe count runs several batches")) +
           ", each cast with the scales of those before it)";
}

void merge_operand(std::vector<Fp8Operand>& into, Fp8Operand o) {
    for (auto& x : into)
        if (x.module == o.module && x.op == o.op && x.operand == o.operand && x.stats.scheme == o.stats.scheme) {
            x.stats.merge(o.stats);
            return;
        }
    into.push_back(std::move(o));
}

}  // namespace ampscope::detail
