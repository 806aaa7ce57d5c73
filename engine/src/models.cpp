// SPDX-License-Identifier: MIT
// Built-in demo zoo (torch::nn, seeded weights) and the TorchScript loader.
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/library.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <fnmatch.h>

#include <cstdlib>
#include <optional>
#include <unordered_map>
#include <filesystem>
#include <iostream>
#include <fstream>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/hash.h"
#include "internal.h"

namespace ampscope {

std::vector<std::string> demo_models() { return {"transformer", "mlp", "regressor"}; }

namespace detail {

bool matches_any(const std::string& path, const std::vector<std::string>& globs) {
    for (const auto& g : globs)
        if (fnmatch(g.c_str(), path.c_str(), 0) == 0) return true;
    return false;
}

void check_fp32_regions(Model& model, const std::vector<std::string>& globs) {
    if (globs.empty()) return;
    if (!model.has_module_scopes()) throw InputError("--keep-fp32", "", "this model has no module scopes to keep in FP32");
    std::string listing;  // the module paths that exist, for the message
    size_t shown = 0;
    for (const auto& m : model.info.modules)
        if (!m.empty() && shown++ < 40) listing += (listing.empty() ? "" : ", ") + m;
    if (shown > 40) listing += ", ... (" + std::to_string(shown) + " modules)";
    for (const auto& g : globs) {
        if (g.empty())
            throw InputError("--keep-fp32", "", "an empty glob; expected a module path or glob such as 'blocks.1.*'. Modules of " +
                                                    model.info.source + ": " + listing);
        if (matches_any("", {g}))
            throw InputError("--keep-fp32", "", "'" + g + "' matches the root module, which would run the whole model in FP32; "
                                                          "expected submodules. Modules of " + model.info.source + ": " + listing);
        bool hit = false;
        for (const auto& m : model.info.modules) hit = hit || (!m.empty() && matches_any(m, {g}));
        if (!hit)
            throw InputError("--keep-fp32", "", "'" + g + "' matches no module of " + model.info.source + "; modules: " + listing);
    }
}

PassContext& pass_context() {
    thread_local PassContext ctx;
    return ctx;
}

ModuleScope::ModuleScope(const std::string& path) {
    auto& ctx = pass_context();
    ctx.scope.push_back(path);
    prev_enabled_ = at::autocast::is_autocast_enabled(ctx.device_type);
    if (prev_enabled_ && matches_any(path, ctx.keep_fp32)) {
        fp32_ = true;
        at::autocast::set_autocast_enabled(ctx.device_type, false);
        ctx.regions_hit.push_back(path);
    }
}

ModuleScope::~ModuleScope() {
    auto& ctx = pass_context();
    if (fp32_) at::autocast::set_autocast_enabled(ctx.device_type, prev_enabled_);
    ctx.scope.pop_back();
}

at::Tensor scoped(const std::string& path, const at::Tensor& x,
                  const std::function<at::Tensor(const at::Tensor&)>& fn) {
    ModuleScope s(path);
    if (s.fp32() && x.is_floating_point() && x.scalar_type() != at::kFloat)
        return fn(x.to(at::kFloat));
    return fn(x);
}

namespace {

namespace nn = torch::nn;

// ---- demo:transformer -------------------------------------------------------------------
// A small pre-norm encoder classifier over [N, T=8, F=16] continuous features.
// named_modules(): embed, blocks.{0,1}.{norm1,attn.qkv,attn.proj,norm2,mlp.up,mlp.act,
// mlp.down}, norm, head.
constexpr int64_t kTokens = 8, kFeatures = 16, kDim = 32, kHeads = 4, kHidden = 64, kClasses = 4;

struct AttentionImpl : nn::Module {
    std::string path;
    nn::Linear qkv{nullptr}, proj{nullptr};
    explicit AttentionImpl(std::string p) : path(std::move(p)) {
        qkv = register_module("qkv", nn::Linear(kDim, 3 * kDim));
        proj = register_module("proj", nn::Linear(kDim, kDim));
    }
    at::Tensor forward(const at::Tensor& x) {
        return scoped(path, x, [&](const at::Tensor& in) {
            const auto n = in.size(0), t = in.size(1);
            auto y = scoped(path + ".qkv", in, [&](const at::Tensor& v) { return qkv->forward(v); });
            y = y.view({n, t, 3, kHeads, kDim / kHeads}).permute({2, 0, 3, 1, 4});
            auto q = y[0], k = y[1], v = y[2];  // [N, H, T, d]
            auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(kDim / kHeads)));
            att = torch::softmax(att, -1);
            auto o = torch::matmul(att, v).transpose(1, 2).reshape({n, t, kDim});
            return scoped(path + ".proj", o, [&](const at::Tensor& v2) { return proj->forward(v2); });
        });
    }
};
TORCH_MODULE(Attention);

struct MlpImpl : nn::Module {
    std::string path;
    nn::Linear up{nullptr}, down{nullptr};
    nn::GELU act{nullptr};
    explicit MlpImpl(std::string p) : path(std::move(p)) {
        up = register_module("up", nn::Linear(kDim, kHidden));
        act = register_module("act", nn::GELU());
        down = register_module("down", nn::Linear(kHidden, kDim));
    }
    at::Tensor forward(const at::Tensor& x) {
        return scoped(path, x, [&](const at::Tensor& in) {
            auto h = scoped(path + ".up", in, [&](const at::Tensor& v) { return up->forward(v); });
            h = scoped(path + ".act", h, [&](const at::Tensor& v) { return act->forward(v); });
            return scoped(path + ".down", h, [&](const at::Tensor& v) { return down->forward(v); });
        });
    }
};
TORCH_MODULE(Mlp);

struct BlockImpl : nn::Module {
    std::string path;
    nn::LayerNorm norm1{nullptr}, norm2{nullptr};
    Attention attn{nullptr};
    Mlp mlp{nullptr};
    nn::Dropout drop{nullptr};
    explicit BlockImpl(std::string p) : path(std::move(p)) {
        norm1 = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({kDim})));
        attn = register_module("attn", Attention(path + ".attn"));
        norm2 = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({kDim})));
        mlp = register_module("mlp", Mlp(path + ".mlp"));
        drop = register_module("drop", nn::Dropout(0.1));
    }
    at::Tensor forward(const at::Tensor& x) {
        return scoped(path, x, [&](const at::Tensor& in) {
            auto h = scoped(path + ".norm1", in, [&](const at::Tensor& v) { return norm1->forward(v); });
            auto y = in + scoped(path + ".drop", attn->forward(h), [&](const at::Tensor& v) { return drop->forward(v); });
            h = scoped(path + ".norm2", y, [&](const at::Tensor& v) { return norm2->forward(v); });
            return y + scoped(path + ".drop", mlp->forward(h), [&](const at::Tensor& v) { return drop->forward(v); });
        });
    }
};
TORCH_MODULE(Block);

