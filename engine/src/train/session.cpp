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
#include "ampscope/engine/vocabulary.h"
#include "precision/fp8_pass.h"
#include "precision/gradscaler.h"
#include "inspect/gpu/device_notes.h"
#include "inspect/backward_probe.h"
#include "inspect/observer.h"
#include "precision/precision.h"
#include "run/pass.h"
#include "train/train_parts.h"

namespace ampscope {

// ---- GradScaler -----------------------------------------------------------------------------

GradScaler::GradScaler(const std::string& device, ScalerOptions o) : d_(std::make_unique<Impl>()) {
    d_->device = at::Device(device);
    d_->o = o;
}
GradScaler::~GradScaler() = default;
GradScaler::GradScaler(GradScaler&&) noexcept = default;
GradScaler& GradScaler::operator=(GradScaler&&) noexcept = default;
bool GradScaler::enabled() const {
    return d_->o.enabled;
}
double GradScaler::get_scale() const {
    if (!d_->o.enabled) return 1.0;
    return d_->scale.defined() ? d_->scale.item<double>() : d_->o.init_scale;
}
int GradScaler::growth_tracker() const {
    return d_->tracker.defined() ? d_->tracker.item<int>() : d_->init_tracker;
}
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
using train_parts::divergence;
using train_parts::divergence_terms;
using train_parts::load_checkpoint;
using train_parts::policy_string;
using train_parts::reference_broken;
using train_parts::save_checkpoint;
using train_parts::Side;

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainSpec& s, const std::vector<at::Tensor>& params) {
    switch (s.optimizer) {
        case OptimizerKind::Sgd:
            return std::make_unique<torch::optim::SGD>(
                params, torch::optim::SGDOptions(s.lr).momentum(s.momentum).weight_decay(s.weight_decay));
        case OptimizerKind::Adam:
            return std::make_unique<torch::optim::Adam>(params,
                                                        torch::optim::AdamOptions(s.lr).weight_decay(s.weight_decay));
        case OptimizerKind::Adamw:
            return std::make_unique<torch::optim::AdamW>(params,
                                                         torch::optim::AdamWOptions(s.lr).weight_decay(s.weight_decay));
    }
    throw InputError("", "optimizer", "'" + to_string(s.optimizer) + "'");  // unreachable: every kind above
}

void set_lr(torch::optim::Optimizer& opt, double lr) {
    for (auto& g : opt.param_groups()) g.options().set_lr(lr);
}

double schedule(const TrainSpec& s, int progress) {
    if (s.lr_schedule == LrSchedule::Cosine)
        return s.lr * 0.5 * (1.0 + std::cos(M_PI * std::min(progress, s.steps) / double(std::max(1, s.steps))));
    return s.lr;
}

