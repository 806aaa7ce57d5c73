// SPDX-License-Identifier: MIT
// The checkpoint loaders against files torch.save / safetensors wrote in every format users'
// training code writes (tests/engine/checkpoint_oracle.py): the same weights bitwise from each,
// optimizer and scaler state read, Python objects LibTorch cannot build skipped and named; and
// one more SGD / Adam / AdamW (amsgrad) step from the read state equal to torch.optim's.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ampscope/engine/errors.h"
#include "replay/checkpoint.h"
#include "replay/safetensors.h"

using namespace ampscope::detail;
namespace fs = std::filesystem;

namespace {

std::string hex_of(const at::Tensor& t) {
    const auto b = t.detach().contiguous().reshape({-1}).view(at::kByte);
    static const char* d = "0123456789abcdef";
    std::string s;
    for (int64_t i = 0; i < b.numel(); ++i) {
        const auto v = b[i].item<uint8_t>();
        s += d[v >> 4];
        s += d[v & 15];
    }
    return s;
}

struct Oracle {
    std::string dir;
    nlohmann::json want;
    Oracle() {
        dir = (fs::temp_directory_path() / ("ampscope-ckpt-" + std::to_string(::getpid()))).string();
        fs::create_directories(dir);
        const std::string cmd =
            std::string(AMPSCOPE_PYTHON) + " -W ignore " + AMPSCOPE_TESTS_DIR + "/engine/checkpoint_oracle.py " + dir;
        FILE* p = popen(cmd.c_str(), "r");
        std::string out;
        char buf[4096];
        while (p && fgets(buf, sizeof buf, p)) out += buf;
        if (p) pclose(p);
        want = out.empty() ? nlohmann::json() : nlohmann::json::parse(out);
    }
    // Not std::filesystem::remove_all: in this binary it resolves into libtorch.so's copy, which
    // crashes (a null call); the shell removes the folder.
    ~Oracle() {
        const int rc = std::system(("rm -rf '" + dir + "'").c_str());
        (void)rc;
    }
};

/// A fresh model state shaped like the oracle's (zeros), as named_state() gives it.
std::vector<std::pair<std::string, at::Tensor>> fresh_state(const ckpt::Checkpoint& c) {
    std::vector<std::pair<std::string, at::Tensor>> s;
    for (const auto& [k, t] : c.weights) s.emplace_back(k, at::zeros_like(t));
    return s;
}

}  // namespace

/// One oracle run for the suite, its folder removed when the suite ends (not at exit, where
/// std::filesystem may already resolve into a library being torn down).
class CheckpointLoaders : public ::testing::Test {
protected:
    static void SetUpTestSuite() { oracle_ = new Oracle(); }
    static void TearDownTestSuite() {
        delete oracle_;
        oracle_ = nullptr;
    }
    static Oracle& oracle() { return *oracle_; }

private:
    static Oracle* oracle_;
};
Oracle* CheckpointLoaders::oracle_ = nullptr;

TEST_F(CheckpointLoaders, EveryFormatLoadsTheSameWeightsBitwise) {
    auto& o = oracle();
    ASSERT_FALSE(o.want.is_null()) << "python oracle produced nothing";
    const std::vector<std::pair<std::string, std::string>> files = {{"plain.pt", "state_dict"},
                                                                    {"dict.pt", "dict"},
                                                                    {"lightning.ckpt", "lightning"},
                                                                    {"checkpoint-3", "hf-trainer"},
                                                                    {"checkpoint-sharded", "hf-trainer"}};
    for (const auto& [f, format] : files) {
        const auto c = ckpt::load_checkpoint(o.dir + "/" + f, format == "lightning" ? "model." : "");
        EXPECT_EQ(c.format, format) << f;
        auto state = fresh_state(c);
        ASSERT_EQ(state.size(), o.want["weights"].size()) << f;
        const auto m = ckpt::apply_weights(c, state);
        EXPECT_TRUE(m.clean()) << f;
        for (const auto& [k, t] : state) EXPECT_EQ(hex_of(t), o.want["weights"][k].get<std::string>()) << f << " " << k;
    }
}