struct TransformerImpl : nn::Module {
    nn::Linear embed{nullptr}, head{nullptr};
    nn::ModuleList blocks{nullptr};
    std::vector<Block> block_list;
    nn::LayerNorm norm{nullptr};
    TransformerImpl() {
        embed = register_module("embed", nn::Linear(kFeatures, kDim));
        blocks = register_module("blocks", nn::ModuleList());
        for (int i = 0; i < 2; ++i) {
            block_list.push_back(Block("blocks." + std::to_string(i)));
            blocks->push_back(block_list.back());
        }
        norm = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({kDim})));
        head = register_module("head", nn::Linear(kDim, kClasses));
    }
    at::Tensor forward(const at::Tensor& x) {
        return scoped("", x, [&](const at::Tensor& in) {
            auto h = scoped("embed", in, [&](const at::Tensor& v) { return embed->forward(v); });
            for (auto& b : block_list) h = b->forward(h);
            h = scoped("norm", h, [&](const at::Tensor& v) { return norm->forward(v); });
            h = h.mean(1);
            return scoped("head", h, [&](const at::Tensor& v) { return head->forward(v); });
        });
    }
};
TORCH_MODULE(Transformer);

// ---- demo:mlp: [N, 32] -> 10 classes ------------------------------------------------------
struct DemoMlpImpl : nn::Module {
    nn::Linear fc1{nullptr}, fc2{nullptr}, out{nullptr};
    nn::ReLU act1{nullptr}, act2{nullptr};
    DemoMlpImpl() {
        fc1 = register_module("fc1", nn::Linear(32, 64));
        act1 = register_module("act1", nn::ReLU());
        fc2 = register_module("fc2", nn::Linear(64, 64));
        act2 = register_module("act2", nn::ReLU());
        out = register_module("out", nn::Linear(64, 10));
    }
    at::Tensor forward(const at::Tensor& x) {
        return scoped("", x, [&](const at::Tensor& in) {
            auto h = scoped("fc1", in, [&](const at::Tensor& v) { return fc1->forward(v); });
            h = scoped("act1", h, [&](const at::Tensor& v) { return act1->forward(v); });
            h = scoped("fc2", h, [&](const at::Tensor& v) { return fc2->forward(v); });
            h = scoped("act2", h, [&](const at::Tensor& v) { return act2->forward(v); });
            return scoped("out", h, [&](const at::Tensor& v) { return out->forward(v); });
        });
    }
};
TORCH_MODULE(DemoMlp);

