// SPDX-License-Identifier: MIT
// The torch.export interpreter: a Program (export_program.h) run node by node through
// c10::Dispatcher on the calling thread, so the pass's autocast state, the op observer
// (RecordFunction), autograd and FP32 regions apply to every node exactly as in eager PyTorch.
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

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

class ExportModel final : public Model {
public:
    explicit ExportModel(pt2::Program p) : p_(std::move(p)) {
        for (auto& [fqn, t] : p_.parameters) t.requires_grad_(true);
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
                             "the program takes " + std::to_string(p_.user_inputs.size()) + " inputs, given " + std::to_string(in.size()));
        const int64_t n = in.empty() || in[0].dim() == 0 ? 0 : in[0].size(0);
        if (fixed_batch <= 0 || n == fixed_batch) return run(in);
        if (train_)
            throw InputError(p_.file, "batch",
                             "the program was exported with a static batch of " + std::to_string(fixed_batch) + " and a batch of " +
                                 std::to_string(n) +
                                 " was given: in train mode batch "
                                 "statistics would change with padding; export with a dynamic batch dimension "
                                 "(dynamic_shapes) or use --batch-size " +
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
                if (e - b < fixed_batch) s = at::cat({s, s.slice(0, e - b - 1, e - b).expand(pad_shape(s, fixed_batch - (e - b)))});
                part.push_back(s);
            }
            auto y = run(part);
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
                const bool rg = t.requires_grad();
                t = t.detach().to(d);
                if (rg) t.requires_grad_(true);
            }
    }
    std::vector<std::pair<std::string, at::Tensor>> named_state() override {
        std::vector<std::pair<std::string, at::Tensor>> out;
        for (const auto& f : p_.parameter_order) out.emplace_back(f, p_.parameters.at(f));
        for (const auto& f : p_.buffer_order) out.emplace_back(f, p_.buffers.at(f));
        return out;
    }
    std::vector<at::Tensor> parameters() override {
        std::vector<at::Tensor> out;
        for (const auto& f : p_.parameter_order) out.push_back(p_.parameters.at(f));
        return out;
    }
    std::vector<std::string> module_paths() override { return p_.modules; }
    bool has_module_scopes() const override { return true; }

    const pt2::Program& program() const { return p_; }
    void set_output(int index) { output_ = index; }

