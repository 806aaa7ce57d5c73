// SPDX-License-Identifier: MIT
// torch.optim state_dict() and torch.amp.GradScaler.state_dict() as read from users' files,
// checked against what PyTorch itself accepts and against the model's parameters.
#include <cmath>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/vocabulary.h"
#include "replay/checkpoint.h"

namespace ampscope::detail::ckpt {
namespace {

std::optional<c10::IValue> get(const c10::impl::GenericDict& d, const std::string& key) {
    for (const auto& kv : d)
        if (kv.key().isString() && kv.key().toStringRef() == key) return kv.value();
    return std::nullopt;
}

double number(const c10::IValue& v, const std::string& file, const std::string& field) {
    if (v.isDouble()) return v.toDouble();
    if (v.isInt()) return double(v.toInt());
    if (v.isBool()) return v.toBool() ? 1 : 0;
    if (v.isTensor() && v.toTensor().numel() == 1) return v.toTensor().item<double>();
    throw InputError(file, field, "expected a number, got " + v.tagKind());
}

bool flag(const c10::impl::GenericDict& d, const std::string& key) {
    const auto v = get(d, key);
    return v && v->isBool() && v->toBool();
}

bool has(const c10::impl::GenericDict& d, const char* key) {
    return get(d, key).has_value();
}

/// What an optimizer's param group keys say it is (torch.optim 2.x, bitsandbytes): "" for a
/// family replayed here (SGD, Adam/AdamW), else the optimizer's name.
std::string unsupported_kind(const c10::impl::GenericDict& d) {
    if (has(d, "momentum_decay")) return "NAdam";
    if (has(d, "lr_decay") || has(d, "initial_accumulator_value")) return "Adagrad";
    if (has(d, "alpha") && has(d, "centered")) return "RMSprop";
    if (has(d, "rho")) return "Adadelta";
    if (has(d, "beta2_decay") || (has(d, "d") && !has(d, "betas"))) return "Adafactor";
    if (has(d, "lambd") || has(d, "t0")) return "ASGD";
    if (has(d, "etas") || has(d, "step_sizes")) return "Rprop";
    if (has(d, "max_iter") || has(d, "history_size") || has(d, "line_search_fn")) return "LBFGS";
    if (has(d, "optim_bits") || has(d, "percentile_clipping") || has(d, "block_wise") || has(d, "min_8bit_size"))
        return "a bitsandbytes 8-bit optimizer";
    if (has(d, "betas") && !has(d, "weight_decay")) return "SparseAdam";
    if (has(d, "betas") && !has(d, "amsgrad")) return has(d, "decoupled_weight_decay") ? "RAdam" : "Adamax or RAdam";
    return "";
}

/// A hyper-parameter PyTorch reads as a real number: a Python number or a real one-element tensor.
double real_number(const c10::IValue& v, const std::string& file, const std::string& field) {
    if (v.isTensor() && (v.toTensor().is_complex() || v.toTensor().numel() != 1))
        throw InputError(file, field,
                         "expected a real number, got a tensor of " + std::to_string(v.toTensor().numel()) + " " +
                             std::string(c10::toString(v.toTensor().scalar_type())) + " elements");
    return number(v, file, field);
}

void read_hyper(const c10::impl::GenericDict& d, OptimizerGroup& g, const std::string& file, const std::string& field) {
    auto need = [&](const char* k, double& out) {
        const auto x = get(d, k);
        if (!x || x->isNone())
            throw InputError(file, field + "." + k, "missing; torch.optim's step reads it (KeyError in PyTorch)");
        out = real_number(*x, file, field + "." + k);
        if (!std::isfinite(out))
            throw InputError(file, field + "." + k, "expected a finite number, got " + c10::str(out));
    };
    need("lr", g.lr);
    need("weight_decay", g.weight_decay);
    if (has(d, "betas")) {
        need("eps", g.eps);
        const auto b = *get(d, "betas");
        if (!b.isTuple() && !b.isList()) throw InputError(file, field + ".betas", "expected (beta1, beta2)");
        const auto el = b.isTuple() ? b.toTupleRef().elements().vec() : b.toListRef().vec();
        if (el.size() != 2) throw InputError(file, field + ".betas", "expected (beta1, beta2)");
        if (el[0].isTensor() || el[1].isTensor())
            throw InputError(
                file, field + ".betas",
                "are tensors: PyTorch then computes the bias corrections in the tensors' dtype; not replayed exactly "
                "yet (save them as numbers)");
        g.beta1 = real_number(el[0], file, field + ".betas[0]");
        g.beta2 = real_number(el[1], file, field + ".betas[1]");
        if (g.beta1 == 1)
            throw InputError(file, field + ".betas[0]",
                             "is 1: Adam's bias correction 1 - beta1^step is 0 (PyTorch raises ZeroDivisionError)");
    } else {
        need("momentum", g.momentum);
        need("dampening", g.dampening);
    }
}

/// One param group: hyper-parameters, flags, indices, names; `kind` is sgd, adam, adamw or
/// "adam|adamw" (no decoupled_weight_decay key: PyTorch <= 2.6, where Adam and AdamW were
/// separate classes with the same keys).
OptimizerGroup read_group(const c10::IValue& v, const std::string& file, const std::string& field, std::string& kind) {
    if (!v.isGenericDict())
        throw InputError(file, field, "expected a dict (a torch.optim param group), got " + v.tagKind());
    const auto d = v.toGenericDict();
    if (const auto u = unsupported_kind(d); !u.empty())
        throw InputError(
            file, field,
            "is " + u + "'s param group; ampscope replays SGD, Adam and AdamW exactly and no other optimizer");
    std::string k;
    if (has(d, "betas") && has(d, "amsgrad"))
        k = has(d, "decoupled_weight_decay") ? (flag(d, "decoupled_weight_decay") ? "adamw" : "adam") : "adam|adamw";
    else if (has(d, "momentum") && has(d, "dampening"))
        k = "sgd";
    else
        throw InputError(
            file, field,
            "is neither SGD's (momentum, dampening) nor Adam's (betas, amsgrad); expected a torch.optim SGD, Adam or "
            "AdamW state");
    if (!kind.empty() && kind != k)
        throw InputError(file, field, "is " + k + "'s while an earlier group is " + kind + "'s");
    kind = k;
    OptimizerGroup g;
    read_hyper(d, g, file, field);
    g.amsgrad = flag(d, "amsgrad");
    g.maximize = flag(d, "maximize");
    g.nesterov = flag(d, "nesterov");
    g.decoupled = flag(d, "decoupled_weight_decay");
    g.fused = flag(d, "fused");
    g.foreach = flag(d, "foreach");
    g.capturable = flag(d, "capturable");
    if (flag(d, "differentiable"))
        throw InputError(file, field + ".differentiable", "is True; not replayed (expected False)");
    const auto p = get(d, "params");
    if (!p || !p->isList()) throw InputError(file, field + ".params", "missing; expected a list of parameter indices");
    for (const auto& i : p->toListRef()) {
        if (!i.isInt()) throw InputError(file, field + ".params", "expected integer parameter indices");
        g.params.push_back(i.toInt());
    }
    if (const auto n = get(d, "param_names"); n && !n->isNone()) {
        if (!n->isList()) throw InputError(file, field + ".param_names", "expected a list of parameter names");
        for (const auto& e : n->toListRef()) {
            if (!e.isString()) throw InputError(file, field + ".param_names", "expected parameter names (strings)");
            g.param_names.push_back(e.toStringRef());
        }
        if (g.param_names.size() != g.params.size())
            throw InputError(file, field + ".param_names",
                             "hold " + std::to_string(g.param_names.size()) + " names for " +
                                 std::to_string(g.params.size()) + " parameters");
    }
    return g;
}

at::Tensor tensor_or_none(const c10::impl::GenericDict& d, const char* key, const std::string& file,
                          const std::string& field) {
    const auto v = get(d, key);
    if (!v || v->isNone()) return {};
    if (!v->isTensor()) throw InputError(file, field + "." + key, "expected a Tensor, got " + v->tagKind());
    const auto& t = v->toTensor();
    if (t.is_complex() || t.layout() != at::kStrided || t.is_meta())
        throw InputError(file, field + "." + key,
                         "expected a dense real tensor, got " + c10::str(t.toString(), " ", t.layout()));
    return t.clone();
}

ParamState read_param_state(const c10::IValue& v, const std::string& kind, const std::string& file,
                            const std::string& sf) {
    if (!v.isGenericDict()) throw InputError(file, sf, "expected a dict of per-parameter state");
    const auto sd = v.toGenericDict();
    for (const char* k : {"state1", "qmap1", "absmax1"})
        if (has(sd, k)) throw InputError(file, sf + "." + k, "is a bitsandbytes 8-bit optimizer's state; not replayed");
    if (has(sd, "exp_inf"))
        throw InputError(file, sf + ".exp_inf", "is Adamax's state; ampscope replays SGD, Adam and AdamW");
    if (has(sd, "mu_product"))
        throw InputError(file, sf + ".mu_product", "is NAdam's state; ampscope replays SGD, Adam and AdamW");
    ParamState ps;
    ps.exp_avg = tensor_or_none(sd, "exp_avg", file, sf);
    ps.exp_avg_sq = tensor_or_none(sd, "exp_avg_sq", file, sf);
    ps.max_exp_avg_sq = tensor_or_none(sd, "max_exp_avg_sq", file, sf);
    ps.momentum_buffer = tensor_or_none(sd, "momentum_buffer", file, sf);
    if (auto s = get(sd, "step")) {  // a 0-dim tensor in PyTorch 2.x, a number in older files
        if (s->isTensor() && s->toTensor().numel() != 1)
            throw InputError(
                file, sf + ".step",
                "holds " + std::to_string(s->toTensor().numel()) + " elements; PyTorch's step reads one number");
        const double v = real_number(*s, file, sf + ".step");
        if (!(v >= 0) || !std::isfinite(v))
            throw InputError(file, sf + ".step", "expected a step count >= 0, got " + c10::str(v));
        ps.step = s->isTensor() ? s->toTensor().to(at::kFloat).reshape({}).clone()
                                : at::full({}, v, at::TensorOptions().dtype(at::kFloat));
    }
    if (kind != to_string(OptimizerKind::Sgd) &&
        (!ps.step.defined() || !ps.exp_avg.defined() || !ps.exp_avg_sq.defined()))
        throw InputError(file, sf, "missing step, exp_avg or exp_avg_sq; expected Adam's per-parameter state");
    return ps;
}

}  // namespace

OptimizerState read_optimizer(const c10::IValue& v, const std::string& file, const std::string& field) {
    const std::string f = field.empty() ? "" : field + ".";
    if (!v.isGenericDict())
        throw InputError(file, field, "expected a torch.optim state_dict() {state, param_groups}, got " + v.tagKind());
    const auto d = v.toGenericDict();
    const auto groups = get(d, "param_groups");
    const auto state = get(d, "state");
    if (!groups || !groups->isList())
        throw InputError(file, f + "param_groups", "missing; expected a torch.optim state_dict()");
    if (!state || !state->isGenericDict())
        throw InputError(file, f + "state", "missing; expected a torch.optim state_dict()");
    OptimizerState o;
    size_t gi = 0;
    for (const auto& g : groups->toListRef()) {
        const auto gf = f + "param_groups[" + std::to_string(gi++) + "]";
        o.groups.push_back(read_group(g, file, gf, o.kind));
        if (o.groups.back().capturable)
            o.notes.push_back(gf +
                              " has capturable=True: replayed with the non-capturable arithmetic (PyTorch refuses "
                              "capturable on the CPU; on a GPU its step differs in the last bits)");
    }
    if (o.groups.empty()) throw InputError(file, f + "param_groups", "is empty; expected at least one param group");
    bool named = !o.groups[0].param_names.empty();
    for (size_t i = 0; i < o.groups.size(); ++i)
        if (!o.groups[i].params.empty() && o.groups[i].param_names.empty() == named)
            throw InputError(file, f + "param_groups[" + std::to_string(i) + "].param_names",
                             "present in some groups and not in others; PyTorch names all groups or none");
    o.kind_source =
        o.kind == "adam|adamw" ? ""
        : o.kind == to_string(OptimizerKind::Sgd)
            ? "momentum, dampening"
            : "decoupled_weight_decay=" + std::string(o.kind == to_string(OptimizerKind::Adamw) ? "True" : "False");
    for (const auto& kv : state->toGenericDict()) {
        if (!kv.key().isInt()) throw InputError(file, f + "state", "expected integer parameter indices as keys");
        const auto sf = f + "state." + std::to_string(kv.key().toInt());
        o.state[kv.key().toInt()] = read_param_state(kv.value(), o.kind, file, sf);
    }
    return o;
}

void resolve_kind(OptimizerState& o, const std::optional<OptimizerKind>& forced, const std::string& forced_by,
                  const std::string& file) {
    const std::string by = forced_by.empty() ? "as asked" : forced_by;
    if (o.kind == "adam|adamw") {
        bool decays = false;
        for (const auto& g : o.groups) decays = decays || g.weight_decay != 0;
        if (forced == OptimizerKind::Sgd)
            throw InputError(file, "param_groups",
                             "hold Adam's (betas, amsgrad), not SGD's; the optimizer sgd (" + by + ") contradicts it");
        if (forced) {
            o.kind = to_string(*forced);
            o.kind_source = "optimizer " + o.kind + " " + by + " (no decoupled_weight_decay key: PyTorch <= 2.6)";
        } else if (!decays) {
            o.kind = to_string(OptimizerKind::Adam);
            o.kind_source =
                "no decoupled_weight_decay key (PyTorch <= 2.6) and weight_decay 0: Adam and AdamW step alike";
        } else {
            throw InputError(
                file, "param_groups",
                "are Adam's or AdamW's from PyTorch <= 2.6 (no decoupled_weight_decay key) with weight_decay != 0, "
                "where the two step differently and the file cannot tell which: give the optimizer, adam or adamw",
                {{"optimizer", "adam"}, {"optimizer", "adamw"}});
        }
        for (auto& g : o.groups) g.decoupled = parse_optimizer_kind(o.kind) == OptimizerKind::Adamw;
        return;
    }
    if (forced && to_string(*forced) != o.kind)
        throw InputError(file, "param_groups",
                         "are " + o.kind + "'s (" + o.kind_source + "); the optimizer " + to_string(*forced) + " (" +
                             by + ") contradicts the file");
}

std::optional<ScalerState> read_scaler(const c10::IValue& v, const std::string& file, const std::string& field) {
    const std::string f = field.empty() ? "" : field + ".";
    if (!v.isGenericDict())
        throw InputError(file, field, "expected torch.amp.GradScaler.state_dict(), got " + v.tagKind());
    const auto d = v.toGenericDict();
    if (d.empty()) return std::nullopt;  // GradScaler(enabled=False).state_dict()
    ScalerState s;
    auto need = [&](const char* k) {
        const auto x = get(d, k);
        if (!x)
            throw InputError(file, f + k,
                             "missing; expected GradScaler.state_dict() (scale, growth_factor, backoff_factor, "
                             "growth_interval, _growth_tracker)");
        return number(*x, file, f + k);
    };
    s.scale = need("scale");
    // 0 is what GradScaler loads too (every step then skips: 0 x 1/0 is NaN); the scale is a
    // float32 tensor, so a double above float32's largest would be inf there.
    if (!(s.scale >= 0) || !std::isfinite(float(s.scale)))
        throw InputError(
            file, f + "scale",
            "expected a number >= 0 within float32's range (GradScaler's scale), got " + c10::str(s.scale));
    if (get(d, "growth_factor")) s.growth_factor = need("growth_factor");
    if (get(d, "backoff_factor")) s.backoff_factor = need("backoff_factor");
    if (get(d, "growth_interval")) s.growth_interval = int(need("growth_interval"));
    if (get(d, "_growth_tracker")) s.growth_tracker = int(need("_growth_tracker"));
    if (!std::isfinite(s.growth_factor) || !(s.growth_factor > 1))
        throw InputError(file, f + "growth_factor",
                         "expected a number > 1 (GradScaler asserts it), got " + c10::str(s.growth_factor));
    if (!std::isfinite(s.backoff_factor) || !(s.backoff_factor > 0 && s.backoff_factor < 1))
        throw InputError(file, f + "backoff_factor",
                         "expected a number in (0, 1) (GradScaler asserts it), got " + c10::str(s.backoff_factor));
    if (s.growth_interval < 1) throw InputError(file, f + "growth_interval", "expected an integer >= 1");
    if (s.growth_tracker < 0) throw InputError(file, f + "_growth_tracker", "expected an integer >= 0");
    return s;
}

}  // namespace ampscope::detail::ckpt
