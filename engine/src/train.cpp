// SPDX-License-Identifier: MIT
// GradScaler (a port of torch.amp.GradScaler) and the side-by-side training session.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/optim.h>
#include <torch/serialize.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/utils/clip_grad.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/train.h"
#include "gradscaler.h"
#include "internal.h"

namespace ampscope {

// ---- GradScaler -----------------------------------------------------------------------------

GradScaler::GradScaler(const std::string& device, ScalerOptions o) : d_(std::make_unique<Impl>()) {
    d_->device = at::Device(device);
    d_->o = o;
}
GradScaler::~GradScaler() = default;
GradScaler::GradScaler(GradScaler&&) noexcept = default;
GradScaler& GradScaler::operator=(GradScaler&&) noexcept = default;
bool GradScaler::enabled() const { return d_->o.enabled; }
double GradScaler::get_scale() const {
    if (!d_->o.enabled) return 1.0;
    return d_->scale.defined() ? d_->scale.item<double>() : d_->o.init_scale;
}
int GradScaler::growth_tracker() const { return d_->tracker.defined() ? d_->tracker.item<int>() : d_->init_tracker; }
ScalerState GradScaler::state_dict() const {
    return {get_scale(), d_->o.growth_factor, d_->o.backoff_factor, d_->o.growth_interval, growth_tracker()};
}
void GradScaler::load_state_dict(const ScalerState& s) {
    d_->o.init_scale = s.scale;
    d_->o.growth_factor = s.growth_factor;
    d_->o.backoff_factor = s.backoff_factor;
    d_->o.growth_interval = s.growth_interval;
    d_->init_tracker = s.growth_tracker;
    d_->scale = at::Tensor();
    d_->tracker = at::Tensor();
    d_->lazy_init();
}

// ---- the training session -------------------------------------------------------------------

namespace {

using detail::Model;

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainSpec& s, const std::vector<at::Tensor>& params) {
    if (s.optimizer == "sgd")
        return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(s.lr).momentum(s.momentum).weight_decay(s.weight_decay));
    if (s.optimizer == "adam")
        return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(s.lr).weight_decay(s.weight_decay));
    if (s.optimizer == "adamw")
        return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(s.lr).weight_decay(s.weight_decay));
    throw InputError("--optimizer", "", "'" + s.optimizer + "'; expected sgd, adam or adamw");
}

void set_lr(torch::optim::Optimizer& opt, double lr) {
    for (auto& g : opt.param_groups()) g.options().set_lr(lr);
}

double schedule(const TrainSpec& s, int progress) {
    if (s.lr_schedule == "cosine") return s.lr * 0.5 * (1.0 + std::cos(M_PI * std::min(progress, s.steps) / double(std::max(1, s.steps))));
    return s.lr;
}

struct Side {
    std::unique_ptr<Model> model;
    std::vector<at::Tensor> params;
    std::vector<std::string> names;
    std::unique_ptr<torch::optim::Optimizer> opt;
};

Side make_side(const TrainSpec& s, const at::Device& device) {
    Side side;
    side.model = detail::load_model(s.model, s.seed);
    side.model->to_device(device);
    side.model->set_train(true);
    for (auto& [name, t] : side.model->named_state()) {
        if (!t.requires_grad()) continue;
        side.names.push_back(name);
        side.params.push_back(t);
    }
    side.opt = make_optimizer(s, side.params);
    return side;
}

at::Tensor loss_of(const TrainSpec& s, const at::Tensor& out, const detail::ProbeSet& data, int64_t b, int64_t e,
                   const at::Device& device) {
    namespace F = torch::nn::functional;
    if (s.loss == "ce") {
        auto y = at::tensor(std::vector<int64_t>(data.labels.begin() + b, data.labels.begin() + e)).to(device);
        return F::cross_entropy(out, y);
    }
    const int w = data.target_width;
    auto t = at::tensor(std::vector<float>(data.targets.begin() + b * w, data.targets.begin() + e * w)).reshape({e - b, w}).to(device);
    return F::mse_loss(out.reshape({e - b, -1}), t);
}

double norm_of(const std::vector<at::Tensor>& params) {
    double sq = 0;
    for (const auto& p : params)
        if (p.grad().defined()) sq += p.grad().to(at::kDouble).pow(2).sum().item<double>();
    return std::sqrt(sq);
}

