// SPDX-License-Identifier: MIT
#pragma once
// GradScaler's tensor state and operations (engine-internal; tests use it directly).

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <map>
#include <stdexcept>
#include <vector>

#include "ampscope/engine/train.h"

namespace ampscope {

struct GradScaler::Impl {
    enum class Stage { Ready, Unscaled, Stepped };
    at::Device device{at::kCPU};
    ScalerOptions o;
    at::Tensor scale, tracker, found_inf;
    Stage stage = Stage::Ready;
    int init_tracker = 0;

    void lazy_init() {
        if (scale.defined()) return;
        scale = at::full({}, o.init_scale, at::TensorOptions().dtype(at::kFloat).device(device));
        tracker = at::full({}, init_tracker, at::TensorOptions().dtype(at::kInt).device(device));
    }
    /// scaler.scale(loss)
    at::Tensor scale_loss(const at::Tensor& loss) {
        if (!o.enabled) return loss;
        lazy_init();
        return loss * scale.to(loss.device(), /*non_blocking=*/true);
    }
    /// scaler.unscale_(optimizer), over the optimizer's parameters
    void unscale(const std::vector<at::Tensor>& params) {
        if (!o.enabled) return;
        if (stage == Stage::Unscaled)
            throw std::runtime_error("unscale_() has already been called on this optimizer since the last update().");
        if (stage == Stage::Stepped) throw std::runtime_error("unscale_() is being called after step().");
        lazy_init();
        auto inv_scale = scale.to(at::kDouble).reciprocal().to(at::kFloat);
        found_inf = at::full({}, 0.0, at::TensorOptions().dtype(at::kFloat).device(device));
        std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
        for (const auto& p : params) {
            const auto& g = p.grad();
            if (!g.defined()) continue;
            if (g.scalar_type() == at::kHalf) throw std::invalid_argument("Attempting to unscale FP16 gradients.");
            by_dtype[g.scalar_type()].push_back(g);
        }
        for (auto& [dt, grads] : by_dtype) at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
        stage = Stage::Unscaled;
    }
    /// scaler.step(optimizer): skipped when any gradient was non-finite. Returns whether it stepped.
    bool step(torch::optim::Optimizer& opt, const std::vector<at::Tensor>& params) {
        if (!o.enabled) {
            opt.step();
            return true;
        }
        if (stage == Stage::Stepped)
            throw std::runtime_error("step() has already been called since the last update().");
        if (stage == Stage::Ready) unscale(params);
        return step_known(opt, found_inf.item<float>() != 0.0f);  // PyTorch's own host read
    }
    /// step() when the caller has already read found_inf (after unscale) with its other figures.
    bool step_known(torch::optim::Optimizer& opt, bool found) {
        if (!o.enabled) {
            opt.step();
            return true;
        }
        if (stage != Stage::Unscaled) throw std::runtime_error("step_known() needs unscale() first.");
        if (!found) opt.step();
        stage = Stage::Stepped;
        return !found;
    }
    bool last_found_inf() const { return found_inf.defined() && found_inf.item<float>() != 0.0f; }
    /// scaler.update()
    void update() {
        if (!o.enabled) return;
        if (!found_inf.defined()) throw std::runtime_error("No inf checks were recorded prior to update.");
        at::_amp_update_scale_(scale, tracker, found_inf, o.growth_factor, o.backoff_factor, o.growth_interval);
        stage = Stage::Ready;
        found_inf = at::Tensor();
    }
};

}  // namespace ampscope
