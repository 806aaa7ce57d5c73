// SPDX-License-Identifier: MIT
// The torch.export interpreter: a Program (export_program.h) run node by node through
// c10::Dispatcher on the calling thread, so the pass's autocast state, the op observer
// (RecordFunction), autograd and FP32 regions apply to every node exactly as in eager PyTorch.
#include <ATen/ScalarOps.h>
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <unordered_map>

#include "ampscope/engine/errors.h"
#include "model/export_program.h"
#include "model/model.h"
#include "precision/precision.h"

namespace ampscope::detail {
namespace {

using pt2::Arg;
using pt2::Node;
using pt2::Out;

using Env = std::unordered_map<std::string, c10::IValue>;

/// The shape of `rows` copies of one row of `t`.
std::vector<int64_t> pad_shape(const at::Tensor& t, int64_t rows) {
    auto s = t.sizes().vec();
    s[0] = rows;
    return s;
}

/// Per node of `g`: the values it reads (or makes) for the last time, dropped after it runs, as
/// torch.fx's Interpreter does: an activation lives until its last use, not the whole pass.
/// The graph's outputs are kept.
std::vector<std::vector<std::string>> last_uses(const pt2::Graph& g) {
    std::unordered_map<std::string, size_t> last;
    auto use = [&](const std::string& name, size_t k) {
        if (!name.empty()) last[name] = k;
    };
    for (size_t k = 0; k < g.nodes.size(); ++k) {
        for (const auto& o : g.nodes[k].outputs) {  // made here: dead here unless read later
            use(o.name, k);
            for (const auto& nm : o.names) use(nm, k);
        }
        for (const auto& a : g.nodes[k].args) {
            if (!a) continue;
            use(a->name, k);
            for (const auto& nm : a->names) use(nm, k);
        }
    }
    for (const auto& o : g.outputs) {
        last.erase(o.name);
        for (const auto& nm : o.names) last.erase(nm);
    }
    std::vector<std::vector<std::string>> dead(g.nodes.size());
    for (const auto& [name, k] : last) dead[k].push_back(name);
    return dead;
}

class ExportModel final : public Model {
public:
    explicit ExportModel(pt2::Program p) : p_(std::move(p)) {
        for (const auto& g : p_.graphs) dead_.push_back(last_uses(g));
        for (auto& [fqn, t] : p_.parameters) t.requires_grad_(!p_.frozen.count(fqn));  // as the program records it
        // a static batch dimension: the runner feeds batches of exactly that size
        if (!p_.user_inputs.empty() && !p_.user_inputs[0].sizes.empty() && p_.user_inputs[0].sizes[0] > 0)
            fixed_batch = p_.user_inputs[0].sizes[0];
        bool all_static = true;
        for (const auto& u : p_.user_inputs) {
            std::vector<int64_t> per_sample(u.sizes.begin() + (u.sizes.empty() ? 0 : 1), u.sizes.end());
            for (auto d : per_sample) all_static = all_static && d >= 0;
            input_shapes.push_back(per_sample);
            input_names.push_back(u.name);
        }
        if (!all_static) input_shapes.clear();
        required_inputs = p_.user_inputs.size();
    }

    at::Tensor forward(const std::vector<at::Tensor>& in) override {
        if (in.size() != p_.user_inputs.size())
            throw InputError(p_.file, "inputs",
                             "the program takes " + std::to_string(p_.user_inputs.size()) + " inputs, given " +
                                 std::to_string(in.size()));
        const int64_t n = in.empty() || in[0].dim() == 0 ? 0 : in[0].size(0);
        if (fixed_batch <= 0 || n == fixed_batch) return run(in);
        if (train_)
            throw InputError(p_.file, "batch",
                             "the program was exported with a static batch of " + std::to_string(fixed_batch) +
                                 " and a batch of " + std::to_string(n) +
                                 " was given: in train mode batch "
                                 "statistics would change with padding; export with a dynamic batch dimension "
                                 "(dynamic_shapes) or use batch size " +
                                 std::to_string(fixed_batch) + " with a probe count it divides");
        // eval mode: split into exported-size batches, padding the last with copies of its last row;
        // the padding and joining are not the model's ops (the observer does not see them)
        std::vector<at::Tensor> outs;
        for (int64_t b = 0; b < n; b += fixed_batch) {
            const int64_t e = std::min(n, b + fixed_batch);
            std::vector<at::Tensor> part;
            for (const auto& t : in) {
                at::RecordFunctionGuard unobserved(false);
                auto s = t.slice(0, b, e);
                if (e - b < fixed_batch)
                    s = at::cat({s, s.slice(0, e - b - 1, e - b).expand(pad_shape(s, fixed_batch - (e - b)))});
                part.push_back(s);
            }
            auto y = e - b < fixed_batch ? run_padded(part) : run(part);
            at::RecordFunctionGuard unobserved(false);
            outs.push_back(y.slice(0, 0, e - b));
        }
        at::RecordFunctionGuard unobserved(false);
        return at::cat(outs);
    }

