// SPDX-License-Identifier: MIT
// The pieces of a training side shared by the session (train/session.cpp) and the incident
// replay (replay/replay.cpp): loading a side, choosing and computing the session's losses.
#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>

#include <ATen/core/Generator.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/vocabulary.h"
#include "model/model.h"
#include "train/train_parts.h"

namespace ampscope::train_parts {
namespace {

/// Causal-LM loss (Hugging Face's): logits [n, T, V] at position t against the token label at
/// t + 1, labels of -100 ignored, the mean over the labels scored.
at::Tensor lm_loss(const at::Tensor& out, const detail::ProbeSet& data, int64_t b, int64_t e,
                   const at::Device& device) {
    namespace F = torch::nn::functional;
    const int64_t w = data.label_width;
    if (out.dim() != 3 || out.size(1) != w)
        throw InputError(data.info.source, "labels",
                         "loss lm: token labels [N, " + std::to_string(w) + "] need logits [N, " + std::to_string(w) +
                             ", V]; the model's output is " + c10::str(out.sizes()));
    auto y = at::tensor(std::vector<int64_t>(data.labels.begin() + b * w, data.labels.begin() + e * w))
                 .reshape({e - b, w})
                 .to(device);
    const auto logits = out.slice(1, 0, w - 1).reshape({-1, out.size(2)});
    return F::cross_entropy(logits, y.slice(1, 1).reshape({-1}), F::CrossEntropyFuncOptions().ignore_index(-100));
}

struct Registered {
    at::Tensor cpu;
    std::vector<at::Tensor> cuda;
};
std::mutex rng_mutex;
std::map<uint64_t, Registered> rng_states;

}  // namespace

void reseed(uint64_t seed) {
    std::lock_guard<std::mutex> lock(rng_mutex);
    const auto it = rng_states.find(seed);
    if (it == rng_states.end()) {
        torch::manual_seed(seed);
        return;
    }
    auto set = [](at::Generator g, const at::Tensor& state) {  // a handle: the copy is the default generator
        std::lock_guard<std::mutex> l(g.mutex());
        g.set_state(state);
    };
    set(at::globalContext().defaultGenerator(at::kCPU), it->second.cpu);
    for (size_t i = 0; i < it->second.cuda.size() && i < size_t(torch::cuda::device_count()); ++i)
        set(at::globalContext().defaultGenerator(at::Device(at::kCUDA, c10::DeviceIndex(i))), it->second.cuda[i]);
}

RngStates::~RngStates() {
    std::lock_guard<std::mutex> lock(rng_mutex);
    rng_states.clear();
}

void RngStates::set(uint64_t seed, const at::Tensor& cpu, const std::vector<at::Tensor>& cuda) {
    std::lock_guard<std::mutex> lock(rng_mutex);
    rng_states[seed] = Registered{cpu.clone(), cuda};
}

Side load_side(const std::string& model, uint64_t seed, const std::string& output, const at::Device& device) {
    Side side;
    side.model = detail::load_model(model, seed, output);
    side.model->to_device(device);
    side.model->set_train(true);
    std::set<const void*> seen;  // tied parameters once, by their first name (model.parameters())
    for (auto& [name, t] : side.model->named_state()) {
        if (!seen.insert(t.unsafeGetTensorImpl()).second) continue;
        if (!t.requires_grad()) {
            side.buffers.emplace_back(name, t);
            continue;
        }
        side.names.push_back(name);
        side.params.push_back(t);
    }
    return side;
}

void check_scaled_params(const Side& side, bool scaler_enabled, const std::string& file) {
    if (!scaler_enabled) return;
    std::vector<std::string> half;
    for (size_t i = 0; i < side.params.size(); ++i)
        if (side.params[i].scalar_type() == at::kHalf) half.push_back(side.names[i]);
    if (half.empty()) return;
    std::string some;
    for (size_t i = 0; i < half.size() && i < 3; ++i) some += (i ? ", " : "") + half[i];
    throw InputError(file, "parameters",
                     std::to_string(half.size()) + " of " + std::to_string(side.params.size()) +
                         " trainable parameters are torch.float16 (" + some + (half.size() > 3 ? ", ..." : "") +
                         "): GradScaler cannot unscale FP16 gradients (PyTorch raises 'Attempting to unscale FP16 "
                         "gradients.'); mixed precision keeps float32 weights: save the model in float32, or run "
                         "without GradScaler (--no-scaler)");
}

void choose_loss(TrainSpec& s, const detail::ProbeSet& data) {
    if (s.loss == LossKind::Auto)
        s.loss = data.labels.empty() ? LossKind::Mse : data.label_width > 0 ? LossKind::Lm : LossKind::Ce;
    const LossKind loss = s.loss;
    if (loss == LossKind::Lm && data.label_width == 0)
        throw InputError(s.data, "labels", "loss lm needs token labels [N, T] in the training data (-100 ignored)");
    if (loss == LossKind::Ce && data.label_width > 0)
        throw InputError(s.data, "labels", "token labels [N, T] are for loss lm; loss ce takes class labels [N]");
    if (loss == LossKind::Ce && data.labels.empty())
        throw InputError(s.data, "labels", "loss ce needs labels in the training data");
    if (loss == LossKind::Mse && data.targets.empty())
        throw InputError(s.data, "targets", "loss mse needs targets in the training data");
}

at::Tensor training_loss(const TrainSpec& s, const at::Tensor& out, const detail::ProbeSet& data, int64_t b, int64_t e,
                         const at::Device& device) {
    namespace F = torch::nn::functional;
    const LossKind loss = s.loss;
    if (loss == LossKind::Lm) return lm_loss(out, data, b, e, device);
    if (loss == LossKind::Model) {  // the program returns its own loss
        if (out.numel() != 1)
            throw InputError(s.model, "outputs",
                             "loss model: the output is " + c10::str(out.sizes()) +
                                 "; expected the loss, one value (the output option chooses which)");
        return out.reshape({});
    }
    if (loss == LossKind::Ce) {
        auto y = at::tensor(std::vector<int64_t>(data.labels.begin() + b, data.labels.begin() + e)).to(device);
        return F::cross_entropy(out, y);
    }
    const int w = data.target_width;
    auto t = at::tensor(std::vector<float>(data.targets.begin() + b * w, data.targets.begin() + e * w))
                 .reshape({e - b, w})
                 .to(device);
    return F::mse_loss(out.reshape({e - b, -1}), t);
}

/// ||w_amp - w_ref||^2 and ||w_ref||^2 on the device (read with the step's other figures).
std::pair<at::Tensor, at::Tensor> divergence_terms(const Side& a, const Side& ref) {
    const auto dopt = at::TensorOptions()
                          .dtype(at::kDouble)
                          .device(ref.params.empty() ? at::Device(at::kCPU) : ref.params[0].device());
    at::Tensor num = at::zeros({}, dopt), den = at::zeros({}, dopt);
    at::NoGradGuard ng;
    for (size_t i = 0; i < a.params.size(); ++i) {
        num += (a.params[i].detach().to(at::kDouble) - ref.params[i].detach().to(at::kDouble)).pow(2).sum();
        den += ref.params[i].detach().to(at::kDouble).pow(2).sum();
    }
    return {num, den};
}

/// ||w_amp - w_ref|| / ||w_ref||: NaN when either side's weights are not finite (never 0 for
/// a broken reference), inf when the reference weights are all zero and the AMP ones are not.
double divergence(double num, double den) {
    if (!std::isfinite(num) || !std::isfinite(den)) return std::nan("");
    if (den == 0) return num == 0 ? 0.0 : INFINITY;
    return std::sqrt(num / den);
}

/// Whether the FP32 reference side has non-finite weights (after its step).
bool reference_broken(const Side& ref) {
    for (const auto& p : ref.params)
        if (!p.detach().isfinite().all().item<bool>()) return true;
    return false;
}

std::optional<Origin> nonfinite_input_origin(const std::vector<at::Tensor>& inputs, int64_t first_row) {
    at::NoGradGuard ng;
    for (const auto& t : inputs) {
        if (!t.is_floating_point() || t.dim() == 0) continue;
        const auto finite = t.isfinite();
        if (finite.all().item<bool>()) continue;
        const auto bad = (~finite).reshape({t.size(0), -1}).any(1).nonzero().flatten().cpu();
        std::vector<std::string> rows;
        for (int64_t i = 0; i < bad.numel(); ++i)
            rows.push_back("row " + std::to_string(first_row + bad[i].item<int64_t>()));
        return Origin{"input", "", "the batch's inputs", -1, rows, {}};
    }
    return std::nullopt;
}

}  // namespace ampscope::train_parts
