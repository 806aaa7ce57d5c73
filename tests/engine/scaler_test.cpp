// SPDX-License-Identifier: MIT
// The GradScaler port against torch.amp.GradScaler("cpu") from the same wheel, driven by the
// same gradients with planted inf/NaN: identical scales, trackers, skips and parameters.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>

#include <cstdio>
#include <fstream>
#include <limits>

#include "precision/gradscaler.h"

using namespace ampscope;

namespace {

std::string run_python(const std::string& args) {
    const std::string cmd =
        std::string(AMPSCOPE_PYTHON) + " -W ignore " + AMPSCOPE_TESTS_DIR + "/engine/scaler_oracle.py " + args;
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (p && fgets(buf, sizeof buf, p)) out += buf;
    if (p) pclose(p);
    return out;
}

}  // namespace

TEST(GradScalerOracle, SameScalesSkipsAndParametersAsPyTorch) {
    const int steps = 14;
    auto gen = at::detail::createCPUGenerator(42);
    c10::impl::GenericList all(c10::AnyType::get());
    std::vector<std::vector<at::Tensor>> grads;
    for (int s = 0; s < steps; ++s) {
        std::vector<at::Tensor> g = {at::randn({5, 3}, gen) * 1e-2, at::randn({3}, gen)};
        if (s == 2) g[0][1][2] = std::numeric_limits<float>::infinity();
        if (s == 5) g[1][0] = std::numeric_limits<float>::quiet_NaN();
        if (s == 9) g[0][4][0] = -std::numeric_limits<float>::infinity();
        if (s == 11) g[1][2] = 3e38f;  // finite unscaled, overflows once scaled
        grads.push_back(g);
        all.push_back(c10::IValue(c10::List<at::Tensor>(g)));
    }
    char path[] = "/tmp/ampscope-scaler-XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    {
        const auto bytes = torch::pickle_save(c10::IValue(all));
        std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    }
    ScalerOptions o;
    o.init_scale = 1024.0;
    o.growth_interval = 3;
    const auto text = run_python(std::string(path) + " 1024 2.0 0.5 3");
    std::remove(path);
    ASSERT_FALSE(text.empty()) << "python oracle produced nothing";
    const auto want = nlohmann::json::parse(text);

    std::vector<at::Tensor> params = {at::zeros({5, 3}).requires_grad_(true), at::zeros({3}).requires_grad_(true)};
    torch::optim::SGD opt(params, torch::optim::SGDOptions(0.1));
    GradScaler scaler("cpu", o);
    int skipped = 0;
    for (int s = 0; s < steps; ++s) {
        const double scale = scaler.get_scale();
        for (size_t i = 0; i < params.size(); ++i)
            params[i].mutable_grad() = scaler.impl().scale_loss(grads[size_t(s)][i]);
        scaler.impl().unscale(params);
        const bool stepped = scaler.impl().step(opt, params);
        scaler.impl().update();
        const auto& w = want["steps"][size_t(s)];
        EXPECT_EQ(scale, w["scale"].get<double>()) << "step " << s;
        EXPECT_EQ(!stepped, w["skipped"].get<bool>()) << "step " << s;
        EXPECT_EQ(scaler.growth_tracker(), w["tracker"].get<int>()) << "step " << s;
        for (size_t i = 0; i < params.size(); ++i) {
            auto flat = params[i].detach().flatten();
            const auto expect = w["params"][i].get<std::vector<double>>();
            for (int64_t k = 0; k < flat.numel(); ++k)
                EXPECT_EQ(double(flat[k].item<float>()), expect[size_t(k)]) << "step " << s;
        }
        skipped += !stepped;
    }
    EXPECT_EQ(skipped, 4);  // the planted steps, no others
    const auto st = scaler.state_dict();
    EXPECT_EQ(st.scale, want["state"]["scale"].get<double>());
    EXPECT_EQ(st.growth_tracker, want["state"]["_growth_tracker"].get<int>());
    EXPECT_EQ(st.growth_interval, want["state"]["growth_interval"].get<int>());
}

TEST(GradScaler, RefusesWhatPyTorchRefuses) {
    std::vector<at::Tensor> params = {at::zeros({3}).requires_grad_(true)};
    torch::optim::SGD opt(params, torch::optim::SGDOptions(0.1));
    GradScaler scaler("cpu");
    params[0].mutable_grad() = at::ones({3});
    scaler.impl().unscale(params);
    try {
        scaler.impl().unscale(params);
        FAIL();
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("already been called"), std::string::npos);
    }
    scaler.impl().step(opt, params);
    EXPECT_THROW(scaler.impl().step(opt, params), std::runtime_error);
    scaler.impl().update();
    auto half = at::zeros({3}, at::kHalf).requires_grad_(true);
    half.mutable_grad() = at::ones({3}, at::kHalf);
    try {
        scaler.impl().unscale({half});
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_STREQ(e.what(), "Attempting to unscale FP16 gradients.");
    }
    GradScaler fresh("cpu");
    EXPECT_THROW(fresh.impl().update(), std::runtime_error);  // no inf checks recorded
}

TEST(GradScaler, DefaultsAndStateDictRoundTrip) {
    GradScaler s("cpu");
    EXPECT_EQ(s.get_scale(), 65536.0);
    const auto st = s.state_dict();
    EXPECT_EQ(st.growth_factor, 2.0);
    EXPECT_EQ(st.backoff_factor, 0.5);
    EXPECT_EQ(st.growth_interval, 2000);
    ScalerState custom{128.0, 3.0, 0.25, 7, 5};
    s.load_state_dict(custom);
    EXPECT_EQ(s.get_scale(), 128.0);
    EXPECT_EQ(s.growth_tracker(), 5);
    EXPECT_EQ(s.state_dict().growth_interval, 7);
    ScalerOptions off;
    off.enabled = false;
    GradScaler disabled("cpu", off);
    EXPECT_EQ(disabled.get_scale(), 1.0);
}