TEST_F(CheckpointLoaders, OptimizerScalerAndSkippedObjects) {
    auto& o = oracle();
    const auto d = ckpt::load_checkpoint(o.dir + "/dict.pt", "");
    ASSERT_TRUE(d.optimizer && d.scaler);
    EXPECT_EQ(d.optimizer->kind, "adam");
    EXPECT_EQ(d.scaler->scale, 1024.0);
    EXPECT_EQ(d.scaler->growth_interval, 7);
    EXPECT_EQ(d.scaler->growth_tracker, 3);
    const auto l = ckpt::load_checkpoint(o.dir + "/lightning.ckpt", "model.");
    ASSERT_TRUE(l.optimizer && l.scaler);
    EXPECT_EQ(l.scaler->growth_interval, 7);
    std::string warnings;
    for (const auto& w : l.warnings) warnings += w + "\n";
    EXPECT_NE(warnings.find("Cfg"), std::string::npos) << warnings;
    EXPECT_NE(warnings.find("AttrDict"), std::string::npos) << warnings;
    const auto hf = ckpt::load_checkpoint(o.dir + "/checkpoint-3", "");
    EXPECT_FALSE(hf.scaler);
    EXPECT_NE(hf.scaler_absent_note.find("no scaler.pt"), std::string::npos);
    EXPECT_TRUE(ckpt::load_checkpoint(o.dir + "/checkpoint-sharded", "").scaler);
    // Without --strip-prefix, Lightning's names do not match: listed, not copied.
    const auto plain = ckpt::load_checkpoint(o.dir + "/plain.pt", "");
    auto state = fresh_state(plain);
    const auto m =
        ckpt::apply_weights(l.format == "lightning" ? ckpt::load_checkpoint(o.dir + "/lightning.ckpt", "") : l, state);
    EXPECT_EQ(m.missing.size(), state.size());
    EXPECT_EQ(m.unexpected.size(), state.size());
}

TEST_F(CheckpointLoaders, OneMoreStepEqualsTorchOptim) {
    auto& o = oracle();
    const auto grads = read_safetensors(o.dir + "/grads.safetensors").tensors;
    const auto names = o.want["names"].get<std::vector<std::string>>();
    for (const std::string kind : {"adam", "adamw", "sgd"}) {
        const auto c = ckpt::load_checkpoint(o.dir + "/plain.pt", "");
        std::map<std::string, at::Tensor> w(c.weights.begin(), c.weights.end());
        std::vector<at::Tensor> params;
        for (const auto& n : names) {
            params.push_back(w.at(n).clone().requires_grad_(true));
            params.back().mutable_grad() = grads.at(n).clone();
        }
        auto opt = kind == "adam" ? *ckpt::load_checkpoint(o.dir + "/dict.pt", "").optimizer
                                  : ckpt::read_optimizer(ckpt::read_pt_root(o.dir + "/" + kind + ".pt", nullptr),
                                                         kind + ".pt", "");
        EXPECT_EQ(opt.kind, kind);
        std::vector<std::string> warnings;
        ckpt::map_optimizer(opt, params, names, ckpt::MapContext{kind}, warnings);
        EXPECT_EQ(opt.mapping, "model-order");
        ckpt::optimizer_step(opt, params);
        for (size_t i = 0; i < names.size(); ++i)
            EXPECT_EQ(hex_of(params[i]), o.want["after"][kind][names[i]].get<std::string>()) << kind << " " << names[i];
    }
}

TEST_F(CheckpointLoaders, BadInputsAreNamed) {
    auto& o = oracle();
    auto refusal = [](auto f) -> std::string {
        try {
            f();
        } catch (const ampscope::InputError& e) {
            return e.what();
        }
        return "";
    };
    const std::string empty_dir = o.dir + "/checkpoint-empty";
    fs::create_directories(empty_dir);
    EXPECT_NE(refusal([&] { ckpt::load_checkpoint(empty_dir, ""); }).find("model.safetensors"), std::string::npos);
    EXPECT_NE(refusal([&] { ckpt::load_checkpoint(o.dir + "/nope.pt", ""); }).find("does not exist"),
              std::string::npos);
    c10::impl::GenericDict sc(c10::StringType::get(), c10::AnyType::get());
    sc.insert("growth_factor", 2.0);
    EXPECT_NE(refusal([&] { ckpt::read_scaler(sc, "s.pt", ""); }).find("'scale'"), std::string::npos);
    sc.insert("scale", 8.0);
    sc.insert_or_assign("backoff_factor", 1.5);
    EXPECT_NE(refusal([&] { ckpt::read_scaler(sc, "s.pt", ""); }).find("'backoff_factor'"), std::string::npos);
    c10::impl::GenericDict none(c10::StringType::get(), c10::AnyType::get());
    EXPECT_FALSE(ckpt::read_scaler(none, "s.pt", ""));  // {}: a disabled scaler
    // an optimizer for another model: parameter count and shapes
    const auto opt = *ckpt::load_checkpoint(o.dir + "/dict.pt", "").optimizer;
    std::vector<at::Tensor> two = {at::zeros({4, 3}), at::zeros({4})};
    std::vector<std::string> w;
    auto map = [&](std::vector<at::Tensor> p, std::vector<std::string> n) {
        auto copy = opt;
        ckpt::map_optimizer(copy, p, n, ckpt::MapContext{"dict.pt"}, w);
    };
    EXPECT_NE(refusal([&] { map(two, {"a", "b"}); }).find("the model has 2"), std::string::npos);
    std::vector<at::Tensor> wrong;
    for (int i = 0; i < 6; ++i) wrong.push_back(at::zeros({7}));
    EXPECT_NE(refusal([&] { map(wrong, {"a", "b", "c", "d", "e", "f"}); }).find("has shape"), std::string::npos);
}
