// SPDX-License-Identifier: MIT
// torch.optim's updates: the single-tensor implementation (what PyTorch runs for CPU parameters
// with foreach/fused left at None; foreach=True gives the same bits on the CPU, its ops falling
// back to per-tensor loops of the same kernels) for SGD (momentum, dampening, nesterov, weight
// decay, maximize) and Adam/AdamW (amsgrad, decoupled weight decay), the same tensor ops in the
// same order with the same double-precision scalars; and for groups with fused=True the fused
// ATen kernels PyTorch calls (_fused_adam_, _fused_adamw_, _fused_sgd_), which round
// differently. State is created lazily as PyTorch does (zeros, step a 0-dim float32 tensor).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <map>
#include <stdexcept>

#include "ampscope/engine/vocabulary.h"
#include "replay/checkpoint.h"

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
    if (g.beta1 == 1) throw std::invalid_argument("Adam's bias correction 1 - beta1^step is 0 (beta1 = 1)");
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

void init_adam_state(const OptimizerGroup& g, ParamState& st, const at::Tensor& p) {
    if (!st.step.defined()) st.step = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(p.device()));
    st.step = st.step.to(p.device(), at::kFloat);  // load_state_dict: fused steps are float32 on the parameter's device
    if (!st.exp_avg.defined()) st.exp_avg = at::zeros_like(p, at::MemoryFormat::Preserve);
    if (!st.exp_avg_sq.defined()) st.exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
    if (g.amsgrad && !st.max_exp_avg_sq.defined()) st.max_exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
}

/// Adam(fused=True)._fused_adam: steps += 1, then one fused kernel over the group's parameters.
void fused_adam(const std::string& kind, const OptimizerGroup& g, std::map<int64_t, ParamState>& state,
                const std::vector<at::Tensor>& params) {
    std::vector<at::Tensor> ps, grads, m, v, vmax, steps;
    for (const int64_t i : g.params) {
        const auto& p = params.at(size_t(i));
        if (!p.grad().defined()) continue;
        auto& st = state[i];
        init_adam_state(g, st, p);
        ps.push_back(p), grads.push_back(p.grad()), m.push_back(st.exp_avg), v.push_back(st.exp_avg_sq),
            steps.push_back(st.step);
        if (g.amsgrad) vmax.push_back(st.max_exp_avg_sq);
    }
    if (ps.empty()) return;
    at::_foreach_add_(steps, 1);
    if (kind == to_string(OptimizerKind::Adamw) || g.decoupled)
        at::_fused_adamw_(ps, grads, m, v, vmax, steps, g.lr, g.beta1, g.beta2, g.weight_decay, g.eps, g.amsgrad,
                          g.maximize);
    else
        at::_fused_adam_(ps, grads, m, v, vmax, steps, g.lr, g.beta1, g.beta2, g.weight_decay, g.eps, g.amsgrad,
                         g.maximize);
}

/// SGD(fused=True)._fused_sgd: momentum buffers made empty on the first step, one fused kernel.
void fused_sgd(const OptimizerGroup& g, std::map<int64_t, ParamState>& state, const std::vector<at::Tensor>& params) {
    std::vector<at::Tensor> ps, grads, bufs;
    std::vector<int64_t> idx;
    bool first = g.momentum != 0;
    for (const int64_t i : g.params) {
        const auto& p = params.at(size_t(i));
        if (!p.grad().defined()) continue;
        ps.push_back(p), grads.push_back(p.grad()), idx.push_back(i);
        first = first && !state[i].momentum_buffer.defined();
    }
    if (ps.empty()) return;
    if (g.momentum != 0)
        for (size_t k = 0; k < ps.size(); ++k) {
            auto& b = state[idx[k]].momentum_buffer;
            if (first) b = at::empty_like(grads[k]);
            bufs.push_back(b);
        }
    at::_fused_sgd_(ps, grads, bufs, g.weight_decay, g.momentum, g.lr, g.dampening, g.nesterov, g.maximize, first);
}

}  // namespace

void optimizer_step(OptimizerState& o, const std::vector<at::Tensor>& params) {
    at::NoGradGuard ng;
    for (const auto& g : o.groups) {
        if (g.fused) {
            if (o.kind == to_string(OptimizerKind::Sgd))
                fused_sgd(g, o.state, params);
            else
                fused_adam(o.kind, g, o.state, params);
            continue;
        }
        for (const int64_t i : g.params) {
            const auto& p = params.at(size_t(i));
            if (!p.grad().defined()) continue;  // PyTorch steps only parameters with gradients
            auto& st = o.state[i];
            if (o.kind == to_string(OptimizerKind::Sgd))
                sgd_update(g, st, p);
            else
                adam_update(g, st, p);
        }
    }
}

}  // namespace ampscope::detail::ckpt
