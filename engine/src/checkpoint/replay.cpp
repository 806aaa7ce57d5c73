// SPDX-License-Identifier: MIT
// Incident replay: the user's checkpoint and failing batch, stepped as an FP32 reference and as
// the AMP job was configured (autocast precision, FP32 regions, GradScaler state, optimizer
// state and hyper-parameters), naming the first stage that produced non-finite values. The
// training session's pieces do the work (its sides, loss, GradScaler port and diagnostic
// re-runs: observer and backward probe); checkpoint/ reads the state and steps torch.optim's
// arithmetic.
#include "ampscope/engine/replay.h"

#include <ATen/ATen.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/utils.h>

#include <cmath>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/hash.h"
#include "checkpoint/activations.h"
#include "checkpoint/checkpoint.h"
#include "precision/precision.h"
#include "probes/probes.h"
#include "run/pass.h"
#include "train/gradscaler.h"
#include "train/train_parts.h"

namespace ampscope {
namespace {

using train_parts::Side;
namespace ckpt = detail::ckpt;

Side make_side(const ReplaySpec& s, const at::Device& device) {
    return train_parts::load_side(s.model, s.seed, s.output, device);
}

ckpt::OptimizerState deep_copy(const ckpt::OptimizerState& o, const at::Device& device) {
    ckpt::OptimizerState c = o;
    auto copy = [&](at::Tensor& t) {
        if (t.defined()) t = t.to(device).clone();
    };
    for (auto& [i, st] : c.state) {
        copy(st.exp_avg);
        copy(st.exp_avg_sq);
        copy(st.max_exp_avg_sq);
        copy(st.momentum_buffer);
        if (st.step.defined()) st.step = st.step.clone();  // stays on the CPU, as PyTorch keeps it
    }
    return c;
}

std::string list(const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 20; ++i) s += (i ? ", " : "") + v[i];
    return v.size() > 20 ? s + ", ... (" + std::to_string(v.size()) + " in all)" : s;
}

std::string module_of(const std::string& name) {
    const auto dot = name.rfind('.');
    return dot == std::string::npos ? "" : name.substr(0, dot);
}

std::string sha256_of(const at::Tensor& t) {
    const auto c = t.detach().to(at::kCPU).contiguous();
    Sha256 h;
    h.update(c.data_ptr(), c.nbytes());
    return h.hex();
}

/// The checkpoint's weights into both sides; keys that do not match are listed (exit 2 unless
/// non-strict), and a checkpoint already holding NaN/Inf is the incident's first stage.
void load_weights(const ReplaySpec& s, const ckpt::Checkpoint& c, Side& ref, Side& amp, ReplayResult& r) {
    ckpt::Match m;
    for (auto* side : {&ref, &amp}) m = ckpt::apply_weights(c, side->model->named_state(), side->model->non_persistent_buffers());
    r.missing = m.missing;
    r.unexpected = m.unexpected;
    r.mismatched = m.mismatched;
    if (!m.clean()) {
        std::string what;
        if (!m.missing.empty()) what += "missing from the checkpoint: " + list(m.missing) + "; ";
        if (!m.unexpected.empty()) what += "not in the model: " + list(m.unexpected) + "; ";
        if (!m.mismatched.empty()) what += "mismatched: " + list(m.mismatched) + "; ";
        if (!s.non_strict)
            throw InputError(s.checkpoint, "keys",
                             "do not match the model's parameters and buffers (" + what +
                                 "Lightning checkpoints need --strip-prefix model.; --non-strict replays anyway)");
        r.warnings.push_back("checkpoint keys do not match the model (--non-strict): " + what);
    }
    for (const auto& [name, t] : ref.model->named_state())
        if (t.is_floating_point() && !t.isfinite().all().item<bool>()) {
            r.first_nonfinite = ReplayStage{0, "checkpoint", "both", module_of(name), "weights " + name, ""};
            break;
        }
}

/// The scaler as the job had it: the file's state (or defaults), remedies applied on top.
GradScaler make_scaler(const ReplaySpec& s, const ckpt::Checkpoint& c, const at::Device& device, ReplayResult& r) {
    std::optional<ScalerState> st = c.scaler;
    bool disabled = c.scaler_disabled;
    if (!s.scaler_state.empty()) {
        st = ckpt::read_scaler(ckpt::read_pt_root(s.scaler_state, &r.warnings), s.scaler_state, "");
        disabled = !st;
    }
    ScalerOptions o;
    o.enabled = !disabled;
    GradScaler scaler(device.str(), o);
    if (!disabled) {
        ScalerState v = st.value_or(scaler.state_dict());
        if (!st) r.warnings.push_back("no GradScaler state in the checkpoint: GradScaler's defaults (scale 65536) are used");
        if (s.init_scale) v.scale = *s.init_scale, v.growth_tracker = 0;
        if (s.growth_interval) v.growth_interval = *s.growth_interval;
        scaler.load_state_dict(v);
    }
    r.scaler_enabled = !disabled;
    return scaler;
}

struct Replay {
    const ReplaySpec& s;
    TrainSpec ts;  ///< what the session's loss and diagnostic re-runs read
    at::Device device;
    Side ref, amp;
    ckpt::OptimizerState opt_ref, opt_amp;
    GradScaler scaler;
    detail::ProbeSet data;
    std::vector<at::Tensor> inputs;
    ReplayResult& r;