private:
    /// One run of the root graph on a batch; returns the chosen user output as scores.
    at::Tensor run(const std::vector<at::Tensor>& in) {
        auto& ctx = pass_context();
        base_autocast_ = at::autocast::is_autocast_enabled(ctx.device_type);
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
                        throw ModelError("output '" + p_.output_names.at(size_t(u)) + "' of " + p_.file + " is not a tensor");
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
        for (size_t g = 0; g < p_.graphs.size(); ++g)
            for (const auto& n : p_.graphs[g].nodes) {
                bool in = false, inside_amp = !amp_only || within(n.module, *amp_only);
                for (const auto& m : n.module_chain) {
                    in = in || (!m.empty() && matches_any(m, globs));
                    inside_amp = inside_amp || m == *amp_only;
                }
                node_fp32_[g].push_back(in || !inside_amp);
            }
    }

    c10::IValue value(const Env& env, const std::string& name, const Node& n) const {
        const auto it = env.find(name);
        if (it == env.end()) throw ModelError(p_.file + ": node '" + n.name + "' reads '" + name + "', which no earlier node produced");
        return it->second;
    }

    c10::IValue resolve(const Arg& a, const Env& env, const Node& n, bool fp32) const {
        auto cast = [fp32](at::Tensor t) {
            return fp32 && t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16) ? t.to(at::kFloat) : t;
        };
        switch (a.kind) {
            case Arg::Kind::Constant: return a.constant;
            case Arg::Kind::Device: return c10::IValue(device_);
            case Arg::Kind::Tensor: {
                auto v = value(env, a.name, n);
                return v.isTensor() ? c10::IValue(cast(v.toTensor())) : v;
            }
            case Arg::Kind::SymInt: return value(env, a.name, n);
            case Arg::Kind::Tensors: {
                c10::List<at::Tensor> l;
                for (const auto& nm : a.names) l.push_back(cast(value(env, nm, n).toTensor()));
                return l;
            }
            case Arg::Kind::OptionalTensors: {
                c10::List<std::optional<at::Tensor>> l;
                for (const auto& nm : a.names)
                    l.push_back(nm.empty() ? std::optional<at::Tensor>() : std::optional<at::Tensor>(cast(value(env, nm, n).toTensor())));
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

    void op(const Node& n, Env& env, bool fp32) {
        torch::jit::Stack stack;
        stack.reserve(n.args.size());
        const auto& schema = n.op->schema();
        for (size_t i = 0; i < n.args.size(); ++i) {
            if (!n.args[i])
                stack.push_back(*schema.arguments()[i].default_value());
            else if (int(i) == n.train_flag)
                stack.emplace_back(train_);
            else
                stack.push_back(resolve(*n.args[i], env, n, fp32));
        }
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
            const auto dtype = n.args.at(1)->constant.isNone() ? at::autocast::get_autocast_dtype(dt)
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

    void sym(const Node& n, Env& env) const {
        std::vector<int64_t> a;
        for (const auto& arg : n.args) {
            const auto v = resolve(*arg, env, n, false);
            a.push_back(v.isInt() ? v.toInt() : v.isBool() ? int64_t(v.toBool()) : int64_t(v.toDouble()));
        }
        const std::string f = n.target.substr(n.target.find('.') + 1);
        auto need = [&](size_t k) {
            if (a.size() < k) throw ModelError(p_.file + ": node '" + n.name + "' (" + n.target + ") has too few arguments");
        };
        int64_t r = 0;
        need(1);
        if (f == "neg")
            r = -a[0];
        else {
            need(2);
            if (f == "add")
                r = a[0] + a[1];
            else if (f == "sub")
                r = a[0] - a[1];
            else if (f == "mul")
                r = a[0] * a[1];
            else if ((f == "floordiv" || f == "mod") && a[1] == 0)
                throw ModelError(p_.file + ": node '" + n.name + "' (" + n.target + ") divides by zero");
            else if (f == "floordiv")
                r = (a[0] - (((a[0] % a[1]) + a[1]) % a[1])) / a[1];
            else if (f == "mod")
                r = ((a[0] % a[1]) + a[1]) % a[1];
            else if (f == "sym_max")
                r = std::max(a[0], a[1]);
            else if (f == "sym_min")
                r = std::min(a[0], a[1]);
            else if (f == "eq")
                r = a[0] == a[1];
            else if (f == "ne")
                r = a[0] != a[1];
            else if (f == "lt")
                r = a[0] < a[1];
            else if (f == "le")
                r = a[0] <= a[1];
            else if (f == "gt")
                r = a[0] > a[1];
            else if (f == "ge")
                r = a[0] >= a[1];
            else
                throw ModelError(p_.file + ": symbolic operation '" + n.target + "' (node '" + n.name + "') is not supported");
        }
        if (!n.outputs.empty()) env[n.outputs[0].name] = r;
    }

    std::vector<c10::IValue> run_graph(int gi, const std::vector<c10::IValue>& inputs) {
        const auto& g = p_.graphs.at(size_t(gi));
        Env env;
        for (size_t i = 0; i < g.inputs.size() && i < inputs.size(); ++i) env[g.inputs[i]] = inputs[i];
        for (size_t k = 0; k < g.nodes.size(); ++k) {
            const auto& n = g.nodes[k];
            switch (n.kind) {
                case Node::Kind::Op: op(n, env, base_autocast_ && node_fp32_[size_t(gi)][k]); break;
                case Node::Kind::Autocast:
                case Node::Kind::GradEnabled: hop(n, env); break;
                case Node::Kind::SymOp: sym(n, env); break;
            }
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
    int output_ = 0;
    bool regions_valid_ = false;
    std::optional<std::string> region_amp_only_;
    std::vector<std::string> region_globs_;
    std::vector<std::vector<bool>> node_fp32_;
};

}  // namespace

std::unique_ptr<Model> load_export(const std::vector<char>& bytes, const std::string& file, const std::string& output) {
    auto m = std::make_unique<ExportModel>(pt2::read_program(bytes, file));
    const auto& p = m->program();
    int chosen = -1, user = 0;
    for (const auto& o : p.outputs) {  // default: the first tensor output
        if (o.kind != pt2::OutputSpec::Kind::User) continue;
        if (chosen < 0 && p.graphs[0].outputs.at(size_t(o.slot)).kind == pt2::Out::Kind::Tensor) chosen = user;
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
            throw InputError("--output", output, "no such output of " + file + "; its outputs: " + names);
        }
        chosen = index;
    }
    m->set_output(chosen);
    m->output_name = p.output_names.at(size_t(chosen));
    m->info.kind = "torch.export";
    m->info.format =
        "torch.export schema " + p.schema_version + (p.ir.empty() ? "" : ", IR " + p.ir) + (p.decomposed ? ", decomposed (core ATen)" : "");
    m->warnings = p.warnings;
    return m;
}

}  // namespace ampscope::detail