// ---- demo:regressor: [N, 8] -> 1 ------------------------------------------------------------
struct RegressorImpl : nn::Module {
    nn::Linear fc1{nullptr}, fc2{nullptr}, out{nullptr};
    nn::Tanh act1{nullptr}, act2{nullptr};
    RegressorImpl() {
        fc1 = register_module("fc1", nn::Linear(8, 32));
        act1 = register_module("act1", nn::Tanh());
        fc2 = register_module("fc2", nn::Linear(32, 32));
        act2 = register_module("act2", nn::Tanh());
        out = register_module("out", nn::Linear(32, 1));
    }
    at::Tensor forward(const at::Tensor& x) {
        return scoped("", x, [&](const at::Tensor& in) {
            auto h = scoped("fc1", in, [&](const at::Tensor& v) { return fc1->forward(v); });
            h = scoped("act1", h, [&](const at::Tensor& v) { return act1->forward(v); });
            h = scoped("fc2", h, [&](const at::Tensor& v) { return fc2->forward(v); });
            h = scoped("act2", h, [&](const at::Tensor& v) { return act2->forward(v); });
            return scoped("out", h, [&](const at::Tensor& v) { return out->forward(v); });
        });
    }
};
TORCH_MODULE(Regressor);

std::string weights_hash(const std::vector<std::pair<std::string, at::Tensor>>& state) {
    Sha256 h;
    for (const auto& [name, t] : state) {
        auto c = t.detach().to(at::kCPU).contiguous();
        h.update(name);
        h.update(std::string(c10::toString(c.scalar_type())));
        for (auto s : c.sizes()) h.update(&s, sizeof s);
        h.update(c.data_ptr(), c.nbytes());
    }
    return h.hex();
}

template <class M>
class DemoModel final : public Model {
public:
    explicit DemoModel(M m) : m_(std::move(m)) {}
    at::Tensor forward(const std::vector<at::Tensor>& in) override { return m_->forward(in.at(0)); }
    void set_train(bool t) override { m_->train(t); }
    void to_device(const at::Device& d) override { m_->to(d); }
    std::vector<std::pair<std::string, at::Tensor>> named_state() override {
        std::vector<std::pair<std::string, at::Tensor>> out;
        for (const auto& p : m_->named_parameters()) out.emplace_back(p.key(), p.value());
        for (const auto& b : m_->named_buffers()) out.emplace_back(b.key(), b.value());
        return out;
    }
    std::vector<at::Tensor> parameters() override { return m_->parameters(); }
    std::vector<std::string> module_paths() override {
        std::vector<std::string> out;
        for (const auto& it : m_->named_modules()) out.push_back(it.key());
        return out;
    }
    bool has_module_scopes() const override { return true; }

private:
    M m_;
};

// ---- TorchScript: module scopes and FP32 regions through an instrumented, inlined graph -----
// The forward graph is inlined (which records, per node, the chain of module instances it
// came from) and before every ATen node an `ampscope::enter_scope(id)` call is inserted: it
// sets the current module path for the op observer and, inside an FP32 region, turns
// autocast off for the node that follows. Floating inputs entering a region pass through
// `ampscope::to_fp32`. The ops themselves, their order and their kernels are unchanged.