/// ||w_amp - w_ref|| / ||w_ref||: NaN when either side's weights are not finite (never 0 for
/// a broken reference), inf when the reference weights are all zero and the AMP ones are not.
double divergence(const Side& a, const Side& ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.params.size(); ++i) {
        num += (a.params[i].detach().to(at::kDouble) - ref.params[i].detach().to(at::kDouble)).pow(2).sum().item<double>();
        den += ref.params[i].detach().to(at::kDouble).pow(2).sum().item<double>();
    }
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

/// Every numeric option checked before anything runs (PyTorch's optimizers and GradScaler
/// assert the same ranges), and the checkpoint directory before the first step.
void validate_spec(const TrainSpec& s) {
    auto finite_at_least = [](double v, double lo, bool strict, const char* flag) {
        if (!std::isfinite(v) || (strict ? !(v > lo) : !(v >= lo)))
            throw InputError(flag, "", std::string("expected a finite number ") + (strict ? "> " : ">= ") + c10::str(lo) +
                                           ", got " + c10::str(v));
    };
    if (s.steps < 1) throw InputError("--steps", "", "expected an integer >= 1");
    if (s.batch_size < 1) throw InputError("--batch-size", "", "expected an integer >= 1");
    if (s.accumulate < 1) throw InputError("--accumulate", "", "expected an integer >= 1");
    if (s.precision == Precision::Fp32 && s.autocast) throw InputError("--precision", "", "expected fp16 or bf16");
    finite_at_least(s.lr, 0, true, "--lr");
    finite_at_least(s.momentum, 0, false, "--momentum");
    finite_at_least(s.weight_decay, 0, false, "--weight-decay");
    finite_at_least(s.clip_grad_norm, 0, false, "--clip-grad-norm");
    finite_at_least(s.scaler.init_scale, 0, true, "--init-scale");
    finite_at_least(s.scaler.growth_factor, 1, true, "--growth-factor");
    if (!std::isfinite(s.scaler.backoff_factor) || !(s.scaler.backoff_factor > 0 && s.scaler.backoff_factor < 1))
        throw InputError("--backoff-factor", "", "expected a number in (0, 1) (torch.amp.GradScaler asserts backoff_factor < 1), got " +
                                                     c10::str(s.scaler.backoff_factor));
    if (s.scaler.growth_interval < 1) throw InputError("--growth-interval", "", "expected an integer >= 1");
    if (s.checkpoint_every < 0) throw InputError("--checkpoint-every", "", "expected an integer >= 0 (0 = no checkpoints)");
    if (s.lr_schedule != "constant" && s.lr_schedule != "cosine")
        throw InputError("--lr-schedule", "", "'" + s.lr_schedule + "'; expected constant or cosine");
    if (s.checkpoint_every > 0) {
        std::error_code ec;
        if (!std::filesystem::is_directory(s.checkpoint_dir, ec))
            throw InputError(s.checkpoint_dir, "--checkpoint-dir", std::filesystem::exists(s.checkpoint_dir, ec)
                                                                      ? "is not a directory; expected a directory for checkpoints"
                                                                      : "does not exist; expected an existing directory for checkpoints");
        if (::access(s.checkpoint_dir.c_str(), W_OK) != 0)
            throw InputError(s.checkpoint_dir, "--checkpoint-dir", "is not writable; expected a directory checkpoints can be written to");
    }
}

std::string policy_string(const TrainSpec& s) {
    std::string k;
    for (const auto& g : s.keep_fp32) k += g + ",";
    return to_string(s.precision) + (s.autocast ? "+autocast" : "") + (s.scaler.enabled ? "+scaler" : "") + "|" + k;
}