    uint64_t seed_of(int step) const { return s.seed * 1000003 + uint64_t(step) * 131; }

    static bool grads_nonfinite(const Side& side) {
        for (const auto& p : side.params)
            if (p.grad().defined() && !p.grad().isfinite().all().item<bool>()) return true;
        return false;
    }

    std::string loss_op() const {
        if (ts.loss == "ce" || ts.loss == "lm") return "aten::cross_entropy_loss";
        return ts.loss == "mse" ? "aten::mse_loss" : "";
    }

    /// The job's loss of a forward's output; a failure is the batch's labels or targets not
    /// fitting the model's output (the FP32 reference of step 0 meets it first).
    at::Tensor loss_of(const at::Tensor& out) const {
        try {
            return train_parts::training_loss(ts, out, data, 0, inputs[0].size(0), device);
        } catch (const InputError&) {
            throw;
        } catch (const std::exception& e) {
            throw InputError(s.batch, ts.loss == "mse" ? "targets" : "labels",
                             "loss " + ts.loss + " cannot score the model's output " + c10::str(out.sizes()) +
                                 " on this batch: " + detail::first_line(e.what()));
        }
    }

    static void zero_grad(Side& side) {
        for (auto& p : side.params) p.mutable_grad().reset();  // optimizer.zero_grad(): set to None
    }

    void stage(int step, const std::string& stage, const std::string& side, const std::optional<Origin>& o, const std::string& op = "",
               const std::string& module = "") {
        if (r.first_nonfinite) return;
        r.first_nonfinite = ReplayStage{step, stage, side, o ? o->module : module, o ? o->op : op, o ? o->grad_fn : ""};
    }

    /// The FP32 reference step: forward, loss, backward, (clip), optimizer.
    double reference_step(int step) {
        zero_grad(ref);
        torch::manual_seed(seed_of(step));
        at::Tensor out = ref.model->forward(inputs);
        at::Tensor loss = loss_of(out);
        loss.backward();
        if (s.clip_grad_norm > 0) torch::nn::utils::clip_grad_norm_(ref.params, s.clip_grad_norm);
        ckpt::optimizer_step(opt_ref, ref.params);
        return loss.item<double>();
    }

    /// The AMP step as the job ran it, with the stage that went non-finite named before the
    /// optimizer changes any weight.
    void amp_step(int step, ReplayStep& rec) {
        zero_grad(amp);
        torch::manual_seed(seed_of(step));
        at::Tensor out, loss;
        {
            detail::PassScope scope(device.type(), s.keep_fp32, /*observing=*/false);
            detail::AutocastGuard guard(device.type(), s.precision);
            out = amp.model->forward(inputs);
            loss = loss_of(out);
        }
        const bool out_bad = !out.isfinite().all().item<bool>();
        const bool loss_bad = !loss.isfinite().all().item<bool>();
        rec.loss_amp = loss.item<double>();
        rec.scale = scaler.get_scale();
        scaler.impl().scale_loss(loss).backward();
        const bool scaled_bad = grads_nonfinite(amp);
        scaler.impl().unscale(amp.params);
        const bool grads_bad = grads_nonfinite(amp);
        rec.found_inf = scaler.enabled() ? scaler.impl().last_found_inf() : grads_bad;
        if (s.clip_grad_norm > 0) torch::nn::utils::clip_grad_norm_(amp.params, s.clip_grad_norm);
        if (out_bad)
            stage(step, "forward", "amp", train_parts::amp_forward_origin(amp, inputs, seed_of(step), ts, device));
        else if (loss_bad)
            stage(step, "loss", "amp", std::nullopt, loss_op());
        else if (scaled_bad)
            stage(step, "backward", "amp", train_parts::amp_backward_origin(amp, inputs, seed_of(step), data, ts, device, scaler));
        else if (grads_bad)  // finite scaled gradients times 1/scale: GradScaler checked them before, it does not skip
            stage(step, "unscale", "amp", std::nullopt,
                  "GradScaler.unscale_: gradients x 1/scale (scale " + c10::str(rec.scale) + ", 1/scale in float32 " +
                      c10::str(float(1.0 / rec.scale)) + ")");
        rec.skipped = scaler.enabled() && rec.found_inf;
        if (!rec.skipped) ckpt::optimizer_step(opt_amp, amp.params);
        if (scaler.enabled()) scaler.impl().update();
        rec.scale_after = scaler.get_scale();
        rec.growth_tracker = scaler.enabled() ? scaler.growth_tracker() : -1;
    }

