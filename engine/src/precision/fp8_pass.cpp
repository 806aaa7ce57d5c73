// SPDX-License-Identifier: MIT
// The simulated FP8 pass: the aten::linear kernel that quantizes its operands (fp8_pass.h).
#include "precision/fp8_pass.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "precision/fp8.h"
#include "precision/precision.h"

namespace ampscope::detail {
namespace {

constexpr auto kFp8Key = c10::DispatchKey::AutocastPrivateUse1;
thread_local std::vector<Fp8Operand>* t_sink = nullptr;

/// The operand quantize-dequantized; its statistics merged into the pass's sink when there is one.
at::Tensor quantize_operand(const at::Tensor& t, const char* operand) {
    QuantSpec s;  // tensorwise, E4M3, current scaling
    if (!t_sink) return quantize_dequantize(t, s);
    QuantStats st;
    auto q = quantize_dequantize(t, s, &st);
    const auto& scope = pass_context().scope;
    const std::string module = scope.empty() ? std::string() : scope.back();
    for (auto& o : *t_sink)
        if (o.module == module && o.operand == operand) {
            o.stats.merge(st);
            return q;
        }
    t_sink->push_back({module, "aten::linear", operand, st});
    return q;
}

/// torchao's Float8Linear forward in emulation: mm(qdq(x), qdq(W)^T) in FP32, cast to the
/// autocast dtype (autocast's cast of the Float8TrainingTensors only changes their output dtype),
/// then + bias in that dtype.
at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias) {
    c10::impl::ExcludeDispatchKeyGuard no_fp8(kFp8Key);
    const auto dt = x.device().type();
    if (!at::autocast::is_autocast_enabled(dt) || !at::isFloatingType(x.scalar_type()) ||
        !at::isFloatingType(w.scalar_type()))
        return at::linear(x, w, bias);  // an FP32 region, or not a floating GEMM
    const auto out_dtype = at::autocast::get_autocast_dtype(dt);
    at::RecordFunctionGuard quiet(false);  // the emulation's own ops are not the model's: aten::linear is
    c10::impl::ExcludeDispatchKeyGuard no_autocast(at::autocast::get_autocast_dispatch_key_from_device_type(dt));
    const auto xq = quantize_operand(x, "input");
    const auto wq = quantize_operand(w, "weight");
    auto sizes = x.sizes().vec();
    sizes.back() = w.size(0);
    auto out = at::mm(xq.reshape({-1, xq.size(-1)}), wq.t()).reshape(sizes).to(out_dtype);
    if (bias && bias->defined()) out = out + bias->to(out.scalar_type());
    return out;
}

void ensure_registered() {
    static const bool registered = [] {
        static torch::Library fallback(torch::Library::IMPL, "_", kFp8Key, __FILE__, __LINE__);
        fallback.fallback(torch::CppFunction::makeFallthrough());
        static torch::Library impl(torch::Library::IMPL, "aten", kFp8Key, __FILE__, __LINE__);
        impl.impl("linear", TORCH_FN(fp8_linear));
        return true;
    }();
    (void)registered;
}

}  // namespace

bool fp8_pass_active() {
    return c10::impl::tls_is_dispatch_key_included(kFp8Key) && !c10::impl::tls_is_dispatch_key_excluded(kFp8Key);
}

Fp8PassGuard::Fp8PassGuard(bool on, std::vector<Fp8Operand>* sink) : on_(on) {
    if (!on_) return;
    prev_sink_ = t_sink;
    t_sink = sink;
    ensure_registered();
    // LibTorch excludes the autocast keys of devices without autocast by default: included, and
    // no longer excluded, while the guard lives
    prev_ = c10::impl::tls_is_dispatch_key_included(kFp8Key);
    prev_excluded_ = c10::impl::tls_is_dispatch_key_excluded(kFp8Key);
    c10::impl::tls_set_dispatch_key_included(kFp8Key, true);
    c10::impl::tls_set_dispatch_key_excluded(kFp8Key, false);
}

Fp8PassGuard::~Fp8PassGuard() {
    if (!on_) return;
    t_sink = prev_sink_;
    c10::impl::tls_set_dispatch_key_included(kFp8Key, prev_);
    c10::impl::tls_set_dispatch_key_excluded(kFp8Key, prev_excluded_);
}

}  // namespace ampscope::detail
