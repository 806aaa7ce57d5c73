// SPDX-License-Identifier: MIT
// The built-in demo zoo: small torch::nn models with seeded weights and module scopes that
// name their modules as Python's named_modules() would.
#include <torch/torch.h>

#include <cmath>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/run.h"
#include "model/model.h"
#include "precision/fp8_pass.h"
#include "precision/precision.h"

namespace ampscope {

std::vector<std::string> demo_models() {
    return {"transformer", "mlp", "regressor"};
}

namespace detail {

namespace {

namespace nn = torch::nn;

/// A demo model's linear layer. LibTorch's nn::Linear calls addmm / matmul, never aten::linear;
/// an FP8 pass quantizes aten::linear (precision/fp8_pass.h), so there the layer calls it (the
/// same weights; every other pass runs as it always did, a BF16 pass's FP8 what-if counting
/// the operands first).
at::Tensor linear(nn::Linear& l, const at::Tensor& x) {
    if (fp8_pass_active()) return at::linear(x, l->weight, l->bias);
    note_what_if(x, l->weight);
    return l->forward(x);
}

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
            auto y = scoped(path + ".qkv", in, [&](const at::Tensor& v) { return linear(qkv, v); });
            y = y.view({n, t, 3, kHeads, kDim / kHeads}).permute({2, 0, 3, 1, 4});
            auto q = y[0], k = y[1], v = y[2];  // [N, H, T, d]
            auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(kDim / kHeads)));
            att = torch::softmax(att, -1);
            auto o = torch::matmul(att, v).transpose(1, 2).reshape({n, t, kDim});
            return scoped(path + ".proj", o, [&](const at::Tensor& v2) { return linear(proj, v2); });
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
            auto h = scoped(path + ".up", in, [&](const at::Tensor& v) { return linear(up, v); });
            h = scoped(path + ".act", h, [&](const at::Tensor& v) { return act->forward(v); });
            return scoped(path + ".down", h, [&](const at::Tensor& v) { return linear(down, v); });
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
            auto y =
                in + scoped(path + ".drop", attn->forward(h), [&](const at::Tensor& v) { return drop->forward(v); });
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
            auto h = scoped("embed", in, [&](const at::Tensor& v) { return linear(embed, v); });
            for (auto& b : block_list) h = b->forward(h);
            h = scoped("norm", h, [&](const at::Tensor& v) { return norm->forward(v); });
            h = h.mean(1);
            return scoped("head", h, [&](const at::Tensor& v) { return linear(head, v); });
        });
    }
};
TORCH_MODULE(Transformer);

// ---- demo:mlp and demo:regressor: linear, activation, linear, activation, linear -------------
template <class Act>
struct StackImpl : nn::Module {
    nn::Linear fc1{nullptr}, fc2{nullptr}, out{nullptr};
    Act act1{nullptr}, act2{nullptr};
    StackImpl(int64_t in, int64_t hidden, int64_t outputs) {
        fc1 = this->register_module("fc1", nn::Linear(in, hidden));
        act1 = this->register_module("act1", Act());
        fc2 = this->register_module("fc2", nn::Linear(hidden, hidden));
        act2 = this->register_module("act2", Act());
        out = this->register_module("out", nn::Linear(hidden, outputs));
    }
    at::Tensor forward(const at::Tensor& x) {
        return scoped("", x, [&](const at::Tensor& in) {
            auto h = scoped("fc1", in, [&](const at::Tensor& v) { return linear(fc1, v); });
            h = scoped("act1", h, [&](const at::Tensor& v) { return act1->forward(v); });
            h = scoped("fc2", h, [&](const at::Tensor& v) { return linear(fc2, v); });
            h = scoped("act2", h, [&](const at::Tensor& v) { return act2->forward(v); });
            return scoped("out", h, [&](const at::Tensor& v) { return linear(out, v); });
        });
    }
};

/// demo:mlp: [N, 32] -> 10 classes.
struct DemoMlpImpl : StackImpl<nn::ReLU> {
    DemoMlpImpl() : StackImpl(32, 64, 10) {}
};
TORCH_MODULE(DemoMlp);

/// demo:regressor: [N, 8] -> 1.
struct RegressorImpl : StackImpl<nn::Tanh> {
    RegressorImpl() : StackImpl(8, 32, 1) {}
};
TORCH_MODULE(Regressor);

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

template <class M>
std::unique_ptr<Model> make_demo(const std::string& source, std::vector<std::vector<int64_t>> shapes, int outputs,
                                 uint64_t seed) {
    torch::manual_seed(seed);
    auto model = std::make_unique<DemoModel<M>>(M());
    model->input_shapes = std::move(shapes);
    model->num_outputs = outputs;
    model->info.kind = "demo";
    return model;
}

}  // namespace

std::unique_ptr<Model> make_demo_model(const std::string& name, const std::string& source, uint64_t seed) {
    if (name == "transformer") return make_demo<Transformer>(source, {{kTokens, kFeatures}}, kClasses, seed);
    if (name == "mlp") return make_demo<DemoMlp>(source, {{32}}, 10, seed);
    if (name == "regressor") return make_demo<Regressor>(source, {{8}}, 1, seed);
    throw InputError(source, "model",
                     "unknown demo model '" + name + "'; expected demo:transformer, demo:mlp or demo:regressor");
}

}  // namespace detail
}  // namespace ampscope