    void set_train(bool t) override { train_ = t; }
    void to_device(const at::Device& d) override {
        device_ = d;
        for (auto* m : {&p_.parameters, &p_.buffers, &p_.constants})
            for (auto& [fqn, t] : *m) {
                if (p_.tied.count(fqn) && m == &p_.parameters) continue;  // one tensor with its first occurrence
                const bool rg = t.requires_grad();
                t = t.detach().to(d);
                if (rg) t.requires_grad_(true);
            }
        for (const auto& [fqn, first] : p_.tied) p_.parameters[fqn] = p_.parameters.at(first);
    }
    std::vector<std::pair<std::string, at::Tensor>> named_state() override {
        std::vector<std::pair<std::string, at::Tensor>> out;
        for (const auto& f : p_.parameter_order) out.emplace_back(f, p_.parameters.at(f));
        for (const auto& f : p_.buffer_order) out.emplace_back(f, p_.buffers.at(f));
        return out;
    }
    std::vector<at::Tensor> parameters() override {
        std::vector<at::Tensor> out;
        for (const auto& f : p_.parameter_order)
            if (!p_.tied.count(f)) out.push_back(p_.parameters.at(f));
        return out;
    }
    std::set<std::string> non_persistent_buffers() const override { return p_.non_persistent; }
    std::vector<std::string> module_paths() override { return p_.modules; }
    std::map<std::string, std::string> module_types() const override { return p_.module_types; }
    std::vector<std::string> mode_warnings(bool train) const override {
        auto w = pt2::mode_warning(p_, train);
        return w.empty() ? std::vector<std::string>{} : std::vector<std::string>{w};
    }
    bool has_module_scopes() const override { return true; }
    void check_inputs(const std::vector<at::Tensor>& inputs, const std::vector<SampleInfo>& samples,
                      const std::string& file) const override {
        std::vector<std::string> ids;
        for (const auto& s : samples) ids.push_back(s.id);
        pt2::check_user_inputs(p_, inputs, ids, file);  // export_inputs.cpp
    }
    void check_batches(int64_t n, int64_t batch_size, const std::string& file) const override {
        pt2::check_batches(p_, n, batch_size, file);  // export_inputs.cpp
    }

    const pt2::Program& program() const { return p_; }
    void set_output(int index) { output_ = index; }

private:
    /// run() on a batch padded to the static size: the observer counts only its real rows.
    at::Tensor run_padded(const std::vector<at::Tensor>& in) {
        auto& ctx = pass_context();
        const int64_t saved = ctx.padded_rows;
        ctx.padded_rows = fixed_batch;
        try {
            auto y = run(in);
            ctx.padded_rows = saved;
            return y;
        } catch (...) {
            ctx.padded_rows = saved;
            throw;
        }
    }

    /// One run of the root graph on a batch; returns the chosen user output as scores.
    at::Tensor run(const std::vector<at::Tensor>& in) {
        auto& ctx = pass_context();
        base_autocast_ = at::autocast::is_autocast_enabled(ctx.device_type);
        amp_pass_ = base_autocast_;
        device_type_ = ctx.device_type;
        update_regions(ctx.keep_fp32, ctx.amp_only);
        std::vector<c10::IValue> args;
        size_t user = 0;
        for (const auto& spec : p_.inputs) {
            switch (spec.kind) {
                case pt2::InputSpec::Kind::Parameter: args.emplace_back(p_.parameters.at(spec.target)); break;
                case pt2::InputSpec::Kind::Buffer: args.emplace_back(p_.buffers.at(spec.target)); break;
                case pt2::InputSpec::Kind::Constant: args.emplace_back(p_.constants.at(spec.target)); break;
                case pt2::InputSpec::Kind::User: args.emplace_back(in.at(user++)); break;
            }
        }
        auto outs = run_graph(0, args);
        at::Tensor chosen;
        int u = 0;
        for (const auto& o : p_.outputs) {
            const auto& v = outs.at(size_t(o.slot));
            if (o.kind == pt2::OutputSpec::Kind::BufferMutation) {
                at::NoGradGuard ng;
                p_.buffers.at(o.target).copy_(v.toTensor());
            } else if (o.kind == pt2::OutputSpec::Kind::User) {
                if (u == output_) {
                    if (!v.isTensor())
                        throw ModelError("output '" + p_.output_names.at(size_t(u)) + "' of " + p_.file +
                                         " is not a tensor");
                    chosen = v.toTensor();
                }
                ++u;
            }
        }
        ctx.scope.clear();
        if (!chosen.defined()) throw ModelError(p_.file + ": the program returns no tensor output");
        return chosen;
    }