Side make_side(const TrainSpec& s, const at::Device& device) {
    Side side = train_parts::load_side(s.model, s.seed, s.output, device);
    if (side.params.empty())  // as torch.optim does: nothing would train
        throw InputError(s.model, "parameters",
                         "no trainable parameter: the model has none, or every one has requires_grad=False "
                         "(PyTorch's optimizer refuses it: "
                         "'optimizer got an empty parameter list'); unfreeze the parameters to train");
    side.opt = make_optimizer(s, side.params);
    return side;
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
/// runs outside it). Returns {output, loss / accumulate}; the FP8 recipe's GEMMs counted into `counts`.
std::pair<at::Tensor, at::Tensor> amp_forward_loss(Side& amp, const std::vector<at::Tensor>& in,
                                                   const detail::ProbeSet& data, int64_t b, int64_t e,
                                                   const TrainSpec& s, const at::Device& device,
                                                   detail::Fp8GemmCounts* counts = nullptr) {
    detail::Fp8GemmCounter counter(counts);
    detail::AutocastGuard guard(device.type(), s.autocast ? detail::autocast_precision(s.precision) : Precision::Fp32);
    detail::Fp8PassGuard fp8(s.autocast ? s.precision : Precision::Fp32,
                             detail::Fp8PassGuard::Training{s.mx_scaling, s.fp8_all_gemms, s.rowwise_gw_hp});
    auto out = amp.model->forward(in);
    auto loss = train_parts::training_loss(s, out, data, b, e, device) / double(s.accumulate);
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
    detail::DelayedTrainingScope::Quiet quiet;  // fp8-delayed: the step's scales, its amaxes recorded once
    for (size_t k = 0; k < micro.size(); ++k) {
        const auto& mb = micro[k];
        detail::DelayedTraining::Rewind rewind(detail::delayed_training(), k);  // the scales it cast with
        train_parts::reseed(mb.seed);
        detail::PassScope scope(device.type(), s.keep_fp32, /*observing=*/true, s.keep_bf16);
        detail::OpObserver obs(mb.inputs[0].size(0));
        obs.begin_batch(0, mb.inputs[0].size(0));
        {
            detail::AutocastGuard guard(device.type(),
                                        s.autocast ? detail::autocast_precision(s.precision) : Precision::Fp32);
            detail::Fp8PassGuard fp8(s.autocast ? s.precision : Precision::Fp32,
                                     detail::Fp8PassGuard::Training{s.mx_scaling, s.fp8_all_gemms, s.rowwise_gw_hp});
            amp.model->forward(mb.inputs);
        }
        obs.end_batch();
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
    detail::DelayedTrainingScope::Quiet quiet;
    for (size_t k = 0; k < micro.size(); ++k) {
        const auto& mb = micro[k];
        detail::DelayedTraining::Rewind rewind(detail::delayed_training(), k);
        detail::BackwardProbe probe;
        probe.forward_phase();
        train_parts::reseed(mb.seed);
        at::Tensor l_a;
        {  // observing: module scopes for TorchScript models (the instrumented graph)
            detail::PassScope scope(device.type(), s.keep_fp32, /*observing=*/true, s.keep_bf16);
            l_a = amp_forward_loss(amp, mb.inputs, data, mb.b, mb.e, s, device).second;
        }
        auto scaled = scaler.impl().scale_loss(l_a);
        probe.backward_phase();
        torch::autograd::grad({scaled}, amp.params, {}, /*retain_graph=*/false, /*create_graph=*/false,
                              /*allow_unused=*/true);
        probe.stop();
        if (auto o = probe.origin()) return o;
    }
    return std::nullopt;
}

/// One training run's step loop. A step's figures (scale, losses, gradient norm, underflow,
/// non-finite flags, weight divergence) stay on the device. With guards on they are read
/// once per step, before the optimizer step (where the diagnostic re-runs need them), and the
/// previous step's divergence rides along in the same read; with guards off nothing is read
/// per step but GradScaler's own found_inf (as PyTorch's step does): the figures of all steps
/// are read once, after the last one, and the steps are recorded then.
struct Session {
    const TrainSpec& s;
    const detail::ProbeSet& data;
    const at::Device& device;
    Side& ref;
    Side& amp;
    GradScaler& scaler;
    TrainResult& res;
    TrainSink* sink;
    detail::DelayedTraining* delayed;  ///< fp8-delayed: the FP8 tensors' delayed scaling; else nullptr
    ProgressObserver* progress;        ///< asked between micro-batches whether to stop
    int effective = 0;
    int64_t cursor = 0;
    bool reference_invalid = false;

    enum Fig {
        kScale,
        kLossRef,
        kLossAmp,
        kGradSq,
        kUnderflow,
        kOutBad,
        kLossBad,
        kFound,
        kPrevNum,
        kPrevDen,
        kPrevTracker,
        kFigs
    };
    struct Pending {
        TrainStep rec;
        at::Tensor figures;           ///< [kFigs] doubles on the device, until read (guards off)
        at::Tensor div_num, div_den;  ///< after this step's update, until read
        at::Tensor tracker;           ///< GradScaler's growth tracker after the update (double)
        bool found_known = false;     ///< found_inf already known on the host
    };
    std::vector<Pending> pending;

    at::TensorOptions dopt() const { return at::TensorOptions().dtype(at::kDouble).device(device); }

    /// Forward and backward of every micro-batch on both sides; fills figures on the device.
    std::vector<MicroBatch> forward_backward(int step, bool first, at::Tensor* f) {
        const int64_t n = data.inputs[0].size(0);
        std::vector<MicroBatch> micro_batches;
        for (int micro = 0; micro < s.accumulate; ++micro) {
            if (micro > 0 && progress && progress->cancel_requested()) throw Cancelled();  // a long accumulation
            const int64_t b = cursor, e = std::min(n, cursor + s.batch_size);
            cursor = e >= n ? 0 : e;
            std::vector<at::Tensor> in;
            for (const auto& t : data.inputs)
                in.push_back((t.dim() == 0 ? t : t.slice(0, b, e)).to(device));  // 0-d: per batch
            const uint64_t seed = s.seed * 1000003 + uint64_t(step) * 131 + uint64_t(micro);
            micro_batches.push_back({in, b, e, seed});
            train_parts::reseed(seed);  // reference: FP32
            auto out_r = ref.model->forward(in);
            if (first && micro == 0)  // the model's width is known only now
                detail::check_outputs_fit(data, s.data,
                                          int(out_r.dim() ? out_r.numel() / std::max<int64_t>(1, out_r.size(0)) : 0));
            auto l_r = train_parts::training_loss(s, out_r, data, b, e, device) / double(s.accumulate);
            l_r.backward();
            f[kLossRef] += l_r.detach().to(at::kDouble);
            train_parts::reseed(seed);  // AMP: autocast around forward and loss, backward outside
            if (delayed) delayed->begin_micro_batch(s.guards);  // scales kept for the diagnostic re-runs
            at::Tensor l_a;
            {
                detail::PassScope scope(device.type(), s.keep_fp32, /*observing=*/false, s.keep_bf16);
                scope.context().module_names = delayed != nullptr;
                detail::Fp8GemmCounts counts;  // the first forward's: what the recipe left unquantized
                auto [out_a, loss] =
                    amp_forward_loss(amp, in, data, b, e, s, device, first && !micro ? &counts : nullptr);
                if (first && !micro && s.autocast)
                    detail::add_fp8_coverage_warnings(res.warnings, s.precision, counts, s.keep_bf16, s.fp8_all_gemms);
                l_a = loss;
                if (s.guards) {
                    const auto out_bad = out_a.isfinite().all().logical_not().to(at::kDouble);
                    f[kOutBad] = at::maximum(f[kOutBad], out_bad);
                    f[kLossBad] =
                        at::maximum(f[kLossBad], (1.0 - out_bad) * l_a.isfinite().all().logical_not().to(at::kDouble));
                }
            }
            auto scaled = scaler.impl().scale_loss(l_a);
            if (micro == 0 && scaler.enabled()) f[kScale] = scaler.impl().scale.detach().to(at::kDouble).clone();
            scaled.backward();
            if (delayed) delayed->end_micro_batch();  // TE's fp8_autocast exit: histories and scales move on
            f[kLossAmp] += l_a.detach().to(at::kDouble);
        }
        return micro_batches;
    }

    /// Unscale, clip, and the AMP side's gradient figures (on the device).
    void gradient_figures(at::Tensor* f) {
        scaler.impl().unscale(amp.params);
        for (const auto& p : amp.params)
            if (p.grad().defined()) f[kGradSq] += p.grad().to(at::kDouble).pow(2).sum();
        if (s.clip_grad_norm > 0) torch::nn::utils::clip_grad_norm_(amp.params, s.clip_grad_norm);
        if (s.guards) {
            at::NoGradGuard ng;
            for (size_t i = 0; i < amp.params.size() && i < ref.params.size(); ++i) {
                const auto& ga = amp.params[i].grad();
                const auto& gr = ref.params[i].grad();
                if (ga.defined() && gr.defined()) f[kUnderflow] += (ga.eq(0) & gr.ne(0)).sum().to(at::kDouble);
            }
        }
        f[kFound] = scaler.enabled() ? scaler.impl().found_inf.to(at::kDouble)
                                     : f[kGradSq].isfinite().logical_not().to(at::kDouble);
    }

    void run_step(int step, int start_step) {
        Pending p;
        TrainStep& rec = p.rec;
        rec.step = step;
        rec.lr = schedule(s, s.lr_per_iteration ? step : effective);
        set_lr(*ref.opt, rec.lr);
        set_lr(*amp.opt, rec.lr);
        ref.opt->zero_grad();
        amp.opt->zero_grad();
        std::vector<at::Tensor> f(kFigs);
        for (auto& t : f) t = at::zeros({}, dopt());
        f[kScale] = at::ones({}, dopt());
        const auto micro_batches = forward_backward(step, step == start_step, f.data());
        if (s.clip_grad_norm > 0) torch::nn::utils::clip_grad_norm_(ref.params, s.clip_grad_norm);
        ref.opt->step();
        gradient_figures(f.data());
        if (delayed) p.rec.fp8_saturated = delayed->saturated, p.rec.fp8_saturated_at = delayed->saturated_at;
        if (s.guards) {
            Pending* prev = pending.empty() ? nullptr : &pending.back();
            if (prev) f[kPrevNum] = prev->div_num, f[kPrevDen] = prev->div_den, f[kPrevTracker] = prev->tracker;
            const auto host = at::stack(f).to(at::kCPU);  // the step's one read
            const double* h = host.data_ptr<double>();
            if (prev) {
                emit(*prev, h[kPrevNum], h[kPrevDen], h[kPrevTracker]);
                pending.pop_back();
            }
            apply(p, h);
            diagnose(p, micro_batches);  // before the optimizer step changes any weight
            const bool stepped = scaler.impl().step_known(*amp.opt, h[kFound] != 0);
            p.rec.skipped = !stepped;
        } else {
            p.figures = at::stack(f);
            p.rec.skipped = !scaler.impl().step(*amp.opt, amp.params);
            p.found_known = scaler.enabled();
            p.rec.found_inf = p.rec.skipped;
        }
        scaler.impl().update();
        if (delayed) delayed->end_step();  // after the re-runs, which rewind to each micro-batch's scales
        if (!p.rec.skipped) ++effective;
        p.rec.effective_updates = effective;
        std::tie(p.div_num, p.div_den) = divergence_terms(amp, ref);
        p.tracker = scaler.enabled() ? scaler.impl().tracker.to(at::kDouble).clone() : at::full({}, -1.0, dopt());
        pending.push_back(std::move(p));
    }

    /// Host values of a step's figures into its record.
    void apply(Pending& p, const double* h) {
        TrainStep& rec = p.rec;
        rec.scale = h[kScale];
        rec.loss_ref = h[kLossRef];
        rec.loss_amp = h[kLossAmp];
        rec.grad_norm = std::sqrt(h[kGradSq]);
        rec.grad_underflow = int64_t(h[kUnderflow]);
        const bool grads_nonfinite = !std::isfinite(rec.grad_norm);
        rec.found_inf = h[kFound] != 0;
        if (h[kOutBad] != 0)
            rec.nonfinite_stage = "forward";
        else if (h[kLossBad] != 0)
            rec.nonfinite_stage = "loss";
        else if (rec.found_inf || grads_nonfinite)
            rec.nonfinite_stage = "gradient";
        if (rec.nonfinite_stage == "loss") {
            const LossKind loss = s.loss;
            rec.origin = Origin{
                "loss",
                "",
                loss == LossKind::Mse ? "aten::mse_loss" : loss == LossKind::Model ? "" : "aten::cross_entropy_loss",
                -1,
                {},
                {}};
        }
    }

    /// Where values went non-finite: re-runs before the step changes any weight (guards on).
    void diagnose(Pending& p, const std::vector<MicroBatch>& micro_batches) {
        TrainStep& rec = p.rec;
        for (size_t k = 0; k < micro_batches.size() && rec.nonfinite_stage == "forward" && !rec.origin; ++k)
            if ((rec.origin = train_parts::nonfinite_input_origin(micro_batches[k].inputs, micro_batches[k].b)))
                rec.nonfinite_stage = "input";  // the data's, not the first op's that carried it
        if (rec.nonfinite_stage == "forward")
            rec.origin = forward_origin(amp, micro_batches, s, device);
        else if (rec.nonfinite_stage == "gradient")
            rec.origin = backward_origin(amp, micro_batches, data, s, device, scaler);
        if (rec.nonfinite_stage == "gradient" && !rec.origin) {
            // No answer from the probe: the parameter nearest the output whose gradient is
            // non-finite (backward runs in reverse). Reads only on this rare path.
            for (size_t i = amp.params.size(); !rec.origin && i-- > 0;) {
                const auto& g = amp.params[i].grad();
                if (g.defined() && !g.isfinite().all().item<bool>()) {
                    const auto& nm = amp.names[i];
                    const auto dot = nm.rfind('.');
                    rec.origin = Origin{
                        "backward", dot == std::string::npos ? "" : nm.substr(0, dot), "grad of " + nm, -1, {}, {}};
                }
            }
        }
    }

    /// Completes a step with its divergence and records it.
    void emit(Pending& p, double num, double den, double tracker) {
        TrainStep& rec = p.rec;
        rec.divergence = divergence(num, den);
        rec.growth_tracker = int(tracker);
        if (!reference_invalid &&
            (!std::isfinite(rec.loss_ref) || (std::isnan(rec.divergence) && reference_broken(ref)))) {
            reference_invalid = true;
            res.warnings.push_back("invalid_reference: the FP32 reference is not finite from step " +
                                   std::to_string(rec.step) + " (loss " + c10::str(rec.loss_ref) +
                                   "); its divergence is reported as nan, not judged");
        }
        res.steps.push_back(rec);
        if (sink) sink->step_finished(rec);
    }

    /// After the last step: the one read of everything still on the device.
    void finish() {
        if (pending.empty()) return;
        std::vector<at::Tensor> all;
        for (const auto& p : pending) {
            if (p.figures.defined()) all.push_back(p.figures);
            all.push_back(at::stack({p.div_num, p.div_den, p.tracker}));
        }
        const auto host = at::cat(all).to(at::kCPU);
        const double* h = host.data_ptr<double>();
        for (auto& p : pending) {
            if (p.figures.defined()) {
                const bool skipped = p.rec.skipped, known = p.found_known;
                apply(p, h);
                if (known) p.rec.found_inf = skipped;
                h += kFigs;
            }
            emit(p, h[0], h[1], h[2]);
            h += 3;
        }
        pending.clear();
    }
};

/// Where a resumed run starts: the checkpoint's counters (none: step 0, cursor -1).
struct ResumePoint {
    int step = 0, effective = 0;
    int64_t cursor = -1;
};
ResumePoint resume_from(const TrainSpec& s, Side& ref, Side& amp, GradScaler& scaler, detail::DelayedTraining* delayed,
                        const at::Device& device, TrainResult& res) {
    ResumePoint at;
    if (s.resume.empty()) return at;
    auto r = load_checkpoint(s.resume, s, ref, amp, scaler, delayed, device);
    at = {r.step, r.effective, r.cursor};
    res.resumed_from = s.resume;
    res.policy_changed = r.policy_changed;
    if (r.policy_changed)
        res.warnings.push_back("resumed under a different precision policy (the checkpoint's " + r.policy +
                               ", this run's " + policy_string(s) +
                               "): an experiment change, not a plain continuation");
    if (!r.warning.empty()) res.warnings.push_back(r.warning);
    return at;
}

/// The run's totals once its steps ran.
void sum_up(TrainResult& res, const TrainSpec& s, const GradScaler& scaler, int effective_end) {
    res.iterations = int(res.steps.size());
    res.effective_updates = effective_end;
    for (const auto& st : res.steps) res.skipped += st.skipped;
    res.final_scale = scaler.get_scale();
    if (s.lr_per_iteration && res.skipped > 0)
        res.warnings.push_back("the LR schedule followed iterations while " + std::to_string(res.skipped) +
                               " steps were skipped: the schedule ran ahead of the weights");
    res.finished_at = now_iso8601();
}

/// The spec against the loaded model and data, before the first step: the batches this run forms
/// meet the program's symbolic ranges, no FP16 parameter under GradScaler, the kept modules exist.
void check_against_model(const TrainSpec& s, Side& ref, Side& amp, const detail::ProbeSet& data) {
    if (ref.model->fixed_batch == 0) ref.model->check_batches(data.inputs[0].size(0), s.batch_size, s.data);
    train_parts::check_scaled_params(amp, s.scaler.enabled, s.model);
    detail::check_fp32_regions(*amp.model, s.keep_fp32);
    detail::check_bf16_modules(*amp.model, s.keep_bf16, {s.precision});
    detail::check_kept_once(s.keep_fp32, s.keep_bf16);
}

}  // namespace

// ---- the session's pieces other engine parts reuse (replay) ---------------------------------

namespace train_parts {

std::optional<Origin> amp_forward_origin(Side& amp, const std::vector<at::Tensor>& inputs, uint64_t seed,
                                         const TrainSpec& s, const at::Device& device) {
    return forward_origin(amp, {MicroBatch{inputs, 0, inputs.at(0).size(0), seed}}, s, device);
}

std::optional<Origin> amp_backward_origin(Side& amp, const std::vector<at::Tensor>& inputs, uint64_t seed,
                                          const detail::ProbeSet& data, const TrainSpec& s, const at::Device& device,
                                          GradScaler& scaler) {
    return backward_origin(amp, {MicroBatch{inputs, 0, inputs.at(0).size(0), seed}}, data, s, device, scaler);
}

}  // namespace train_parts

TrainResult run_training(const TrainSpec& spec_in, TrainSink* sink, ProgressObserver* progress) {
    TrainSpec s = spec_in;
    TrainResult res;
    res.run_id = make_uuid();
    res.started_at = now_iso8601();
    train_parts::validate_spec(s);
    res.backend = backend_report(s.device);
    // The diagnostic re-runs observe ops (guards on): say when that copies outputs to the host.
    if (auto w = detail::host_statistics_warning(res.backend.kind, detail::device_statistics_platform(), s.guards);
        !w.empty())
        res.warnings.push_back(w);
    const at::Device device(res.backend.device);
    Side ref = make_side(s, device), amp = make_side(s, device);
    res.model = ref.model->info;
    res.model.mode = "train";
    res.warnings.insert(res.warnings.end(), ref.model->warnings.begin(), ref.model->warnings.end());
    auto data = detail::load_training_data(s.data, *ref.model, s.seed, s.loss != LossKind::Model);
    train_parts::choose_loss(s, data);
    check_against_model(s, ref, amp, data);
    GradScaler scaler(res.backend.device, s.scaler);
    auto delayed = train_parts::delayed_training_of(s, res);  // fp8-delayed: the histories across the steps
    detail::DelayedTrainingScope delayed_scope(delayed ? &*delayed : nullptr);
    const ResumePoint resumed = resume_from(s, ref, amp, scaler, delayed ? &*delayed : nullptr, device, res);
    const int start_step = resumed.step;
    const int64_t resumed_cursor = resumed.cursor;
    const int64_t n = data.inputs[0].size(0);
    if (resumed_cursor >= n)
        throw InputError(s.resume, "data.cursor",
                         std::to_string(resumed_cursor) + "; expected a sample index below the " + std::to_string(n) +
                             " samples of " + s.data + " (the data the checkpoint's run trained on)");
    res.spec = s;
    if (sink) sink->train_started(res);
    const std::string weights_hash = res.model.weights_sha256;
    detail::PassScope pass_scope(device.type(), {}, /*observing=*/false);
    Session ss{s, data, device, ref, amp, scaler, res, sink, delayed ? &*delayed : nullptr, progress, 0, 0, false, {}};
    ss.effective = resumed.effective;
    // Batches in file order, restarting after a short last batch: the cursor of a resumed
    // run is where the uninterrupted run would be (or what the checkpoint recorded).
    const int64_t per_epoch = (n + s.batch_size - 1) / s.batch_size;
    ss.cursor = resumed_cursor >= 0 ? resumed_cursor : (int64_t(start_step) * s.accumulate % per_epoch) * s.batch_size;
    try {
        for (int step = start_step; step < s.steps; ++step) {
            if (progress) {
                if (progress->cancel_requested()) throw Cancelled();
                progress->progress("train", step - start_step, s.steps - start_step);
            }
            ss.run_step(step, start_step);
            if (step == start_step && ss.delayed)
                train_parts::delayed_resume_warnings(*ss.delayed, res.policy_changed, res.warnings);
            if (s.checkpoint_every > 0 && (step + 1) % s.checkpoint_every == 0) {
                const auto path =
                    (std::filesystem::path(s.checkpoint_dir) /
                     ("ampscope-" + res.run_id.substr(0, 8) + "-step" + std::to_string(step + 1) + ".ckpt"))
                        .string();
                save_checkpoint(path, s, ref, amp, scaler, ss.delayed, {step + 1, ss.effective, ss.cursor},
                                weights_hash, device);
                res.checkpoints.push_back(path);
                if (sink) sink->checkpoint_written(path, step + 1);
            }
        }
        ss.finish();
    } catch (const Cancelled& e) {
        ss.finish();  // the steps that ran are recorded
        if (sink) sink->train_failed("cancelled", e.what());
        throw;
    } catch (const InputError& e) {
        if (sink) sink->train_failed("failed", e.what());
        throw;
    } catch (const std::exception& e) {
        if (sink) sink->train_failed("failed", e.what());
        throw ModelError(std::string("training failed: ") + e.what());
    }
    sum_up(res, s, scaler, ss.effective);
    if (progress) progress->progress("train", s.steps - start_step, s.steps - start_step);
    if (sink) sink->train_finished(res);
    return res;
}

}  // namespace ampscope