void save_checkpoint(const std::string& path, const TrainSpec& s, Side& ref, Side& amp, GradScaler& scaler, int step,
                     int effective, const std::string& weights_hash) {
    torch::serialize::OutputArchive ar;
    ar.write("ampscope.format", c10::IValue(std::string("ampscope-checkpoint-1")));
    ar.write("model.source", c10::IValue(s.model));
    ar.write("model.weights_sha256_at_start", c10::IValue(weights_hash));
    ar.write("policy", c10::IValue(policy_string(s)));
    ar.write("step", c10::IValue(int64_t(step)));
    ar.write("effective_updates", c10::IValue(int64_t(effective)));
    for (size_t i = 0; i < ref.params.size(); ++i) {
        ar.write("ref." + ref.names[i], ref.params[i].detach());
        ar.write("amp." + amp.names[i], amp.params[i].detach());
    }
    torch::serialize::OutputArchive ro, ao;
    ref.opt->save(ro);
    amp.opt->save(ao);
    ar.write("ref_optimizer", ro);
    ar.write("amp_optimizer", ao);
    const auto st = scaler.state_dict();
    ar.write("scaler.scale", c10::IValue(st.scale));
    ar.write("scaler.growth_factor", c10::IValue(st.growth_factor));
    ar.write("scaler.backoff_factor", c10::IValue(st.backoff_factor));
    ar.write("scaler.growth_interval", c10::IValue(int64_t(st.growth_interval)));
    ar.write("scaler._growth_tracker", c10::IValue(int64_t(st.growth_tracker)));
    ar.write("rng.cpu", at::detail::getDefaultCPUGenerator().get_state());
    const std::string tmp = path + ".partial";
    ar.save_to(tmp);
    std::filesystem::rename(tmp, path);
}

struct Resumed {
    int step = 0, effective = 0;
    bool policy_changed = false;
};

Resumed load_checkpoint(const std::string& path, const TrainSpec& s, Side& ref, Side& amp, GradScaler& scaler) {
    torch::serialize::InputArchive ar;
    try {
        ar.load_from(path);
    } catch (const std::exception& e) {
        std::string w = e.what();
        throw InputError(path, "--resume", "not a readable ampscope checkpoint: " + w.substr(0, w.find('\n')));
    }
    auto read = [&](const std::string& key) {
        c10::IValue v;
        if (!ar.try_read(key, v)) throw InputError(path, key, "missing from the checkpoint; expected an ampscope checkpoint");
        return v;
    };
    if (read("ampscope.format").toStringRef() != "ampscope-checkpoint-1")
        throw InputError(path, "ampscope.format", "unknown checkpoint format");
    for (auto* side : {&ref, &amp}) {
        const std::string prefix = side == &ref ? "ref." : "amp.";
        for (size_t i = 0; i < side->params.size(); ++i) {
            at::Tensor t;
            if (!ar.try_read(prefix + side->names[i], t))
                throw InputError(path, prefix + side->names[i], "missing: the checkpoint is for another model than " + s.model);
            if (t.sizes() != side->params[i].sizes())
                throw InputError(path, prefix + side->names[i], "has shape " + c10::str(t.sizes()) + "; the model's is " +
                                                                    c10::str(side->params[i].sizes()) + " (another model?)");
            torch::NoGradGuard ng;
            side->params[i].copy_(t);
        }
    }
    torch::serialize::InputArchive ro, ao;
    ar.read("ref_optimizer", ro);
    ar.read("amp_optimizer", ao);
    ref.opt->load(ro);
    amp.opt->load(ao);
    ScalerState st;
    st.scale = read("scaler.scale").toDouble();
    st.growth_factor = read("scaler.growth_factor").toDouble();
    st.backoff_factor = read("scaler.backoff_factor").toDouble();
    st.growth_interval = int(read("scaler.growth_interval").toInt());
    st.growth_tracker = int(read("scaler._growth_tracker").toInt());
    if (scaler.enabled()) scaler.load_state_dict(st);
    at::Tensor rng;
    if (ar.try_read("rng.cpu", rng)) {
        auto gen = at::detail::getDefaultCPUGenerator();
        gen.set_state(rng);
    }
    Resumed r;
    r.step = int(read("step").toInt());
    r.effective = int(read("effective_updates").toInt());
    r.policy_changed = read("policy").toStringRef() != policy_string(s);
    return r;
}

/// Model state (parameters and buffers) kept aside during a diagnostic re-run, so that the
/// re-run (train mode: batch-norm statistics, ...) leaves no trace in the training.
struct StateSnapshot {
    std::vector<std::pair<at::Tensor, at::Tensor>> saved;
    explicit StateSnapshot(Model& m) {
        at::NoGradGuard ng;
        for (auto& [name, t] : m.named_state()) saved.emplace_back(t, t.clone());
    }
    ~StateSnapshot() {
        at::NoGradGuard ng;
        for (auto& [t, copy] : saved) t.copy_(copy);
    }
};