    void update_regions(const std::vector<std::string>& globs, const std::optional<std::string>& amp_only) {
        if (regions_valid_ && globs == region_globs_ && amp_only == region_amp_only_) return;
        region_globs_ = globs;
        region_amp_only_ = amp_only;
        regions_valid_ = true;
        node_fp32_.assign(p_.graphs.size(), {});
        node_no_cast_.assign(p_.graphs.size(), {});
        for (size_t g = 0; g < p_.graphs.size(); ++g) {
            std::unordered_map<std::string, const Node*> producer;  // value name → the node that made it
            for (const auto& n : p_.graphs[g].nodes) {
                bool inside_amp = !amp_only || within(n.module, *amp_only);
                std::optional<std::string> region;  // the innermost kept module around the node
                for (const auto& m : n.module_chain) {
                    if (!m.empty() && matches_any(m, globs)) region = m;
                    inside_amp = inside_amp || m == *amp_only;
                }
                node_fp32_[g].push_back(region || !inside_amp);
                node_no_cast_[g].push_back(region ? made_inside(n, *region, producer) : std::vector<std::string>{});
                for (const auto& o : n.outputs) {
                    if (!o.name.empty()) producer[o.name] = &n;
                    for (const auto& nm : o.names) producer[nm] = &n;
                }
            }
        }
    }

    /// The tensor arguments of `n` produced inside `region`: a region casts the module's
    /// floating inputs only (as `torch.autocast(enabled=False)` plus `.float()` on the module's
    /// inputs does), so an explicit `.half()` inside the kept module stays half.
    static std::vector<std::string> made_inside(const Node& n, const std::string& region,
                                                const std::unordered_map<std::string, const Node*>& producer) {
        std::vector<std::string> out;
        auto check = [&](const std::string& name) {
            const auto it = producer.find(name);
            if (it == producer.end()) return;  // a graph input: enters from outside
            const auto& chain = it->second->module_chain;
            if (std::find(chain.begin(), chain.end(), region) != chain.end()) out.push_back(name);
        };
        for (const auto& a : n.args) {
            if (!a) continue;
            if (a->kind == Arg::Kind::Tensor) check(a->name);
            if (a->kind == Arg::Kind::Tensors || a->kind == Arg::Kind::OptionalTensors)
                for (const auto& nm : a->names)
                    if (!nm.empty()) check(nm);
        }
        return out;
    }

    c10::IValue value(const Env& env, const std::string& name, const Node& n) const {
        const auto it = env.find(name);
        if (it == env.end())
            throw ModelError(p_.file + ": node '" + n.name + "' reads '" + name + "', which no earlier node produced");
        return it->second;
    }

    c10::IValue resolve(const Arg& a, const Env& env, const Node& n, bool fp32) const {
        const auto* keep = no_cast_;
        auto cast = [fp32, keep](at::Tensor t, const std::string& name) {
            if (!fp32 || !t.defined() || (t.scalar_type() != at::kHalf && t.scalar_type() != at::kBFloat16)) return t;
            if (keep && std::find(keep->begin(), keep->end(), name) != keep->end()) return t;
            return t.to(at::kFloat);
        };
        switch (a.kind) {
            case Arg::Kind::Constant: return a.constant;
            case Arg::Kind::Device: return c10::IValue(device_);
            case Arg::Kind::Tensor: {
                auto v = value(env, a.name, n);
                return v.isTensor() ? c10::IValue(cast(v.toTensor(), a.name)) : v;
            }
            case Arg::Kind::SymInt: return value(env, a.name, n);
            case Arg::Kind::Tensors: {
                c10::List<at::Tensor> l;
                for (const auto& nm : a.names) l.push_back(cast(value(env, nm, n).toTensor(), nm));
                return l;
            }
            case Arg::Kind::OptionalTensors: {
                c10::List<std::optional<at::Tensor>> l;
                for (const auto& nm : a.names)
                    l.push_back(nm.empty() ? std::optional<at::Tensor>()
                                           : std::optional<at::Tensor>(cast(value(env, nm, n).toTensor(), nm)));
                return l;
            }
            case Arg::Kind::SymInts: {
                std::vector<int64_t> v;
                for (size_t i = 0; i < a.names.size(); ++i)
                    v.push_back(a.names[i].empty() ? a.literals[i] : value(env, a.names[i], n).toInt());
                return v;
            }
            case Arg::Kind::Graph: break;
        }
        throw ModelError(p_.file + ": node '" + n.name + "' passes a subgraph to an operator");
    }

