// SPDX-License-Identifier: MIT
// TorchScript files: loaded, inlined and instrumented so that module scopes and FP32 regions
// work per node, as they do for the demo models.
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/library.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <fnmatch.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <unordered_map>
#include <filesystem>
#include <iostream>
#include <fstream>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/hash.h"
#include "model/model.h"
#include "precision/precision.h"

namespace ampscope::detail {
namespace {

// ---- TorchScript: module scopes and FP32 regions through an instrumented, inlined graph -----
// The forward graph is inlined (which records, per node, the chain of module instances it
// came from) and before every ATen node an `ampscope::enter_scope(id)` call is inserted: it
// sets the current module path for the op observer and, inside an FP32 region, turns
// autocast off for the node that follows. Floating inputs entering a region pass through
// `ampscope::to_fp32`. The ops themselves, their order and their kernels are unchanged.

/// An instrumented forward graph. Two per model at most: one for observation only, and one
/// whose every tensor input passes through `ampscope::to_fp32(x, id)`, which casts only when the
/// running policy puts node `id` in FP32, so that one graph serves every set of FP32 regions
/// (the advisor checks hundreds of sets; a graph per set would be built and kept for each).
struct ScriptPlan {
    std::shared_ptr<torch::jit::Graph> graph;
    std::unique_ptr<torch::jit::Code> code;
    std::vector<std::string> node_module;  ///< per scope id
    /// Per cast: the module path of the node that produced the cast value ("" for the root);
    /// a value made inside the consumer's FP32 region is not cast (the region casts only the
    /// kept module's inputs, as torch.autocast(enabled=False) plus `.float()` on them does).
    std::vector<std::string> producer_module;
};

struct ScriptRun {
    const ScriptPlan* plan = nullptr;
    const std::vector<bool>* fp32 = nullptr;  ///< per scope id under the running policy; null: none
    /// Per scope id: the innermost kept module around it (nullopt: FP32 only because outside the
    /// advisor's amp_only module, where every half input is cast).
    const std::vector<std::optional<std::string>>* region = nullptr;
    bool base_autocast = false;
    bool in_fp32(int64_t id) const { return fp32 && id >= 0 && size_t(id) < fp32->size() && (*fp32)[size_t(id)]; }
};
thread_local ScriptRun tls_script_run;

void enter_scope(int64_t id) {
    const auto& run = tls_script_run;
    if (!run.plan || id < 0 || size_t(id) >= run.plan->node_module.size()) return;
    auto& ctx = pass_context();
    ctx.scope.assign(1, run.plan->node_module[size_t(id)]);
    const bool fp32 = run.in_fp32(id);
    at::autocast::set_autocast_enabled(ctx.device_type, run.base_autocast && !fp32);
    if (fp32 && run.base_autocast &&
        (ctx.regions_hit.empty() || ctx.regions_hit.back() != run.plan->node_module[size_t(id)]))
        ctx.regions_hit.push_back(run.plan->node_module[size_t(id)]);
}

at::Tensor to_fp32(const at::Tensor& x, int64_t id, int64_t producer) {
    const auto& run = tls_script_run;
    if (!run.in_fp32(id) || !x.defined() || !x.is_floating_point() || x.scalar_type() == at::kFloat) return x;
    const auto& region = run.region ? (*run.region)[size_t(id)] : std::nullopt;
    if (region && producer >= 0 && size_t(producer) < run.plan->producer_module.size() &&
        within(run.plan->producer_module[size_t(producer)], *region))
        return x;  // made inside the kept module: not one of its inputs
    return x.to(at::kFloat);
}

TORCH_LIBRARY(ampscope, m) {
    m.def(torch::schema("ampscope::enter_scope(int id) -> ()", c10::AliasAnalysisKind::CONSERVATIVE), &enter_scope);
    m.def(torch::schema("ampscope::to_fp32(Tensor x, int id, int producer) -> Tensor",
                        c10::AliasAnalysisKind::CONSERVATIVE),
          &to_fp32);
}

using NodePaths = std::unordered_map<torch::jit::Node*, std::string>;

/// Dotted path of a module value: the chain of prim::GetAttr from the graph's `self`.
std::optional<std::string> receiver_path(torch::jit::Value* v, torch::jit::Value* root) {
    if (v == root) return std::string();
    torch::jit::Node* n = v->node();
    if (n->kind() != torch::jit::prim::GetAttr) return std::nullopt;
    auto base = receiver_path(n->input(0), root);
    if (!base) return std::nullopt;
    const auto name = n->s(torch::jit::attr::name);
    return base->empty() ? name : *base + "." + name;
}

torch::jit::Node* find_call(torch::jit::Block* b) {
    for (auto* n : b->nodes()) {
        if (n->kind() == torch::jit::prim::CallMethod || n->kind() == torch::jit::prim::CallFunction) return n;
        for (auto* sub : n->blocks())
            if (auto* c = find_call(sub)) return c;
    }
    return nullptr;
}

void tag(torch::jit::Node* n, const std::string& path, NodePaths& paths) {
    paths.emplace(n, path);
    for (auto* sub : n->blocks())
        for (auto* m : sub->nodes()) tag(m, path, paths);
}

/// Inlines every method and function call, recording for each node the dotted path of the
/// module it came from (torch::jit::Inline records only the last attribute name, "0" for
/// blocks.0, so paths are rebuilt here from the receivers' GetAttr chains).
NodePaths inline_with_paths(torch::jit::Graph& g) {
    using namespace torch::jit;
    NodePaths paths;
    for (auto* n : g.block()->nodes()) tag(n, "", paths);
    Value* root = g.inputs().at(0);
    while (Node* call = find_call(g.block())) {
        const std::string here = paths.count(call) ? paths[call] : std::string();
        GraphFunction* fn = nullptr;
        std::string path = here;
        if (call->kind() == prim::CallMethod) {
            auto cls = call->input(0)->type()->expect<c10::ClassType>();
            fn = &toGraphFunction(cls->getMethod(call->s(attr::name)));
            path = receiver_path(call->input(0), root).value_or(here);
        } else {
            auto ft = call->input(0)->type()->expect<c10::FunctionType>();
            fn = &toGraphFunction(*ft->function());
            call->removeInput(0);  // the function constant is not an argument of the callee
        }
        Node* before = call->prev();
        Node* after = call->next();
        inlineCallTo(call, fn);
        for (Node* n = before->next(); n != after; n = n->next()) tag(n, path, paths);
    }
    return paths;
}

void instrument_block(torch::jit::Block* block, ScriptPlan& plan, bool casts, const NodePaths& paths) {
    using namespace torch::jit;
    for (auto it = block->nodes().begin(); it != block->nodes().end(); ++it) {
        Node* n = *it;
        for (torch::jit::Block* sub : n->blocks()) instrument_block(sub, plan, casts, paths);
        if (!n->kind().is_aten()) continue;
        const auto found = paths.find(n);
        const std::string path = found == paths.end() ? std::string() : found->second;
        const int64_t id = int64_t(plan.node_module.size());
        plan.node_module.push_back(path);
        WithInsertPoint guard(n);
        Graph* g = block->owningGraph();
        Node* call = g->create(Symbol::fromQualString("ampscope::enter_scope"), {g->insertConstant(id)}, 0);
        g->insertNode(call);
        if (casts) {
            Value* id_value = g->insertConstant(id);
            for (size_t i = 0; i < n->inputs().size(); ++i) {
                Value* v = n->input(i);
                if (v->type()->kind() != c10::TypeKind::TensorType) continue;
                int64_t producer = -1;  // a graph input enters every region from outside
                if (const auto made = paths.find(v->node()); made != paths.end() && v->node()->kind() != prim::Param) {
                    producer = int64_t(plan.producer_module.size());
                    plan.producer_module.push_back(made->second);
                }
                Node* cast = g->create(Symbol::fromQualString("ampscope::to_fp32"),
                                       {v, id_value, g->insertConstant(producer)}, 1);
                cast->output()->setType(v->type());
                g->insertNode(cast);
                n->replaceInput(i, cast->output());
            }
        }
    }
}

}  // namespace

void move_graph_constants(torch::jit::Module& m, const at::Device& d) {
    std::vector<torch::jit::Block*> work;
    for (const auto& sub : m.modules())
        for (const auto& method : sub.get_methods())
            work.push_back(torch::jit::toGraphFunction(method.function()).graph()->block());
    while (!work.empty()) {
        auto* b = work.back();
        work.pop_back();
        for (auto* n : b->nodes()) {
            if (n->kind() == c10::prim::Constant && n->hasAttribute(c10::attr::value) &&
                n->kindOf(c10::attr::value) == torch::jit::AttributeKind::t) {
                const auto t = n->t(c10::attr::value);
                if (t.device() != d) n->t_(c10::attr::value, t.to(d));
            }
            for (auto* inner : n->blocks()) work.push_back(inner);
        }
    }
}

namespace {

class ScriptModel final : public Model {
public:
    explicit ScriptModel(torch::jit::Module m) : m_(std::move(m)) {}
    at::Tensor forward(const std::vector<at::Tensor>& in) override {
        std::vector<torch::jit::IValue> args(in.begin(), in.end());
        torch::jit::IValue out;
        const auto& ctx = pass_context();
        // instrumented for observation, FP32 regions, and the module scopes of an FP8 pass's BF16
        // list or of fp8-delayed training's tensors
        if (ctx.observing || ctx.module_names || !ctx.keep_fp32.empty() || ctx.amp_only || !ctx.keep_bf16.empty()) {
            const bool regions = !ctx.keep_fp32.empty() || ctx.amp_only;
            const ScriptPlan& plan = plan_for(regions);
            const std::vector<bool>* fp32 = regions ? &policy_for(plan, ctx.keep_fp32, ctx.amp_only) : nullptr;
            const auto* region = regions ? &region_ : nullptr;
            torch::jit::Stack stack;
            stack.emplace_back(m_._ivalue());
            for (auto& a : args) stack.push_back(a);
            ScriptRun saved = tls_script_run;
            tls_script_run = {&plan, fp32, region, at::autocast::is_autocast_enabled(ctx.device_type)};
            struct Restore {
                ScriptRun saved;
                ~Restore() {
                    auto& c = pass_context();
                    at::autocast::set_autocast_enabled(c.device_type, tls_script_run.base_autocast);
                    c.scope.clear();
                    tls_script_run = saved;
                }
            } restore{saved};
            torch::jit::InterpreterState(*plan.code).run(stack);
            out = stack.back();
        } else {
            out = m_.forward(args);
        }
        if (out.isTensor()) return out.toTensor();
        if (out.isTuple() && !out.toTupleRef().elements().empty() && out.toTupleRef().elements()[0].isTensor())
            return out.toTupleRef().elements()[0].toTensor();
        const std::string found =
            out.isGenericDict() ? "a dict"
            : out.isList()      ? "a list"
            : out.isNone()      ? "None"
            : out.isTuple()     ? (out.toTupleRef().elements().empty()
                                       ? std::string("an empty tuple")
                                       : "a tuple whose first element is " + out.toTupleRef().elements()[0].tagKind())
                                : out.tagKind();
        throw ModelError("the model " + info.source + " returned " + found +
                         " from forward; expected a Tensor [N, scores] (or a tuple whose first element is one)");
    }
    void set_train(bool t) override { m_.train(t); }
    void to_device(const at::Device& d) override {
        m_.to(d);
        move_graph_constants(m_, d);
        plans_[0].reset();  // the observation plans copy the graph, constants included
        plans_[1].reset();
    }
    std::vector<std::pair<std::string, at::Tensor>> named_state() override {
        std::vector<std::pair<std::string, at::Tensor>> out;
        for (const auto& p : m_.named_parameters(true)) out.emplace_back(p.name, p.value);
        for (const auto& b : m_.named_buffers(true)) out.emplace_back(b.name, b.value);
        return out;
    }
    std::vector<at::Tensor> parameters() override {
        std::vector<at::Tensor> out;
        for (const auto& p : m_.parameters(true)) out.push_back(p);
        return out;
    }
    std::vector<std::string> module_paths() override {
        std::vector<std::string> out;
        for (const auto& it : m_.named_modules()) out.push_back(it.name);
        return out;
    }
    std::map<std::string, std::string> module_types() const override {
        std::map<std::string, std::string> out;  // __torch__.torch.nn.modules.normalization.LayerNorm -> torch.nn....
        for (const auto& it : m_.named_modules()) {
            auto n = it.value.type()->name() ? it.value.type()->name()->qualifiedName() : std::string();
            if (n.rfind("__torch__.", 0) == 0) n = n.substr(10);
            out.emplace(it.name, n);
        }
        return out;
    }
    bool has_module_scopes() const override { return true; }
    torch::jit::Module& module() { return m_; }

private:
    /// The observation graph, or the one with conditional casts for FP32 regions.
    const ScriptPlan& plan_for(bool casts) {
        auto& slot = plans_[casts ? 1 : 0];
        if (!slot) {
            slot = std::make_unique<ScriptPlan>();
            auto& fn = torch::jit::toGraphFunction(m_.get_method("forward").function());
            slot->graph = fn.graph()->copy();
            const auto paths = inline_with_paths(*slot->graph);
            instrument_block(slot->graph->block(), *slot, casts, paths);
            if (std::getenv("AMPSCOPE_DUMP_GRAPH")) std::cerr << *slot->graph << std::endl;
            slot->code = std::make_unique<torch::jit::Code>(slot->graph, "forward");
        }
        return *slot;
    }
    /// Which nodes of `plan` run in FP32 under a policy (the last one is kept: a run's passes
    /// share it, the advisor's sets change it every pass).
    const std::vector<bool>& policy_for(const ScriptPlan& plan, const std::vector<std::string>& keep_fp32,
                                        const std::optional<std::string>& amp_only) {
        if (policy_keep_ != keep_fp32 || policy_amp_only_ != amp_only || policy_.size() != plan.node_module.size()) {
            policy_keep_ = keep_fp32;
            policy_amp_only_ = amp_only;
            policy_.clear();
            region_.clear();
            for (const auto& path : plan.node_module) {
                policy_.push_back(runs_fp32(path, keep_fp32, amp_only));
                region_.push_back(fp32_region_of(path, keep_fp32));
            }
        }
        return policy_;
    }
    torch::jit::Module m_;
    std::unique_ptr<ScriptPlan> plans_[2];
    std::vector<std::string> policy_keep_;
    std::optional<std::string> policy_amp_only_;
    std::vector<bool> policy_;
    std::vector<std::optional<std::string>> region_;
};

}  // namespace

std::unique_ptr<Model> load_torchscript(const std::string& source) {
    // The optimizing graph executor bakes the autocast state of its first optimized call
    // into the cached plan (its JIT autocast pass), so later passes with another precision
    // would not apply their own policy. Plain execution applies the per-op dispatcher
    // policy on every call, exactly as eager torch.autocast does.
    torch::jit::setGraphExecutorOptimize(false);
    torch::jit::Module m;
    try {
        m = torch::jit::load(source, torch::kCPU);
    } catch (const std::exception& e) {
        std::string what = e.what();  // its first line that says something (some start with a blank one)
        what.erase(0, std::min(what.size(), what.find_first_not_of(" \t\r\n")));
        std::string line = what.substr(0, what.find('\n'));
        if (!line.empty() && line.back() == ':' && line.size() < what.size()) {  // its reason on the next line
            const auto next = what.find_first_not_of(" \t\r\n", line.size());
            if (next != std::string::npos) line += " " + what.substr(next, what.find('\n', next) - next);
        }
        what = line.empty() ? "LibTorch gave no reason" : line;
        throw InputError(source, "model", "not a loadable TorchScript file (expected torch.jit.save output): " + what);
    }
    auto sm = std::make_unique<ScriptModel>(std::move(m));
    if (!sm->module().find_method("forward"))
        throw InputError(source, "model", "the TorchScript module has no forward method");
    // The first argument of a method is the module, whatever its name (`def forward(s, x)`).
    const auto& args = sm->module().get_method("forward").function().getSchema().arguments();
    for (size_t i = 0; i < args.size(); ++i) {
        const auto& arg = args[i];
        if (i == 0 && arg.type()->kind() == c10::TypeKind::ClassType) continue;
        sm->input_names.push_back(arg.name());
        if (!arg.default_value()) sm->required_inputs = sm->input_names.size();
    }
    sm->info.kind = "torchscript";
    return sm;
}

}  // namespace ampscope::detail
