// SPDX-License-Identifier: MIT
// torch.optim state_dict() and torch.amp.GradScaler.state_dict() as read from users' files,
// checked against what PyTorch itself accepts and against the model's parameters.
#include <cmath>

#include "ampscope/engine/errors.h"
#include "checkpoint/checkpoint.h"

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

OptimizerGroup read_group(const c10::IValue& v, const std::string& file, const std::string& field, std::string& kind) {
    if (!v.isGenericDict()) throw InputError(file, field, "expected a dict (a torch.optim param group), got " + v.tagKind());
    const auto d = v.toGenericDict();
    OptimizerGroup g;
    auto num = [&](const char* k, double& out) {
        if (auto x = get(d, k); x && !x->isNone()) out = number(*x, file, field + "." + k);
    };
    num("lr", g.lr);
    num("weight_decay", g.weight_decay);
    num("eps", g.eps);
    num("momentum", g.momentum);
    num("dampening", g.dampening);
    g.amsgrad = flag(d, "amsgrad");
    g.maximize = flag(d, "maximize");
    g.nesterov = flag(d, "nesterov");
    g.decoupled = flag(d, "decoupled_weight_decay");
    std::string k;
    if (auto b = get(d, "betas")) {
        if (!b->isTuple() && !b->isList()) throw InputError(file, field + ".betas", "expected (beta1, beta2)");
        const auto el = b->isTuple() ? b->toTupleRef().elements().vec() : b->toListRef().vec();
        if (el.size() != 2) throw InputError(file, field + ".betas", "expected (beta1, beta2)");
        g.beta1 = number(el[0], file, field + ".betas");
        g.beta2 = number(el[1], file, field + ".betas");
        k = g.decoupled ? "adamw" : "adam";
    } else if (get(d, "momentum") && get(d, "dampening")) {
        k = "sgd";
    } else {
        throw InputError(file, field,
                         "is neither SGD's (momentum, dampening) nor Adam's (betas); expected a torch.optim SGD, Adam or AdamW state");
    }
    if (!kind.empty() && kind != k) throw InputError(file, field, "is " + k + "'s while an earlier group is " + kind + "'s");
    kind = k;
    const auto p = get(d, "params");
    if (!p || !p->isList()) throw InputError(file, field + ".params", "missing; expected a list of parameter indices");
    for (const auto& i : p->toListRef()) {
        if (!i.isInt()) throw InputError(file, field + ".params", "expected integer parameter indices");
        g.params.push_back(i.toInt());
    }
    return g;
}

at::Tensor tensor_or_none(const c10::impl::GenericDict& d, const char* key, const std::string& file, const std::string& field) {
    const auto v = get(d, key);
    if (!v || v->isNone()) return {};
    if (!v->isTensor()) throw InputError(file, field + "." + key, "expected a Tensor, got " + v->tagKind());
    return v->toTensor().clone();
}

}  // namespace

OptimizerState read_optimizer(const c10::IValue& v, const std::string& file, const std::string& field) {
    const std::string f = field.empty() ? "" : field + ".";
    if (!v.isGenericDict()) throw InputError(file, field, "expected a torch.optim state_dict() {state, param_groups}, got " + v.tagKind());
    const auto d = v.toGenericDict();
    const auto groups = get(d, "param_groups");
    const auto state = get(d, "state");
    if (!groups || !groups->isList()) throw InputError(file, f + "param_groups", "missing; expected a torch.optim state_dict()");
    if (!state || !state->isGenericDict()) throw InputError(file, f + "state", "missing; expected a torch.optim state_dict()");
    OptimizerState o;
    size_t gi = 0;
    for (const auto& g : groups->toListRef()) {
        const auto gf = f + "param_groups[" + std::to_string(gi++) + "]";
        o.groups.push_back(read_group(g, file, gf, o.kind));
        const auto gd = g.toGenericDict();
        for (const char* k : {"foreach", "fused", "capturable", "differentiable"})
            if (flag(gd, k))
                o.notes.push_back(gf + " has " + k +
                                  "=True; replayed with the single-tensor implementation (PyTorch's default on the CPU)");
    }
    for (const auto& kv : state->toGenericDict()) {
        if (!kv.key().isInt()) throw InputError(file, f + "state", "expected integer parameter indices as keys");
        const auto sf = f + "state." + std::to_string(kv.key().toInt());
        if (!kv.value().isGenericDict()) throw InputError(file, sf, "expected a dict of per-parameter state");
        const auto sd = kv.value().toGenericDict();
        ParamState ps;
        ps.exp_avg = tensor_or_none(sd, "exp_avg", file, sf);
        ps.exp_avg_sq = tensor_or_none(sd, "exp_avg_sq", file, sf);
        ps.max_exp_avg_sq = tensor_or_none(sd, "max_exp_avg_sq", file, sf);
        ps.momentum_buffer = tensor_or_none(sd, "momentum_buffer", file, sf);
        if (auto s = get(sd, "step"))  // a 0-dim tensor in PyTorch 2.x, a number in older files
            ps.step = s->isTensor() ? s->toTensor().to(at::kFloat).reshape({}).clone()
                                    : at::full({}, number(*s, file, sf + ".step"), at::TensorOptions().dtype(at::kFloat));
        if (o.kind != "sgd" && (!ps.step.defined() || !ps.exp_avg.defined() || !ps.exp_avg_sq.defined()))
            throw InputError(file, sf, "missing step, exp_avg or exp_avg_sq; expected Adam's per-parameter state");
        o.state[kv.key().toInt()] = ps;
    }
    return o;
}

