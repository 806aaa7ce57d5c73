// SPDX-License-Identifier: MIT
// Replay's per-module activation departures: the step's forward re-run with the observer on
// both sides (no grad; the model state, batch-norm statistics included, restored after), the
// output statistics of each module's last op side by side.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/utils.h>

#include <map>

#include "replay/activations.h"
#include "inspect/observer.h"
#include "precision/fp8_pass.h"
#include "precision/precision.h"
#include "train/train_parts.h"

namespace ampscope::detail::ckpt {
namespace {

/// Each module's last observed op, in first-appearance order.
std::vector<LayerStat> last_per_module(Model& model, const std::vector<at::Tensor>& inputs, const at::Device& device,
                                       Precision p, const std::vector<std::string>& keep_fp32,
                                       const std::vector<std::string>& keep_bf16, Fp8PassGuard::Training fp8_training,
                                       uint64_t seed) {
    std::vector<std::pair<at::Tensor, at::Tensor>> saved;
    at::NoGradGuard ng;
    for (auto& [name, t] : model.named_state()) saved.emplace_back(t, t.clone());
    std::vector<LayerStat> layers;
    {
        train_parts::reseed(seed);
        PassScope scope(device.type(), keep_fp32, /*observing=*/true, keep_bf16);
        OpObserver obs(inputs.at(0).size(0));
        obs.begin_batch(0, inputs.at(0).size(0));
        {
            AutocastGuard guard(device.type(), autocast_precision(p));
            Fp8PassGuard fp8(p, fp8_training);  // the AMP step's GEMMs (no gradients here)
            model.forward(inputs);
        }
        obs.end_batch();
        layers = obs.layers();
    }
    for (auto& [t, copy] : saved) t.copy_(copy);
    std::vector<LayerStat> out;
    std::map<std::string, size_t> at;
    for (const auto& l : layers) {
        const auto it = at.find(l.module);
        if (it == at.end())
            at[l.module] = out.size(), out.push_back(l);
        else
            out[it->second] = l;
    }
    return out;
}

}  // namespace

std::vector<ReplayLayer> activation_departures(Model& ref, Model& amp, const std::vector<at::Tensor>& inputs,
                                               const at::Device& device, const ReplaySpec& s, uint64_t seed) {
    const auto r = last_per_module(ref, inputs, device, Precision::Fp32, {}, {}, {}, seed);
    const auto a = last_per_module(amp, inputs, device, s.precision, s.keep_fp32, s.keep_bf16,
                                   {s.mx_scaling, s.fp8_all_gemms, s.rowwise_gw_hp}, seed);
    std::map<std::string, const LayerStat*> by_module;
    for (const auto& l : r) by_module[l.module] = &l;
    std::vector<ReplayLayer> out;
    for (const auto& l : a) {
        const auto it = by_module.find(l.module);
        if (it == by_module.end() || l.module.empty()) continue;
        ReplayLayer x;
        x.module = l.module;
        x.op = l.op;
        x.ref_absmax = it->second->stats.absmax;
        x.ref_rms = it->second->stats.rms;
        x.amp_absmax = l.stats.absmax;
        x.amp_rms = l.stats.rms;
        x.amp_nonfinite = l.stats.nonfinite();
        x.amp_fp16_overflow = l.stats.fp16_overflow;
        out.push_back(std::move(x));
    }
    return out;
}

}  // namespace ampscope::detail::ckpt
