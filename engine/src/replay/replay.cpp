// SPDX-License-Identifier: MIT
// Incident replay: the user's checkpoint and failing batch, stepped as an FP32 reference and as
// the AMP job was configured (autocast precision, FP32 regions, GradScaler state, optimizer
// state and hyper-parameters), naming the first stage that produced non-finite values. The
// training session's pieces do the work (its sides, loss, GradScaler port and diagnostic
// re-runs: observer and backward probe); the other files of replay/ read the state and steps torch.optim's
// arithmetic.
#include "ampscope/engine/replay.h"
#include "ampscope/engine/vocabulary.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <cmath>
#include <set>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/hash.h"
#include "replay/activations.h"
#include "replay/checkpoint.h"
#include "precision/precision.h"
#include "probes/probes.h"
#include "run/pass.h"
#include "precision/fp8_pass.h"
#include "precision/gradscaler.h"
#include "train/train_parts.h"

namespace ampscope {
namespace {

using train_parts::Side;
namespace ckpt = detail::ckpt;

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
    for (auto* side : {&ref, &amp})
        m = ckpt::apply_weights(c, side->model->named_state(), side->model->non_persistent_buffers());
    r.missing = m.missing;
    r.unexpected = m.unexpected;
    r.mismatched = m.mismatched;
    r.warnings.insert(r.warnings.end(), ref.model->warnings.begin(), ref.model->warnings.end());
    if (!m.clean()) {
        std::string what;
        if (!m.missing.empty()) what += "missing from the checkpoint: " + list(m.missing) + "; ";
        if (!m.unexpected.empty()) what += "not in the model: " + list(m.unexpected) + "; ";
        if (!m.mismatched.empty()) what += "mismatched: " + list(m.mismatched) + "; ";
        if (!s.non_strict)
            throw InputError(
                s.checkpoint, "keys",
                "do not match the model's parameters and buffers (" + what +
                    "Lightning checkpoints need the key prefix 'model.' stripped; a non-strict replay runs anyway)",
                {{"strip_prefix", "model."}, {"non_strict", ""}});
        r.warnings.push_back("checkpoint keys do not match the model (non-strict): " + what);
    }
    std::set<const void*> params;  // a buffer may hold -inf on purpose (a causal mask): only NaN is broken there
    for (const auto& p : ref.params) params.insert(p.unsafeGetTensorImpl());
    for (const auto& [name, t] : ref.model->named_state())
        if (t.is_floating_point() &&
            (params.count(t.unsafeGetTensorImpl()) ? !t.isfinite().all().item<bool>() : t.isnan().any().item<bool>())) {
            r.first_nonfinite =
                ReplayStage{0, ReplayStageKind::Checkpoint, ReplaySide::Both, module_of(name), "weights " + name, ""};
            break;
        }
}

/// The scaler as the job had it: the file's state (or defaults), remedies applied on top. A BF16
/// job has no GradScaler (Lightning's bf16-mixed stores none, a Trainer with bf16=True writes no
/// scaler.pt): without scaler state a BF16 replay runs without one, as does --no-scaler.
GradScaler make_scaler(const ReplaySpec& s, const ckpt::Checkpoint& c, const at::Device& device, ReplayResult& r) {
    std::optional<ScalerState> st = c.scaler;
    bool disabled = c.scaler_disabled;
    if (!s.scaler_state.empty()) {
        st = ckpt::read_scaler(ckpt::read_pt_root(s.scaler_state, &r.warnings), s.scaler_state, "");
        disabled = !st;
    }
    if (s.no_scaler) {
        disabled = true;
    } else if (!st && !disabled && s.precision != Precision::Fp16) {
        disabled = true;
        r.warnings.push_back(
            "no GradScaler state: a " +
            std::string(s.precision == Precision::Bf16 ? "BF16" : "float8 (" + to_string(s.precision) + ")") +
            " job runs without GradScaler, and so does the replay (a non-finite "
            "gradient is then applied: the job's weights turn NaN; give the scaler state file if the job had one)");
    }
    if (disabled && (s.init_scale || s.growth_interval))
        throw InputError("", s.init_scale ? "init_scale" : "growth_interval",
                         "the replay runs without GradScaler (" +
                             std::string(s.no_scaler ? "asked for: no scaler"
                                         : c.scaler_disabled || !s.scaler_state.empty()
                                             ? "the job's scaler was disabled"
                                             : "a BF16 or float8 job without scaler state") +
                             "): there is no scale to set");
    ScalerOptions o;
    o.enabled = !disabled;
    GradScaler scaler(device.str(), o);
    if (!disabled) {
        ScalerState v = st.value_or(scaler.state_dict());
        if (!st)
            r.warnings.push_back(
                (c.scaler_absent_note.empty() ? std::string("no GradScaler state in the checkpoint")
                                              : c.scaler_absent_note) +
                ": GradScaler's defaults (scale 65536) are used; say no GradScaler if the job ran without one");
        if (s.init_scale) {
            v.scale = *s.init_scale;
            v.growth_tracker = 0;
        }
        if (s.growth_interval) v.growth_interval = *s.growth_interval;
        scaler.load_state_dict(v);
    }
    r.scaler_enabled = !disabled;
    return scaler;
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
        throw InputError(
            file, "param_groups",
            "hold " + std::to_string(held) + " parameters; the model has " + std::to_string(side.params.size()) +
                ", of which these look tied (equal after loading the checkpoint): " + list(tied) +
                ". Tied weights are one parameter in the job's optimizer and two in the exported program: not "
                "replayed yet");
}

/// torch.nn.utils.clip_grad_norm_ as Python runs it on the CPU (foreach=None takes the foreach
/// path there): each gradient's norm by _foreach_norm, the total by linalg_vector_norm of their
/// stack, the gradients multiplied by clamp(max_norm / (total + 1e-6), max=1) with _foreach_mul_.
/// LibTorch's C++ clip_grad_norm_ (Tensor::norm per gradient, stack().norm(), Scalar / Tensor)
/// rounds differently: seen on a Lightning bundle, where its weights differed from Python's.
void clip_like_python(const std::vector<at::Tensor>& params, double max_norm) {
    at::NoGradGuard ng;
    std::vector<at::Tensor> grads;
    for (const auto& p : params)
        if (p.grad().defined()) grads.push_back(p.grad());
    if (grads.empty()) return;
    const auto norms = at::_foreach_norm(grads, 2);
    const auto total = at::linalg_vector_norm(at::stack(norms), 2);
    // Python's `max_norm / (total + 1e-6)` is Tensor.__rtruediv__: reciprocal, then multiply
    // (C++'s Scalar / Tensor divides, which rounds differently)
    const auto coef = at::clamp(at::reciprocal(total + 1e-6) * max_norm, std::nullopt, 1.0);
    at::_foreach_mul_(grads, coef);
}

bool has_dropout(detail::Model& m) {
    const auto types = m.module_types();
    if (types.empty()) return true;  // unknown: say it
    for (const auto& [path, type] : types)
        if (type.find("Dropout") != std::string::npos || type.find("dropout") != std::string::npos) return true;
    return false;
}

ReplayOptimizer describe(const ckpt::OptimizerState& o, const Side& side) {
    ReplayOptimizer d{o.kind, o.kind_source, o.mapping, {}};
    for (const auto& g : o.groups) {
        ReplayOptimizerGroup x;
        for (const int64_t i : g.params) x.params.push_back(side.names[size_t(i)]);
        x.lr = g.lr;
        x.weight_decay = g.weight_decay;
        x.eps = g.eps;
        x.beta1 = g.beta1;
        x.beta2 = g.beta2;
        x.momentum = g.momentum;
        x.dampening = g.dampening;
        x.amsgrad = g.amsgrad;
        x.maximize = g.maximize;
        x.nesterov = g.nesterov;
        x.fused = g.fused;
        x.foreach = g.foreach;
        x.capturable = g.capturable;
        x.implementation = g.fused ? "fused" : "single-tensor";
        d.groups.push_back(std::move(x));
    }
    return d;
}

/// The optimizer's kind told (--optimizer where the file cannot), its indices mapped to the
/// model's parameters, what it is recorded; a Trainer folder's clipping said when not given.
void prepare_optimizer(const ReplaySpec& spec, const ckpt::Checkpoint& c, ckpt::OptimizerState& o,
                       const std::string& file, Side& ref, ReplayResult& r) {
    ckpt::resolve_kind(o, spec.optimizer_kind, spec.optimizer_kind_from, file);
    bool named = !spec.param_groups.empty();
    for (const auto& g : o.groups) named = named || !g.param_names.empty();
    if (!named) check_tied(o, ref, file);
    ckpt::MapContext ctx;
    ctx.file = file;
    ctx.format = c.format;
    ctx.strip_prefix = spec.strip_prefix;
    ctx.groups_file = spec.param_groups;
    ctx.module_types = ref.model->module_types();
    std::map<const void*, int64_t> index;
    for (size_t i = 0; i < ref.params.size(); ++i) index[ref.params[i].unsafeGetTensorImpl()] = int64_t(i);
    for (const auto& [name, t] : ref.model->named_state())
        if (auto it = index.find(t.unsafeGetTensorImpl()); it != index.end()) ctx.aliases.emplace(name, it->second);
    ckpt::map_optimizer(o, ref.params, ref.names, ctx, r.warnings);
    r.optimizer = o.kind;
    r.optimizer_groups = describe(o, ref);
    r.warnings.insert(r.warnings.end(), o.notes.begin(), o.notes.end());
    if (c.format == "hf-trainer" && !spec.clip_given)
        r.warnings.push_back(
            "the Trainer clips gradients to max_grad_norm (default 1.0) before each step, and the checkpoint does "
            "not say to what: replayed without clipping; give the clip gradient norm as the job's max_grad_norm (0: "
            "the job did not clip)");
}

std::vector<at::Tensor> cuda_states() {
    std::vector<at::Tensor> v;
    for (int i = 0; i < int(torch::cuda::device_count()); ++i)
        v.push_back(at::globalContext().defaultGenerator(at::Device(at::kCUDA, c10::DeviceIndex(i))).get_state());
    return v;
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
    train_parts::RngStates* rng = nullptr;           ///< the job's generator states, step by step (restored RNG)
    at::Tensor ref_out{};                            ///< the reference forward's output of the current step
    std::vector<at::Tensor> clip_ref{}, clip_amp{};  ///< what the job's clipping iterates, in its order

    uint64_t seed_of(int step) const { return s.seed * 1000003 + uint64_t(step) * 131; }

    static bool grads_nonfinite(const Side& side) {
        for (const auto& p : side.params)
            if (p.grad().defined() && !p.grad().isfinite().all().item<bool>()) return true;
        return false;
    }

    std::string loss_op() const {
        const LossKind loss = ts.loss;
        if (loss == LossKind::Ce || loss == LossKind::Lm) return "aten::cross_entropy_loss";
        return loss == LossKind::Mse ? "aten::mse_loss" : "";
    }

    /// The job's loss of a forward's output; a failure is the batch's labels or targets not
    /// fitting the model's output (the FP32 reference of step 0 meets it first).
    at::Tensor loss_of(const at::Tensor& out) const {
        try {
            return train_parts::training_loss(ts, out, data, 0, inputs[0].size(0), device);
        } catch (const InputError&) {
            throw;
        } catch (const std::exception& e) {
            throw InputError(s.batch, ts.loss == LossKind::Mse ? "targets" : "labels",
                             "loss " + to_string(ts.loss) + " cannot score the model's output " +
                                 c10::str(out.sizes()) + " on this batch: " + detail::first_line(e.what()));
        }
    }

    static void zero_grad(Side& side) {
        for (auto& p : side.params) p.mutable_grad().reset();  // optimizer.zero_grad(): set to None
    }

    void stage(int step, ReplayStageKind stage, ReplaySide side, const std::optional<Origin>& o,
               const std::string& op = "", const std::string& module = "") {
        if (r.first_nonfinite) return;
        r.first_nonfinite = ReplayStage{step, stage, side, o ? o->module : module, o ? o->op : op, o ? o->grad_fn : ""};
    }

    /// The FP32 reference step: forward, loss, backward, (clip), optimizer.
    double reference_step(int step) {
        zero_grad(ref);
        train_parts::reseed(seed_of(step));
        at::Tensor out = ref.model->forward(inputs);
        ref_out = out.detach();
        at::Tensor loss = loss_of(out);
        loss.backward();
        if (s.clip_grad_norm > 0) clip_like_python(clip_ref, s.clip_grad_norm);
        ckpt::optimizer_step(opt_ref, ref.params);
        return loss.item<double>();
    }

    /// The AMP step as the job ran it, with the stage that went non-finite named before the
    /// optimizer changes any weight.
    void amp_step(int step, ReplayStep& rec) {
        zero_grad(amp);
        train_parts::reseed(seed_of(step));
        at::Tensor out, loss;
        detail::Fp8GemmCounts counts;  // the first step's: what the recipe left unquantized, as `train` says
        {
            detail::Fp8GemmCounter counter(step == 0 ? &counts : nullptr);
            detail::PassScope scope(device.type(), s.keep_fp32, /*observing=*/false, s.keep_bf16);
            detail::AutocastGuard guard(device.type(), detail::autocast_precision(s.precision));
            detail::Fp8PassGuard fp8(s.precision,
                                     detail::Fp8PassGuard::Training{s.mx_scaling, s.fp8_all_gemms, s.rowwise_gw_hp});
            out = amp.model->forward(inputs);
            loss = loss_of(out);
        }
        if (step == 0) detail::add_fp8_coverage_warnings(r.warnings, s.precision, counts, s.keep_bf16, s.fp8_all_gemms);
        // A -inf (or inf) the reference has at the same place is a mask (a causal mask, masked
        // vocabulary entries), not an incident; NaN never equals itself, so NaN always counts.
        const bool out_bad = ref_out.defined() && ref_out.sizes() == out.sizes()
                                 ? ((~out.isfinite()) & out.ne(ref_out.to(out.scalar_type()))).any().item<bool>()
                                 : !out.isfinite().all().item<bool>();
        const bool loss_bad = !loss.isfinite().all().item<bool>();
        rec.loss_amp = loss.item<double>();
        rec.scale = scaler.get_scale();
        scaler.impl().scale_loss(loss).backward();
        if (rng)  // the job's next step starts where this step's draws left its generators
            rng->set(seed_of(step + 1), at::globalContext().defaultGenerator(at::kCPU).get_state(), cuda_states());
        const bool scaled_bad = grads_nonfinite(amp);
        scaler.impl().unscale(amp.params);
        const bool grads_bad = grads_nonfinite(amp);
        rec.found_inf = scaler.enabled() ? scaler.impl().last_found_inf() : grads_bad;
        if (s.clip_grad_norm > 0) clip_like_python(clip_amp, s.clip_grad_norm);
        if (out_bad)
            stage(step, ReplayStageKind::Forward, ReplaySide::Amp,
                  train_parts::amp_forward_origin(amp, inputs, seed_of(step), ts, device));
        else if (loss_bad)
            stage(step, ReplayStageKind::Loss, ReplaySide::Amp, std::nullopt, loss_op());
        else if (scaled_bad)
            stage(step, ReplayStageKind::Backward, ReplaySide::Amp,
                  train_parts::amp_backward_origin(amp, inputs, seed_of(step), data, ts, device, scaler));
        else if (grads_bad)  // finite scaled gradients times 1/scale: GradScaler checked them before, it does not skip
            stage(step, ReplayStageKind::Unscale, ReplaySide::Amp, std::nullopt,
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
                    stage(step, ReplayStageKind::Optimizer, side == &amp ? ReplaySide::Amp : ReplaySide::Reference,
                          std::nullopt, opt_amp.kind + " update of " + side->names[i], module_of(side->names[i]));
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
            rec.activations = ckpt::activation_departures(*ref.model, *amp.model, inputs, device, s, seed_of(step));
        } catch (const InputError&) {
            throw;
        } catch (const std::exception& e) {
            if (step > 0) throw;
            throw InputError(s.batch, "inputs",
                             "the model cannot run this batch (shape or dtype does not fit its inputs): " +
                                 detail::first_line(e.what()));
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
                p.grad_rel =
                    ((ga.to(at::kDouble) - gr.to(at::kDouble)).norm() / gr.to(at::kDouble).norm()).item<double>();
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

/// Lightning clips the optimizer's parameters in its groups' order, a Trainer (and a plain
/// clip_grad_norm_(model.parameters())) the model's: the summation order of the norm differs.
/// The job's generator state, where the checkpoint saved it, is what the first step draws from.
void setup_clip_and_rng(Replay& rp, const ckpt::Checkpoint& c, train_parts::RngStates& rng) {
    auto& r = rp.r;
    if (c.format == "lightning") {
        for (const int64_t i : rp.opt_ref.group_order()) {
            rp.clip_ref.push_back(rp.ref.params[size_t(i)]);
            rp.clip_amp.push_back(rp.amp.params[size_t(i)]);
        }
    } else {
        rp.clip_ref = rp.ref.params;
        rp.clip_amp = rp.amp.params;
    }
    if (c.rng_cpu.defined()) {
        rng.set(rp.seed_of(0), c.rng_cpu, c.rng_cuda);
        rp.rng = &rng;
        r.rng = "checkpoint";
    } else {
        r.rng = "seed";
        if (has_dropout(*rp.amp.model))
            r.warnings.push_back(
                "the checkpoint holds no RNG state: dropout draws from ampscope's seed, so its masks differ from "
                "the job's (a Trainer folder's rng_state.pth, a dict's rng_state restore them)");
    }
}

void validate(const ReplaySpec& s) {
    if (s.steps < 1) throw InputError("", "steps", "expected an integer >= 1");
    if (!replays(s.precision))
        throw InputError("", "precision",
                         "'" + to_string(s.precision) + "'; expected " + precisions_listed(kReplayPrecisions) +
                             " (what a job trains in)");
    if (s.rowwise_gw_hp && s.precision != Precision::Fp8Rowwise)
        throw InputError("", "rowwise_gw_hp", "given with " + to_string(s.precision) + "; expected fp8-rowwise");
    if (s.fp8_all_gemms && !is_fp8(s.precision))
        throw InputError("", "fp8_all_gemms",
                         "given with " + to_string(s.precision) + "; expected an FP8 recipe (fp8, fp8-rowwise, mxfp8)");
    if (s.init_scale && (!std::isfinite(*s.init_scale) || *s.init_scale <= 0))
        throw InputError("", "init_scale", "expected a finite number > 0");
    if (s.growth_interval && *s.growth_interval < 1)
        throw InputError("", "growth_interval", "expected an integer >= 1");
    if (!std::isfinite(s.clip_grad_norm) || s.clip_grad_norm < 0)
        throw InputError("", "clip_grad_norm", "expected a finite number >= 0");
}

std::string files_sha256(const std::vector<std::string>& files) {
    Sha256 h;
    for (const auto& f : files) h.update(sha256_file(f));
    return h.hex();
}

}  // namespace

namespace {

/// The job's optimizer state: the checkpoint's (its file: a Trainer folder's optimizer.pt, else
/// the last file read), or --optimizer-state's; InputError when there is none.
ckpt::OptimizerState job_optimizer(const ReplaySpec& spec, const ckpt::Checkpoint& c, ReplayResult& r,
                                   std::string& opt_file) {
    std::optional<ckpt::OptimizerState> opt = c.optimizer;
    opt_file = c.files.empty() ? spec.checkpoint : c.files.back();
    for (const auto& f : c.files)
        if (f.size() >= 12 && f.compare(f.size() - 12, 12, "optimizer.pt") == 0) opt_file = f;
    if (!spec.optimizer_state.empty()) {
        opt_file = spec.optimizer_state;
        opt = ckpt::read_optimizer(ckpt::read_pt_root(spec.optimizer_state, &r.warnings), opt_file, "");
    }
    if (!opt)
        throw InputError(spec.checkpoint, "optimizer",
                         "no optimizer state in the checkpoint; give the optimizer state file",
                         {{"optimizer_state", "FILE"}});
    return std::move(*opt);
}

/// The training side's view of a replay: model, batch, loss, precision, FP32 regions, seed.
TrainSpec training_spec_of(const ReplaySpec& spec) {
    TrainSpec ts;
    ts.model = spec.model;
    ts.data = spec.batch;
    ts.loss = spec.loss;
    ts.precision = spec.precision;
    ts.keep_fp32 = spec.keep_fp32;
    ts.keep_bf16 = spec.keep_bf16;
    ts.mx_scaling = spec.mx_scaling;
    ts.fp8_all_gemms = spec.fp8_all_gemms;
    ts.rowwise_gw_hp = spec.rowwise_gw_hp;
    ts.seed = spec.seed;
    return ts;
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
    if (spec.incident && spec.incident->accumulation_steps > 1)
        r.warnings.push_back(
            "the job accumulated gradients over " + std::to_string(spec.incident->accumulation_steps) +
            " micro-batches per optimizer step; the bundle holds the step's last micro-batch and the replay steps "
            "on it alone: its forward and loss are the job's, its gradients and update are not");
    auto side = [&] { return train_parts::load_side(spec.model, spec.seed, spec.output, device); };
    Side ref = side(), amp = side();
    load_weights(spec, c, ref, amp, r);
    std::string opt_file;
    ckpt::OptimizerState opt = job_optimizer(spec, c, r, opt_file);
    prepare_optimizer(spec, c, opt, opt_file, ref, r);
    GradScaler scaler = make_scaler(spec, c, device, r);
    train_parts::check_scaled_params(amp, scaler.enabled(), spec.model);
    TrainSpec ts = training_spec_of(spec);
    auto data = detail::load_training_data(spec.batch, *ref.model, spec.seed, ts.loss != LossKind::Model, "batch_file");
    train_parts::choose_loss(ts, data);
    detail::check_fp32_regions(*amp.model, spec.keep_fp32);
    detail::check_bf16_modules(*amp.model, spec.keep_bf16, {spec.precision});
    detail::check_kept_once(spec.keep_fp32, spec.keep_bf16);
    std::vector<at::Tensor> inputs;
    for (const auto& t : data.inputs) inputs.push_back(t.to(device));
    Replay rp{spec,
              ts,
              device,
              std::move(ref),
              std::move(amp),
              deep_copy(opt, device),
              deep_copy(opt, device),
              std::move(scaler),
              std::move(data),
              inputs,
              r};
    for (const auto& t : inputs)
        if (t.is_floating_point() && !t.isfinite().all().item<bool>())
            rp.stage(0, ReplayStageKind::Input, ReplaySide::Both, std::nullopt, "the batch's inputs");
    train_parts::RngStates rng;
    setup_clip_and_rng(rp, c, rng);
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