std::optional<ScalerState> read_scaler(const c10::IValue& v, const std::string& file, const std::string& field) {
    const std::string f = field.empty() ? "" : field + ".";
    if (!v.isGenericDict()) throw InputError(file, field, "expected torch.amp.GradScaler.state_dict(), got " + v.tagKind());
    const auto d = v.toGenericDict();
    if (d.empty()) return std::nullopt;  // GradScaler(enabled=False).state_dict()
    ScalerState s;
    auto need = [&](const char* k) {
        const auto x = get(d, k);
        if (!x)
            throw InputError(
                file, f + k,
                "missing; expected GradScaler.state_dict() (scale, growth_factor, backoff_factor, growth_interval, _growth_tracker)");
        return number(*x, file, f + k);
    };
    s.scale = need("scale");
    // 0 is what GradScaler loads too (every step then skips: 0 x 1/0 is NaN); the scale is a
    // float32 tensor, so a double above float32's largest would be inf there.
    if (!(s.scale >= 0) || !std::isfinite(float(s.scale)))
        throw InputError(file, f + "scale", "expected a number >= 0 within float32's range (GradScaler's scale), got " + c10::str(s.scale));
    if (get(d, "growth_factor")) s.growth_factor = need("growth_factor");
    if (get(d, "backoff_factor")) s.backoff_factor = need("backoff_factor");
    if (get(d, "growth_interval")) s.growth_interval = int(need("growth_interval"));
    if (get(d, "_growth_tracker")) s.growth_tracker = int(need("_growth_tracker"));
    if (!std::isfinite(s.growth_factor) || !(s.growth_factor > 1))
        throw InputError(file, f + "growth_factor", "expected a number > 1 (GradScaler asserts it), got " + c10::str(s.growth_factor));
    if (!std::isfinite(s.backoff_factor) || !(s.backoff_factor > 0 && s.backoff_factor < 1))
        throw InputError(file, f + "backoff_factor",
                         "expected a number in (0, 1) (GradScaler asserts it), got " + c10::str(s.backoff_factor));
    if (s.growth_interval < 1) throw InputError(file, f + "growth_interval", "expected an integer >= 1");
    if (s.growth_tracker < 0) throw InputError(file, f + "_growth_tracker", "expected an integer >= 0");
    return s;
}

void check_optimizer(const OptimizerState& o, const std::vector<at::Tensor>& params, const std::vector<std::string>& names,
                     const std::string& file) {
    int64_t next = 0;
    for (size_t gi = 0; gi < o.groups.size(); ++gi)
        for (const int64_t i : o.groups[gi].params) {
            if (i != next)
                throw InputError(file, "param_groups[" + std::to_string(gi) + "].params",
                                 "index " + std::to_string(i) + " where " + std::to_string(next) +
                                     " was expected; the optimizer's parameters must follow the model's parameter order");
            ++next;
        }
    if (size_t(next) != params.size())
        throw InputError(
            file, "param_groups",
            "hold " + std::to_string(next) + " parameters; the model has " + std::to_string(params.size()) + " trainable ones");
    for (const auto& [i, st] : o.state) {
        if (i < 0 || size_t(i) >= params.size())
            throw InputError(file, "state." + std::to_string(i),
                             "is for a parameter index the model does not have (" + std::to_string(params.size()) + " parameters)");
        for (const auto* t : {&st.exp_avg, &st.exp_avg_sq, &st.max_exp_avg_sq, &st.momentum_buffer})
            if (t->defined() && t->sizes() != params[size_t(i)].sizes())
                throw InputError(
                    file, "state." + std::to_string(i),
                    "has shape " + c10::str(t->sizes()) + "; parameter " + names[size_t(i)] + " is " + c10::str(params[size_t(i)].sizes()));
    }
}

}  // namespace ampscope::detail::ckpt