    /// Non-finite weights after a step whose gradients were finite: the update itself.
    void check_update(int step, const ReplayStep& rec) {
        for (auto* side : {&amp, &ref})
            for (size_t i = 0; i < side->params.size(); ++i)
                if (!side->params[i].isfinite().all().item<bool>()) {
                    stage(step, "optimizer", side == &amp ? "amp" : "reference", std::nullopt,
                          opt_amp.kind + " update of " + side->names[i], module_of(side->names[i]));
                    return;
                }
        (void)rec;
    }

    void run_step(int step) {
        ReplayStep rec;
        rec.step = step;
        std::vector<at::Tensor> before_r, before_a;
        for (const auto& p : ref.params) before_r.push_back(p.detach().clone());
        for (const auto& p : amp.params) before_a.push_back(p.detach().clone());
        try {  // the first forwards on the user's batch: a failure here is the batch not fitting the model
            rec.activations = ckpt::activation_departures(*ref.model, *amp.model, inputs, device, s.precision, s.keep_fp32, seed_of(step));
        } catch (const InputError&) {
            throw;
        } catch (const std::exception& e) {
            if (step > 0) throw;
            throw InputError(s.batch, "inputs",
                             "the model cannot run this batch (shape or dtype does not fit its inputs): " + detail::first_line(e.what()));
        }
        rec.loss_ref = reference_step(step);
        amp_step(step, rec);
        check_update(step, rec);
        at::NoGradGuard ng;
        for (size_t i = 0; i < amp.params.size(); ++i) {
            ReplayParam p;
            p.name = amp.names[i];
            const auto& ga = amp.params[i].grad();
            const auto& gr = ref.params[i].grad();
            if (ga.defined() && gr.defined()) {
                p.grad_finite = ga.isfinite().all().item<bool>();
                p.grad_rel = ((ga.to(at::kDouble) - gr.to(at::kDouble)).norm() / gr.to(at::kDouble).norm()).item<double>();
            }
            const auto da = amp.params[i].detach().to(at::kDouble) - before_a[i].to(at::kDouble);
            const auto dr = ref.params[i].detach().to(at::kDouble) - before_r[i].to(at::kDouble);
            p.update_finite = amp.params[i].isfinite().all().item<bool>();
            p.update_rel = ((da - dr).norm() / dr.norm()).item<double>();
            p.sha256_ref = sha256_of(ref.params[i]);
            p.sha256_amp = sha256_of(amp.params[i]);
            rec.params.push_back(std::move(p));
        }
        r.steps.push_back(std::move(rec));
    }
};

void validate(const ReplaySpec& s) {
    if (s.steps < 1) throw InputError("--steps", "", "expected an integer >= 1");
    if (s.precision == Precision::Fp32) throw InputError("--precision", "", "expected fp16 or bf16");
    if (s.init_scale && (!std::isfinite(*s.init_scale) || *s.init_scale <= 0))
        throw InputError("--init-scale", "", "expected a finite number > 0");
    if (s.growth_interval && *s.growth_interval < 1) throw InputError("--growth-interval", "", "expected an integer >= 1");
    if (!std::isfinite(s.clip_grad_norm) || s.clip_grad_norm < 0) throw InputError("--clip-grad-norm", "", "expected a finite number >= 0");
    if (!s.loss.empty() && s.loss != "ce" && s.loss != "mse" && s.loss != "lm" && s.loss != "model")
        throw InputError("--loss", "", "'" + s.loss + "'; expected ce, mse, lm or model");
}

/// Tied weights (GPT-2's lm_head.weight is transformer.wte.weight): one parameter in the job's
/// optimizer. A .pt2 program's tied parameters are read as one tensor (export_program.cpp); a
/// model whose state still lists two (equal after loading the checkpoint, which holds both keys)
/// is named, not guessed around: the optimizer's indices would be off from the second on.
void check_tied(const ckpt::OptimizerState& o, const Side& side, const std::string& file) {
    size_t held = 0;
    for (const auto& g : o.groups) held += g.params.size();
    if (held >= side.params.size()) return;
    std::vector<std::string> tied;
    for (size_t i = 0; i < side.params.size(); ++i)
        for (size_t j = 0; j < i; ++j)
            if (side.params[i].sizes() == side.params[j].sizes() && side.params[i].dtype() == side.params[j].dtype() &&
                at::equal(side.params[i], side.params[j])) {
                tied.push_back(side.names[i] + " = " + side.names[j]);
                break;
            }
    if (!tied.empty())
        throw InputError(file, "param_groups",
                         "hold " + std::to_string(held) + " parameters; the model has " + std::to_string(side.params.size()) +
                             ", of which these look tied (equal after loading the checkpoint): " + list(tied) +
                             ". Tied weights are one parameter in the job's optimizer and two in the exported program: not "
                             "replayed yet");
}

std::string files_sha256(const std::vector<std::string>& files) {
    Sha256 h;
    for (const auto& f : files) h.update(sha256_file(f));
    return h.hex();
}

}  // namespace