/// The AMP side's forward and loss inside the autocast region (PyTorch's recipe: the backward
/// runs outside it). Returns {output, loss / accumulate}.
std::pair<at::Tensor, at::Tensor> amp_forward_loss(Side& amp, const std::vector<at::Tensor>& in, const detail::ProbeSet& data,
                                                   int64_t b, int64_t e, const TrainSpec& s, const at::Device& device) {
    detail::AutocastGuard guard(device.type(), s.autocast ? s.precision : Precision::Fp32);
    auto out = amp.model->forward(in);
    auto loss = loss_of(s, out, data, b, e, device) / double(s.accumulate);
    return {out, loss};
}

struct MicroBatch {
    std::vector<at::Tensor> inputs;
    int64_t b, e;
    uint64_t seed;
};

/// Re-runs the step's AMP forward passes (same seeds, weights and FP32 regions; no grad) with
/// the observer, before the step changes any weight, and names where NaN/Inf is born.
std::optional<Origin> forward_origin(Side& amp, const std::vector<MicroBatch>& micro, const TrainSpec& s,
                                     const at::Device& device) {
    StateSnapshot snap(*amp.model);
    at::NoGradGuard ng;
    auto& ctx = detail::pass_context();
    for (const auto& mb : micro) {
        torch::manual_seed(mb.seed);
        ctx.keep_fp32 = s.keep_fp32;
        ctx.observing = true;
        detail::OpObserver obs(mb.inputs[0].size(0));
        obs.begin_batch(0, mb.inputs[0].size(0));
        {
            detail::AutocastGuard guard(device.type(), s.autocast ? s.precision : Precision::Fp32);
            amp.model->forward(mb.inputs);
        }
        obs.end_batch();
        ctx.observing = false;
        ctx.keep_fp32.clear();
        for (const auto& l : obs.layers())
            if (l.origin) return Origin{"forward", l.module, l.op, l.index, {}, {}};
    }
    return std::nullopt;
}

/// Re-runs the step's AMP micro-batches (same seeds, same weights, same loss scale) with the
/// backward probe, and names the first backward op that turns finite gradients non-finite.
/// Gradients are returned by autograd::grad, not accumulated: the step's own are untouched.
std::optional<Origin> backward_origin(Side& amp, const std::vector<MicroBatch>& micro, const detail::ProbeSet& data,
                                      const TrainSpec& s, const at::Device& device, GradScaler& scaler) {
    StateSnapshot snap(*amp.model);
    auto& ctx = detail::pass_context();
    for (const auto& mb : micro) {
        detail::BackwardProbe probe;
        probe.forward_phase();
        torch::manual_seed(mb.seed);
        ctx.keep_fp32 = s.keep_fp32;
        ctx.observing = true;  // module scopes for TorchScript models (the instrumented graph)
        const at::Tensor l_a = amp_forward_loss(amp, mb.inputs, data, mb.b, mb.e, s, device).second;
        ctx.keep_fp32.clear();
        ctx.observing = false;
        auto scaled = scaler.impl().scale_loss(l_a);
        probe.backward_phase();
        torch::autograd::grad({scaled}, amp.params, {}, /*retain_graph=*/false, /*create_graph=*/false, /*allow_unused=*/true);
        probe.stop();
        if (auto o = probe.origin()) return o;
    }
    return std::nullopt;
}

}  // namespace