struct ScriptPlan {
    std::shared_ptr<torch::jit::Graph> graph;
    std::unique_ptr<torch::jit::Code> code;
    std::vector<std::string> node_module;  ///< per scope id
    std::vector<bool> node_fp32;           ///< per scope id
};

struct ScriptRun {
    const ScriptPlan* plan = nullptr;
    bool base_autocast = false;
};
thread_local ScriptRun tls_script_run;

void enter_scope(int64_t id) {
    const auto& run = tls_script_run;
    if (!run.plan || id < 0 || size_t(id) >= run.plan->node_module.size()) return;
    auto& ctx = pass_context();
    ctx.scope.assign(1, run.plan->node_module[size_t(id)]);
    const bool fp32 = run.plan->node_fp32[size_t(id)];
    at::autocast::set_autocast_enabled(ctx.device_type, run.base_autocast && !fp32);
    if (fp32 && run.base_autocast &&
        (ctx.regions_hit.empty() || ctx.regions_hit.back() != run.plan->node_module[size_t(id)]))
        ctx.regions_hit.push_back(run.plan->node_module[size_t(id)]);
}

at::Tensor to_fp32(const at::Tensor& x) {
    return x.defined() && x.is_floating_point() && x.scalar_type() != at::kFloat ? x.to(at::kFloat) : x;
}