ReplayResult run_replay(const ReplaySpec& spec, ProgressObserver* progress) {
    validate(spec);
    ReplayResult r;
    r.run_id = make_uuid();
    r.started_at = now_iso8601();
    r.spec = spec;
    const auto backend = backend_report(spec.device);
    r.device = backend.device;
    r.backend = backend.kind;
    const at::Device device(r.device);
    const auto c = ckpt::load_checkpoint(spec.checkpoint, spec.strip_prefix);
    r.checkpoint_format = c.format;
    r.checkpoint_sha256 = files_sha256(c.files);
    r.batch_sha256 = sha256_file(spec.batch);
    r.warnings.insert(r.warnings.end(), c.warnings.begin(), c.warnings.end());
    Side ref = make_side(spec, device), amp = make_side(spec, device);
    load_weights(spec, c, ref, amp, r);
    std::optional<ckpt::OptimizerState> opt = c.optimizer;
    std::string opt_file = c.files.empty() ? spec.checkpoint : c.files.back();
    if (!spec.optimizer_state.empty())
        opt = ckpt::read_optimizer(ckpt::read_pt_root(spec.optimizer_state, &r.warnings), opt_file = spec.optimizer_state, "");
    if (!opt) throw InputError(spec.checkpoint, "optimizer", "no optimizer state in the checkpoint; give it with --optimizer-state FILE");
    check_tied(*opt, ref, opt_file);
    ckpt::check_optimizer(*opt, ref.params, ref.names, opt_file);
    r.optimizer = opt->kind;
    r.warnings.insert(r.warnings.end(), opt->notes.begin(), opt->notes.end());
    GradScaler scaler = make_scaler(spec, c, device, r);
    TrainSpec ts;
    ts.model = spec.model;
    ts.data = spec.batch;
    ts.loss = spec.loss;
    ts.precision = spec.precision;
    ts.keep_fp32 = spec.keep_fp32;
    ts.seed = spec.seed;
    auto data = detail::load_training_data(spec.batch, *ref.model, spec.seed, ts.loss != "model");
    train_parts::choose_loss(ts, data);
    detail::check_fp32_regions(*amp.model, spec.keep_fp32);
    std::vector<at::Tensor> inputs;
    for (const auto& t : data.inputs) inputs.push_back(t.to(device));
    Replay rp{spec,
              ts,
              device,
              std::move(ref),
              std::move(amp),
              deep_copy(*opt, device),
              deep_copy(*opt, device),
              std::move(scaler),
              std::move(data),
              inputs,
              r};
    for (const auto& t : inputs)
        if (t.is_floating_point() && !t.isfinite().all().item<bool>()) rp.stage(0, "input", "both", std::nullopt, "the batch's inputs");
    detail::PassScope pass_scope(device.type(), {}, /*observing=*/false);
    try {
        for (int step = 0; step < spec.steps; ++step) {
            if (progress) {
                if (progress->cancel_requested()) throw Cancelled();
                progress->progress("replay", step, spec.steps);
            }
            rp.run_step(step);
        }
    } catch (const InputError&) {
        throw;
    } catch (const Cancelled&) {
        throw;
    } catch (const std::exception& e) {
        throw ModelError(std::string("replay failed: ") + e.what());
    }
    r.finished_at = now_iso8601();
    return r;
}

}  // namespace ampscope