TrainResult run_training(const TrainSpec& spec_in, TrainSink* sink, ProgressObserver* progress) {
    TrainSpec s = spec_in;
    TrainResult res;
    res.run_id = make_uuid();
    res.started_at = now_iso8601();
    validate_spec(s);
    res.backend = backend_report(s.device);
    const at::Device device(res.backend.device);
    Side ref = make_side(s, device), amp = make_side(s, device);
    res.model = ref.model->info;
    res.model.mode = "train";
    auto data = detail::load_training_data(s.data, *ref.model, s.seed);
    if (s.loss.empty()) s.loss = data.labels.empty() ? "mse" : "ce";
    if (s.loss != "ce" && s.loss != "mse") throw InputError("--loss", "", "'" + s.loss + "'; expected ce or mse");
    if (s.loss == "ce" && data.labels.empty()) throw InputError(s.data, "labels", "loss ce needs labels in the training data");
    if (s.loss == "mse" && data.targets.empty()) throw InputError(s.data, "targets", "loss mse needs targets in the training data");
    detail::check_fp32_regions(*amp.model, s.keep_fp32);
    GradScaler scaler(res.backend.device, s.scaler);
    int start_step = 0, effective = 0;
    if (!s.resume.empty()) {
        auto r = load_checkpoint(s.resume, s, ref, amp, scaler);
        start_step = r.step;
        effective = r.effective;
        res.resumed_from = s.resume;
        res.policy_changed = r.policy_changed;
        if (r.policy_changed)
            res.warnings.push_back("resumed under a different precision policy (" + policy_string(s) +
                                   "): an experiment change, not a plain continuation");
    }
    res.spec = s;
    if (sink) sink->train_started(res);
    const int64_t n = data.inputs[0].size(0);
    const std::string weights_hash = res.model.weights_sha256;
    auto& ctx = detail::pass_context();
    ctx.device_type = device.type();
    bool reference_invalid = false;
    try {
        int64_t cursor = int64_t(start_step) * s.accumulate * s.batch_size % n;
        for (int step = start_step; step < s.steps; ++step) {
            if (progress) {
                if (progress->cancel_requested()) throw Cancelled();
                progress->progress("train", step - start_step, s.steps - start_step);
            }
            TrainStep rec;
            rec.step = step;
            rec.scale = scaler.get_scale();
            const int progress_count = s.lr_per_iteration ? step : effective;
            rec.lr = schedule(s, progress_count);
            set_lr(*ref.opt, rec.lr);
            set_lr(*amp.opt, rec.lr);
            ref.opt->zero_grad();
            amp.opt->zero_grad();
            double loss_ref = 0, loss_amp = 0;
            bool out_nonfinite = false, loss_nonfinite = false;
            std::vector<MicroBatch> micro_batches;
            for (int micro = 0; micro < s.accumulate; ++micro) {
                const int64_t b = cursor, e = std::min(n, cursor + s.batch_size);
                cursor = e >= n ? 0 : e;
                std::vector<at::Tensor> in;
                for (const auto& t : data.inputs) in.push_back(t.slice(0, b, e).to(device));
                micro_batches.push_back({in, b, e, s.seed * 1000003 + uint64_t(step) * 131 + uint64_t(micro)});
                // reference: FP32
                torch::manual_seed(s.seed * 1000003 + uint64_t(step) * 131 + uint64_t(micro));
                ctx.keep_fp32.clear();
                auto out_r = ref.model->forward(in);
                if (step == start_step && micro == 0)  // the model's width is known only now
                    detail::check_outputs_fit(data, s.data, int(out_r.dim() ? out_r.numel() / std::max<int64_t>(1, out_r.size(0)) : 0));
                auto l_r = loss_of(s, out_r, data, b, e, device) / double(s.accumulate);
                l_r.backward();
                loss_ref += l_r.item<double>();
                // AMP: autocast region around forward and loss, backward outside (the recipe)
                torch::manual_seed(s.seed * 1000003 + uint64_t(step) * 131 + uint64_t(micro));
                ctx.keep_fp32 = s.keep_fp32;
                at::Tensor l_a;
                {
                    auto [out_a, loss] = amp_forward_loss(amp, in, data, b, e, s, device);
                    l_a = loss;
                    if (s.guards) {
                        if (!out_a.isfinite().all().item<bool>()) out_nonfinite = true;
                        else if (!l_a.isfinite().all().item<bool>()) loss_nonfinite = true;
                    }
                }
                ctx.keep_fp32.clear();
                scaler.impl().scale_loss(l_a).backward();
                loss_amp += l_a.item<double>();
            }
            rec.loss_ref = loss_ref;
            rec.loss_amp = loss_amp;
            // reference step
            if (s.clip_grad_norm > 0) torch::nn::utils::clip_grad_norm_(ref.params, s.clip_grad_norm);
            ref.opt->step();
            // AMP: unscale once (after accumulation), then clip, then step (skipped on inf)
            scaler.impl().unscale(amp.params);
            rec.grad_norm = norm_of(amp.params);
            if (s.clip_grad_norm > 0) torch::nn::utils::clip_grad_norm_(amp.params, s.clip_grad_norm);
            bool grads_nonfinite = !std::isfinite(rec.grad_norm);
            if (s.guards) {
                at::NoGradGuard ng;
                at::Tensor lost = at::zeros({}, at::TensorOptions().dtype(at::kLong).device(device));
                for (size_t i = 0; i < amp.params.size() && i < ref.params.size(); ++i) {
                    const auto& ga = amp.params[i].grad();
                    const auto& gr = ref.params[i].grad();
                    if (ga.defined() && gr.defined()) lost += (ga.eq(0) & gr.ne(0)).sum();
                }
                rec.grad_underflow = lost.item<int64_t>();  // one host read per step
            }
            // Where values went non-finite: re-runs before the step changes any weight.
            std::optional<Origin> rerun_origin;
            if (s.guards && out_nonfinite) rerun_origin = forward_origin(amp, micro_batches, s, device);
            else if (s.guards && !loss_nonfinite && (grads_nonfinite || (scaler.enabled() && scaler.impl().last_found_inf())))
                rerun_origin = backward_origin(amp, micro_batches, data, s, device, scaler);
            if (scaler.enabled()) {
                rec.found_inf = scaler.impl().last_found_inf();
                const bool stepped = scaler.impl().step(*amp.opt, amp.params);
                rec.skipped = !stepped;
                scaler.impl().update();
            } else {
                rec.found_inf = grads_nonfinite;
                amp.opt->step();  // without a scaler nothing skips: non-finite values go into the weights
            }
            if (!rec.skipped) ++effective;
            rec.effective_updates = effective;
            rec.divergence = divergence(amp, ref);
            if (!reference_invalid && (!std::isfinite(loss_ref) || (std::isnan(rec.divergence) && reference_broken(ref)))) {
                reference_invalid = true;
                res.warnings.push_back("invalid_reference: the FP32 reference is not finite from step " + std::to_string(step) +
                                       " (loss " + c10::str(loss_ref) + "); its divergence is reported as nan, not judged");
            }
            if (out_nonfinite) {
                rec.nonfinite_stage = "forward";
                rec.origin = rerun_origin;
            } else if (loss_nonfinite) {
                rec.nonfinite_stage = "loss";
                rec.origin = Origin{"loss", "", s.loss == "ce" ? "aten::cross_entropy_loss" : "aten::mse_loss", -1, {}, {}};
            } else if (rec.found_inf || grads_nonfinite) {
                rec.nonfinite_stage = "gradient";
                rec.origin = rerun_origin;
                // Without the probe's answer (guards off): the parameter nearest the output whose
                // gradient is non-finite (backward runs in reverse).
                for (size_t i = amp.params.size(); !rec.origin && i-- > 0;) {
                    const auto& g = amp.params[i].grad();
                    if (g.defined() && !g.isfinite().all().item<bool>()) {
                        const auto& nm = amp.names[i];
                        const auto dot = nm.rfind('.');
                        rec.origin = Origin{"backward", dot == std::string::npos ? "" : nm.substr(0, dot),
                                            "grad of " + nm, -1, {}, {}};
                        break;
                    }
                }
            }
            res.steps.push_back(rec);
            if (sink) sink->step_finished(rec);
            if (s.checkpoint_every > 0 && (step + 1) % s.checkpoint_every == 0) {
                const auto path = (std::filesystem::path(s.checkpoint_dir) /
                                   ("ampscope-" + res.run_id.substr(0, 8) + "-step" + std::to_string(step + 1) + ".ckpt")).string();
                save_checkpoint(path, s, ref, amp, scaler, step + 1, effective, weights_hash);
                res.checkpoints.push_back(path);
                if (sink) sink->checkpoint_written(path, step + 1);
            }
        }
    } catch (const Cancelled& e) {
        if (sink) sink->train_failed("cancelled", e.what());
        throw;
    } catch (const InputError& e) {
        if (sink) sink->train_failed("failed", e.what());
        throw;
    } catch (const std::exception& e) {
        if (sink) sink->train_failed("failed", e.what());
        throw ModelError(std::string("training failed: ") + e.what());
    }
    res.iterations = int(res.steps.size());
    res.effective_updates = effective;
    for (const auto& st : res.steps) res.skipped += st.skipped;
    res.final_scale = scaler.get_scale();
    if (s.lr_per_iteration && res.skipped > 0)
        res.warnings.push_back("the LR schedule followed iterations while " + std::to_string(res.skipped) +
                               " steps were skipped: the schedule ran ahead of the weights");
    res.finished_at = now_iso8601();
    if (progress) progress->progress("train", s.steps - start_step, s.steps - start_step);
    if (sink) sink->train_finished(res);
    return res;
}

}  // namespace ampscope
