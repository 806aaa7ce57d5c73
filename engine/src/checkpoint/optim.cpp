// SPDX-License-Identifier: MIT
// torch.optim's single-tensor updates (the implementation PyTorch runs for CPU parameters
// with foreach/fused left at None): SGD (momentum, dampening, nesterov, weight decay,
// maximize) and Adam/AdamW (amsgrad, decoupled weight decay), the same tensor ops in the same
// order with the same double-precision scalars, so that a replayed update equals PyTorch's
// bitwise. State is created lazily as PyTorch does (zeros, step a 0-dim float32 tensor).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "checkpoint/checkpoint.h"

namespace ampscope::detail::ckpt {
namespace {

void sgd_update(const OptimizerGroup& g, ParamState& st, const at::Tensor& p) {
    at::Tensor grad = g.maximize ? p.grad().neg() : p.grad();
    if (g.weight_decay != 0) grad = grad.add(p, g.weight_decay);
    if (g.momentum != 0) {
        if (!st.momentum_buffer.defined())
            st.momentum_buffer = grad.detach().clone();
        else
            st.momentum_buffer.mul_(g.momentum).add_(grad, 1 - g.dampening);
        grad = g.nesterov ? grad.add(st.momentum_buffer, g.momentum) : st.momentum_buffer;
    }
    p.add_(grad, -g.lr);
}

void adam_update(const OptimizerGroup& g, ParamState& st, const at::Tensor& p) {
    if (!st.step.defined()) st.step = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
    if (!st.exp_avg.defined()) st.exp_avg = at::zeros_like(p, at::MemoryFormat::Preserve);
    if (!st.exp_avg_sq.defined()) st.exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
    if (g.amsgrad && !st.max_exp_avg_sq.defined()) st.max_exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
    at::Tensor grad = g.maximize ? p.grad().neg() : p.grad();
    st.step.add_(1);
    if (g.weight_decay != 0) {
        if (g.decoupled)
            p.mul_(1 - g.lr * g.weight_decay);
        else
            grad = grad.add(p, g.weight_decay);
    }
    st.exp_avg.lerp_(grad, 1 - g.beta1);
    st.exp_avg_sq.mul_(g.beta2).addcmul_(grad, grad, 1 - g.beta2);
    const double step = st.step.item<double>();
    const double bias_correction1 = 1 - std::pow(g.beta1, step);
    const double bias_correction2 = 1 - std::pow(g.beta2, step);
    const double step_size = g.lr / bias_correction1;
    const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
    at::Tensor denom;
    if (g.amsgrad) {
        at::maximum_out(st.max_exp_avg_sq, st.max_exp_avg_sq, st.exp_avg_sq);
        denom = (st.max_exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(g.eps);
    } else {
        denom = (st.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(g.eps);
    }
    p.addcdiv_(st.exp_avg, denom, -step_size);
}

}  // namespace

void optimizer_step(OptimizerState& o, const std::vector<at::Tensor>& params) {
    at::NoGradGuard ng;
    for (const auto& g : o.groups)
        for (const int64_t i : g.params) {
            const auto& p = params.at(size_t(i));
            if (!p.grad().defined()) continue;  // PyTorch steps only parameters with gradients
            auto& st = o.state[i];
            if (o.kind == "sgd")
                sgd_update(g, st, p);
            else
                adam_update(g, st, p);
        }
}

}  // namespace ampscope::detail::ckpt