    void bind(Env& env, const std::vector<Out>& outs, std::vector<c10::IValue> results, const Node& n) const {
        if (outs.size() == 1 && results.size() > 1 && outs[0].kind == Out::Kind::Tensors) {
            c10::List<at::Tensor> l;
            for (auto& r : results) l.push_back(r.toTensor());
            results = {c10::IValue(l)};
        }
        for (size_t i = 0; i < outs.size() && i < results.size(); ++i) {
            const auto& o = outs[i];
            if (o.kind == Out::Kind::Tensor || o.kind == Out::Kind::SymInt)
                env[o.name] = results[i];
            else if (o.kind == Out::Kind::Tensors) {
                const auto l = results[i].toTensorVector();
                for (size_t k = 0; k < o.names.size() && k < l.size(); ++k) env[o.names[k]] = l[k];
            }
        }
    }

    /// A Python number where the schema takes a Tensor (x * (n / 4)): a wrapped number, as Python passes it.
    static at::Tensor wrapped_number(const c10::IValue& v) {
        auto t = v.isInt()      ? at::scalar_to_tensor(v.toInt())
                 : v.isDouble() ? at::scalar_to_tensor(v.toDouble())
                                : at::scalar_to_tensor(v.toBool());
        t.unsafeGetTensorImpl()->set_wrapped_number(true);
        return t;
    }

    /// Argument i of op node n as this pass gives it: the schema's default, the mode flag
    /// (export_mode.cpp), no dtype for an export-time dtype assertion under autocast (shape and
    /// device still asserted), a symbolic number as a wrapped number where a Tensor is taken.
    c10::IValue argument(const Node& n, size_t i, const Env& env, bool fp32) const {
        const auto& sa = n.op->schema().arguments()[i];
        if (!n.args[i]) return *sa.default_value();
        if (int(i) == n.train_flag) return train_;
        if (amp_pass_ && sa.name() == "dtype" && n.target == "torch.ops.aten._assert_tensor_metadata.default")
            return c10::IValue();
        auto v = resolve(*n.args[i], env, n, fp32);
        if (sa.type()->kind() == c10::TypeKind::TensorType && (v.isInt() || v.isDouble() || v.isBool()))
            return wrapped_number(v);
        return v;
    }

    /// Eager F.batch_norm refuses training on one value per channel (torch.nn.functional's
    /// _verify_batch_size, in Python); the ATen op does not, so the interpreter does.
    void check_batch_norm(const Node& n, const torch::jit::Stack& stack) const {
        const auto& args = n.op->schema().arguments();
        if (n.op->schema().name().find("batch_norm") == std::string::npos || stack.empty() || !stack[0].isTensor())
            return;
        for (size_t i = 0; i < args.size() && i < stack.size(); ++i) {
            if (args[i].name() != "training" || !stack[i].isBool() || !stack[i].toBool()) continue;
            const auto& x = stack[0].toTensor();
            int64_t values = x.dim() > 0 ? x.size(0) : 1;
            for (int64_t d = 2; d < x.dim(); ++d) values *= x.size(d);
            if (values == 1)
                throw ModelError("Expected more than 1 value per channel when training, got input size " +
                                 c10::str(x.sizes()) + " (node '" + n.name + "'" +
                                 (n.module.empty() ? "" : " in module '" + n.module + "'") +
                                 ", as eager F.batch_norm raises)");
        }
    }

