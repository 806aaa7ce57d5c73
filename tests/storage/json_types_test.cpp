// SPDX-License-Identifier: MIT
// storage's to_json / from_json (json_types.h): each type written as stored and read back whole.
#include <gtest/gtest.h>

#include "json_types.h"

using namespace ampscope;
using nlohmann::json;
using nlohmann::ordered_json;

TEST(JsonTypes, ModelInfoRoundTripsInTheStoredShape) {
    ModelInfo m;
    m.source = "model.pt2";
    m.kind = "torch.export";
    m.format = "torch.export schema 8.17, IR TRAINING";
    m.sha256 = "ab";
    m.weights_sha256 = "cd";
    m.mode = "train";
    m.parameters = 1234567890123;
    m.modules = {"", "fc1", "fc2"};
    const std::string text = ordered_json(m).dump();
    EXPECT_EQ(
        text,
        R"({"source":"model.pt2","kind":"torch.export","sha256":"ab","weights_sha256":"cd","mode":"train",)"
        R"("parameters":1234567890123,"modules":["","fc1","fc2"],"format":"torch.export schema 8.17, IR TRAINING"})");
    const auto r = json::parse(text).get<ModelInfo>();
    EXPECT_EQ(r.source, m.source);
    EXPECT_EQ(r.kind, m.kind);
    EXPECT_EQ(r.format, m.format);
    EXPECT_EQ(r.sha256, m.sha256);
    EXPECT_EQ(r.weights_sha256, m.weights_sha256);
    EXPECT_EQ(r.mode, m.mode);
    EXPECT_EQ(r.parameters, m.parameters);
    EXPECT_EQ(r.modules, m.modules);
}

TEST(JsonTypes, ModelInfoNeedsEveryKeyButFormat) {
    auto j = json::parse(ordered_json(ModelInfo{}).dump());
    j.erase("format");
    EXPECT_EQ(j.get<ModelInfo>().format, "");
    j.erase("sha256");
    EXPECT_THROW(j.get<ModelInfo>(), json::out_of_range);
}

TEST(JsonTypes, ScalerOptionsRoundTripAndDefaultWhatIsMissing) {
    ScalerOptions s;
    s.enabled = false;
    s.init_scale = 1024.0;
    s.growth_factor = 4.0;
    s.backoff_factor = 0.25;
    s.growth_interval = 7;
    const std::string text = ordered_json(s).dump();
    EXPECT_EQ(text,
              R"({"enabled":false,"init_scale":1024.0,"growth_factor":4.0,"backoff_factor":0.25,"growth_interval":7})");
    const auto r = json::parse(text).get<ScalerOptions>();
    EXPECT_EQ(r.enabled, s.enabled);
    EXPECT_EQ(r.init_scale, s.init_scale);
    EXPECT_EQ(r.growth_factor, s.growth_factor);
    EXPECT_EQ(r.backoff_factor, s.backoff_factor);
    EXPECT_EQ(r.growth_interval, s.growth_interval);
    const auto d = json::object().get<ScalerOptions>();
    EXPECT_TRUE(d.enabled);
    EXPECT_EQ(d.init_scale, 65536.0);
    EXPECT_EQ(d.growth_interval, 2000);
}

TEST(JsonTypes, BackendReportRoundTripsAndReadsTheKeysOfEarlierHeaders) {
    BackendReport b;
    b.device = "cuda:0";
    b.kind = "cuda";
    b.torch_version = "2.11.0";
    b.name = "H200";
    b.cuda_version = "12.8";
    b.cudnn_version = "91000";
    b.hip_version = "";
    b.compute_capability = "9.0";
    b.cuda_available = true;
    b.cuda_device_count = 2;
    b.bf16_supported = true;
    b.fp16_supported = false;
    b.num_threads = 16;
    b.notes = {"a", "b"};
    const std::string text = ordered_json(b).dump();
    EXPECT_EQ(text, R"({"device":"cuda:0","kind":"cuda","torch":"2.11.0","name":"H200","cuda":"12.8","cudnn":"91000",)"
                    R"("hip":"","compute_capability":"9.0","cuda_available":true,"cuda_device_count":2,)"
                    R"("bf16_supported":true,"fp16_supported":false,"num_threads":16,"notes":["a","b"]})");
    const auto r = json::parse(text).get<BackendReport>();
    EXPECT_EQ(ordered_json(r).dump(), text);
    auto old = json::parse(text);  // a run header of schema v1 to v6
    for (const auto& [now, before] : {std::pair{"compute_capability", "cc"},
                                      {"cuda_device_count", "cuda_devices"},
                                      {"bf16_supported", "bf16"},
                                      {"fp16_supported", "fp16"},
                                      {"num_threads", "threads"}}) {
        old[before] = old[now];
        old.erase(now);
    }
    EXPECT_EQ(ordered_json(old.get<BackendReport>()).dump(), text);
    old.erase("notes");
    EXPECT_THROW(old.get<BackendReport>(), json::out_of_range);
}