TORCH_LIBRARY(ampscope, m) {
    m.def(torch::schema("ampscope::enter_scope(int id) -> ()", c10::AliasAnalysisKind::CONSERVATIVE), &enter_scope);
    m.def(torch::schema("ampscope::to_fp32(Tensor x) -> Tensor", c10::AliasAnalysisKind::CONSERVATIVE), &to_fp32);
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

bool in_region(const std::string& path, const std::vector<std::string>& keep_fp32) {
    if (keep_fp32.empty()) return false;
    for (std::string p = path;;) {  // a region covers its submodules
        if (matches_any(p, keep_fp32)) return true;
        const auto dot = p.rfind('.');
        if (dot == std::string::npos) return false;
        p = p.substr(0, dot);
    }
}

void instrument_block(torch::jit::Block* block, ScriptPlan& plan, const std::vector<std::string>& keep_fp32,
                      const NodePaths& paths) {
    using namespace torch::jit;
    for (auto it = block->nodes().begin(); it != block->nodes().end(); ++it) {
        Node* n = *it;
        for (torch::jit::Block* sub : n->blocks()) instrument_block(sub, plan, keep_fp32, paths);
        if (!n->kind().is_aten()) continue;
        const auto found = paths.find(n);
        const std::string path = found == paths.end() ? std::string() : found->second;
        const bool fp32 = in_region(path, keep_fp32);
        const int64_t id = int64_t(plan.node_module.size());
        plan.node_module.push_back(path);
        plan.node_fp32.push_back(fp32);
        WithInsertPoint guard(n);
        Graph* g = block->owningGraph();
        Node* call = g->create(Symbol::fromQualString("ampscope::enter_scope"), {g->insertConstant(id)}, 0);
        g->insertNode(call);
        if (fp32) {
            for (size_t i = 0; i < n->inputs().size(); ++i) {
                Value* v = n->input(i);
                if (v->type()->kind() != c10::TypeKind::TensorType) continue;
                Node* cast = g->create(Symbol::fromQualString("ampscope::to_fp32"), {v}, 1);
                cast->output()->setType(v->type());
                g->insertNode(cast);
                n->replaceInput(i, cast->output());
            }
        }
    }
}

class ScriptModel final : public Model {
public:
    explicit ScriptModel(torch::jit::Module m) : m_(std::move(m)) {}
    at::Tensor forward(const std::vector<at::Tensor>& in) override {
        std::vector<torch::jit::IValue> args(in.begin(), in.end());
        torch::jit::IValue out;
        const auto& ctx = pass_context();
        if (ctx.observing || !ctx.keep_fp32.empty()) {
            const ScriptPlan& plan = plan_for(ctx.keep_fp32);
            torch::jit::Stack stack;
            stack.emplace_back(m_._ivalue());
            for (auto& a : args) stack.push_back(a);
            ScriptRun saved = tls_script_run;
            tls_script_run = {&plan, at::autocast::is_autocast_enabled(ctx.device_type)};
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
        const std::string found = out.isGenericDict() ? "a dict"
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
    void to_device(const at::Device& d) override { m_.to(d); }
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
    bool has_module_scopes() const override { return true; }
    torch::jit::Module& module() { return m_; }

private:
    const ScriptPlan& plan_for(const std::vector<std::string>& keep_fp32) {
        std::string key;
        for (const auto& k : keep_fp32) key += k + '\n';
        auto& slot = plans_[key];
        if (!slot) {
            slot = std::make_unique<ScriptPlan>();
            auto& fn = torch::jit::toGraphFunction(m_.get_method("forward").function());
            slot->graph = fn.graph()->copy();
            const auto paths = inline_with_paths(*slot->graph);
            instrument_block(slot->graph->block(), *slot, keep_fp32, paths);
            if (std::getenv("AMPSCOPE_DUMP_GRAPH")) std::cerr << *slot->graph << std::endl;
            slot->code = std::make_unique<torch::jit::Code>(slot->graph, "forward");
        }
        return *slot;
    }
    torch::jit::Module m_;
    std::map<std::string, std::unique_ptr<ScriptPlan>> plans_;
};

template <class M>
std::unique_ptr<Model> make_demo(const std::string& source, std::vector<std::vector<int64_t>> shapes,
                                 int outputs, uint64_t seed) {
    torch::manual_seed(seed);
    auto model = std::make_unique<DemoModel<M>>(M());
    model->input_shapes = std::move(shapes);
    model->num_outputs = outputs;
    model->info.kind = "demo";
    return model;
}

}  // namespace

std::unique_ptr<Model> load_model(const std::string& source, uint64_t seed) {
    std::unique_ptr<Model> model;
    if (source.rfind("demo:", 0) == 0) {
        const auto name = source.substr(5);
        if (name == "transformer")
            model = make_demo<Transformer>(source, {{kTokens, kFeatures}}, kClasses, seed);
        else if (name == "mlp")
            model = make_demo<DemoMlp>(source, {{32}}, 10, seed);
        else if (name == "regressor")
            model = make_demo<Regressor>(source, {{8}}, 1, seed);
        else
            throw InputError(source, "--model", "unknown demo model '" + name +
                                                    "'; expected demo:transformer, demo:mlp or demo:regressor");
    } else {
        namespace fs = std::filesystem;
        std::error_code ec;
        if (!fs::exists(source, ec)) throw InputError(source, "--model", "file not found");
        if (fs::is_directory(source, ec)) throw InputError(source, "--model", "is a directory; expected a TorchScript file (.pt)");
        const auto file_hash = sha256_file(source);
        // The optimizing graph executor bakes the autocast state of its first optimized call
        // into the cached plan (its JIT autocast pass), so later passes with another precision
        // would not apply their own policy. Plain execution applies the per-op dispatcher
        // policy on every call, exactly as eager torch.autocast does.
        torch::jit::setGraphExecutorOptimize(false);
        torch::jit::Module m;
        try {
            m = torch::jit::load(source, torch::kCPU);
        } catch (const std::exception& e) {
            std::string what = e.what();
            what = what.substr(0, what.find('\n'));
            throw InputError(source, "--model",
                             "not a loadable TorchScript file (expected torch.jit.save output): " + what);
        }
        auto sm = std::make_unique<ScriptModel>(std::move(m));
        if (!sm->module().find_method("forward"))
            throw InputError(source, "--model", "the TorchScript module has no forward method");
        for (const auto& arg : sm->module().get_method("forward").function().getSchema().arguments()) {
            if (arg.name() == "self") continue;
            sm->input_names.push_back(arg.name());
            if (!arg.default_value()) sm->required_inputs = sm->input_names.size();
        }
        sm->info.kind = "torchscript";
        sm->info.sha256 = file_hash;
        model = std::move(sm);
    }
    model->info.source = source;
    auto state = model->named_state();
    model->info.weights_sha256 = weights_hash(state);
    if (model->info.sha256.empty()) model->info.sha256 = model->info.weights_sha256;
    int64_t params = 0;
    for (const auto& p : model->parameters()) params += p.numel();
    model->info.parameters = params;
    model->info.modules = model->module_paths();
    return model;
}

}  // namespace detail
}  // namespace ampscope