    void op(const Node& n, Env& env, bool fp32) {
        if (n.counts_batches && !train_) {  // eager eval() does not count batches (export_mode.cpp)
            bind(env, n.outputs, {resolve(*n.args[0], env, n, false)}, n);
            return;
        }
        torch::jit::Stack stack;
        stack.reserve(n.args.size());
        for (size_t i = 0; i < n.args.size(); ++i) stack.push_back(argument(n, i, env, fp32));
        check_batch_norm(n, stack);
        auto& ctx = pass_context();
        ctx.scope.assign(1, n.module);
        if (fp32) {
            at::autocast::set_autocast_enabled(device_type_, false);
            if (ctx.regions_hit.empty() || ctx.regions_hit.back() != n.module) ctx.regions_hit.push_back(n.module);
        }
        try {
            n.op->callBoxed(stack);
        } catch (...) {
            if (fp32) at::autocast::set_autocast_enabled(device_type_, base_autocast_);
            throw;
        }
        if (fp32) at::autocast::set_autocast_enabled(device_type_, base_autocast_);
        bind(env, n.outputs, std::vector<c10::IValue>(stack.begin(), stack.end()), n);
    }

    std::vector<c10::IValue> operands(const Node& n, const Env& env, size_t from) const {
        std::vector<c10::IValue> v;
        for (size_t i = from; i < n.args.size(); ++i) v.push_back(resolve(*n.args[i], env, n, false));
        return v;
    }

    void hop(const Node& n, Env& env) {
        std::vector<c10::IValue> r;
        if (n.kind == Node::Kind::Autocast) {  // (device_type, dtype, enabled, cache_enabled, graph, *operands)
            const std::string dev = n.args.at(0)->constant.toStringRef();
            const auto dt = c10::Device(dev).type();
            const auto dtype = n.args.at(1)->constant.isNone()
                                   ? at::autocast::get_autocast_dtype(dt)
                                   : static_cast<at::ScalarType>(n.args.at(1)->constant.toInt());
            AutocastGuard region(dt, n.args.at(2)->constant.toBool(), dtype,
                                 n.args.at(3)->constant.isNone() ? true : n.args.at(3)->constant.toBool());
            const bool saved = base_autocast_;
            base_autocast_ = at::autocast::is_autocast_enabled(device_type_);
            r = run_graph(n.args.at(4)->graph, operands(n, env, 5));
            base_autocast_ = saved;
        } else {  // (enabled, graph, *operands)
            at::AutoGradMode mode(n.args.at(0)->constant.toBool());
            r = run_graph(n.args.at(1)->graph, operands(n, env, 2));
        }
        bind(env, n.outputs, std::move(r), n);
    }

    /// A symbolic operation (sizes and the arithmetic on them), with Python semantics (export_sym.cpp).
    void sym(const Node& n, Env& env) const {
        std::vector<c10::IValue> a;
        for (const auto& arg : n.args) a.push_back(resolve(*arg, env, n, false));
        try {
            env[n.outputs.at(0).name] = pt2::sym_eval(n.target, a);
        } catch (const std::exception& e) {
            throw ModelError(p_.file + ": node '" + n.name + "' (" + n.target + "): " + e.what());
        }
    }

    std::vector<c10::IValue> run_graph(int gi, const std::vector<c10::IValue>& inputs) {
        const auto& g = p_.graphs.at(size_t(gi));
        Env env;
        for (size_t i = 0; i < g.inputs.size() && i < inputs.size(); ++i) env[g.inputs[i]] = inputs[i];
        for (size_t k = 0; k < g.nodes.size(); ++k) {
            const auto& n = g.nodes[k];
            switch (n.kind) {
                case Node::Kind::Op:
                    no_cast_ = &node_no_cast_[size_t(gi)][k];
                    op(n, env, base_autocast_ && node_fp32_[size_t(gi)][k]);
                    no_cast_ = nullptr;
                    break;
                case Node::Kind::Autocast:
                case Node::Kind::GradEnabled: hop(n, env); break;
                case Node::Kind::SymOp: sym(n, env); break;
            }
            for (const auto& name : dead_[size_t(gi)][k]) env.erase(name);
        }
        std::vector<c10::IValue> out;
        for (const auto& o : g.outputs) {
            if (o.kind == Out::Kind::None)
                out.emplace_back();
            else if (o.kind == Out::Kind::Tensors) {
                c10::List<at::Tensor> l;
                for (const auto& nm : o.names) l.push_back(env.at(nm).toTensor());
                out.emplace_back(l);
            } else
                out.push_back(env.at(o.name));
        }
        return out;
    }

    pt2::Program p_;
    at::Device device_ = at::kCPU;
    at::DeviceType device_type_ = at::kCPU;
    bool train_ = false;
    bool base_autocast_ = false;
    bool amp_pass_ = false;  ///< the pass runs under autocast: export-time dtype assertions do not hold
    int output_ = 0;
    bool regions_valid_ = false;
    std::optional<std::string> region_amp_only_;
    std::vector<std::string> region_globs_;
    std::vector<std::vector<bool>> node_fp32_;
    /// Per node: the arguments produced inside its FP32 region (not cast); the running node's.
    std::vector<std::vector<std::vector<std::string>>> node_no_cast_;
    const std::vector<std::string>* no_cast_ = nullptr;
    std::vector<std::vector<std::vector<std::string>>> dead_;  ///< per graph, per node: last_uses
};

}  // namespace

std::string pt2::torch_name(at::ScalarType t) {
    switch (t) {
        case at::kDouble: return "torch.float64";
        case at::kHalf: return "torch.float16";
        case at::kBFloat16: return "torch.bfloat16";
        case at::kFloat: return "torch.float32";
        default: return c10::toString(t);
    }
}

namespace {

/// Floating probe inputs are fed as float32 (probes.cpp): a program whose signature takes another
/// floating dtype is refused before any pass, naming the input and the dtype it expects.
void check_input_dtypes(const pt2::Program& p) {
    for (const auto& u : p.user_inputs)
        if (at::isFloatingType(u.dtype) && u.dtype != at::kFloat)
            throw InputError(
                p.file, "inputs",
                "the program's input '" + u.name + "' is " + pt2::torch_name(u.dtype) +
                    " in its signature, but floating probe inputs are fed as float32: export with float32 example "
                    "inputs (autocast casts float32 only; it leaves float64 alone)");
}

}  // namespace

std::unique_ptr<Model> load_export(const std::vector<char>& bytes, const std::string& file, const std::string& output,
                                   std::shared_ptr<std::vector<char>> owner) {
    std::unique_ptr<ExportModel> m;
    try {
        m = std::make_unique<ExportModel>(pt2::read_program(bytes, file, std::move(owner)));
    } catch (const c10::Error& e) {  // LibTorch's zip reader: a record that cannot be inflated or read
        std::string what = e.what_without_backtrace();
        what = what.substr(0, what.find('\n'));
        throw InputError(file, "", "cannot be read as a torch.export archive (a damaged or hostile file): " + what);
    }
    const auto& p = m->program();
    check_input_dtypes(p);
    int chosen = -1, user = 0;
    std::vector<bool> is_tensor;       // per user output
    for (const auto& o : p.outputs) {  // default: the first tensor output
        if (o.kind != pt2::OutputSpec::Kind::User) continue;
        is_tensor.push_back(p.graphs[0].outputs.at(size_t(o.slot)).kind == pt2::Out::Kind::Tensor);
        if (chosen < 0 && is_tensor.back()) chosen = user;
        ++user;
    }
    if (chosen < 0) throw InputError(file, "outputs", "the program returns no tensor; expected scores [N, K]");
    if (!output.empty()) {
        int index = -1;
        for (size_t i = 0; i < p.output_names.size(); ++i)
            if (p.output_names[i] == output) index = int(i);
        if (index < 0 && output.find_first_not_of("0123456789") == std::string::npos && output.size() < 9 &&
            std::stoi(output) < int(p.output_names.size()))
            index = std::stoi(output);
        if (index < 0) {
            std::string names;
            for (const auto& nm : p.output_names) names += (names.empty() ? "" : ", ") + nm;
            throw InputError("", "output", "'" + output + "': no such output of " + file + "; its outputs: " + names);
        }
        if (size_t(index) < is_tensor.size() && !is_tensor[size_t(index)])
            throw InputError("", "output",
                             "'" + output + "': output '" + p.output_names.at(size_t(index)) + "' of " + file +
                                 " is not a tensor (None or a number); expected scores [N, K]");
        chosen = index;
    }
    m->set_output(chosen);
    m->output_name = p.output_names.at(size_t(chosen));
    m->info.kind = "torch.export";
    m->info.format = "torch.export schema " + p.schema_version + (p.ir.empty() ? "" : ", IR " + p.ir) +
                     (p.decomposed ? ", decomposed (core ATen)" : "");
    m->warnings = p.warnings;
    for (auto& w : pt2::unchecked_embeddings(m->program())) {  // export_inputs.cpp
        m->unchecked_ids += (m->unchecked_ids.empty() ? "" : "; ") + w;
        m->warnings.push_back(std::move(w));
    }
    return m;
}

}  // namespace ampscope::detail
