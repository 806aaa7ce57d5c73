// SPDX-License-Identifier: MIT
// storage's to_json / from_json (json_types.h): each type written as stored and read back whole.
#include <gtest/gtest.h>

#include "ampscope/engine/errors.h"
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

TEST(JsonTypes, ProbeInfoRoundTripsWithLabelWidthOnlyForTokenLabels) {
    ProbeInfo p;
    p.source = "probes.pt";
    p.sha256 = "ef";
    p.count = 3;
    p.tags = {{"b", 1}, {"a", 2}};
    p.input_shapes = {{4}, {2, 3}};
    p.has_labels = true;
    const std::string text = ordered_json(p).dump();
    EXPECT_EQ(text, R"({"source":"probes.pt","sha256":"ef","count":3,"tags":{"a":2,"b":1},)"
                    R"("input_shapes":[[4],[2,3]],"has_labels":true,"has_targets":false})");
    p.label_width = 7;  // token labels [N, 7]
    const auto r = json::parse(ordered_json(p).dump()).get<ProbeInfo>();
    EXPECT_EQ(ordered_json(r).dump(), ordered_json(p).dump());
    EXPECT_EQ(r.label_width, 7);
    EXPECT_EQ(r.tags, p.tags);
    EXPECT_EQ(r.input_shapes, p.input_shapes);
    auto j = json::parse(text);
    EXPECT_EQ(j.get<ProbeInfo>().label_width, 0);
    j.erase("has_targets");
    EXPECT_THROW(j.get<ProbeInfo>(), json::out_of_range);
}

TEST(JsonTypes, TrainSpecRoundTripsAndRefusesAPrecisionATrainingDoesNotRun) {
    TrainSpec s;
    s.model = "m.pt";
    s.data = "d.pt";
    s.steps = 3;
    s.batch_size = 8;
    s.loss = LossKind::Mse;
    s.optimizer = OptimizerKind::Adamw;
    s.lr = 0.5;
    s.momentum = 0.25;
    s.weight_decay = 0.125;
    s.precision = Precision::Bf16;
    s.autocast = false;
    s.scaler.init_scale = 8.0;
    s.clip_grad_norm = 1.5;
    s.accumulate = 2;
    s.lr_schedule = LrSchedule::Cosine;
    s.lr_per_iteration = true;
    s.checkpoint_every = 4;
    s.checkpoint_dir = "ck";
    s.resume = "r.ckpt";
    s.keep_fp32 = {"head"};
    s.seed = 18446744073709551615ull;
    s.device = "cpu";
    s.guards = false;
    const std::string text = ordered_json(s).dump();
    EXPECT_EQ(text, R"({"model":"m.pt","data":"d.pt","steps":3,"batch_size":8,"loss":"mse","optimizer":"adamw",)"
                    R"("lr":0.5,"momentum":0.25,"weight_decay":0.125,"precision":"bf16","autocast":false,)"
                    R"("scaler":{"enabled":true,"init_scale":8.0,"growth_factor":2.0,"backoff_factor":0.5,)"
                    R"("growth_interval":2000},"clip_grad_norm":1.5,"accumulate":2,"lr_schedule":"cosine",)"
                    R"("lr_per_iteration":true,"checkpoint_every":4,"checkpoint_dir":"ck","resume":"r.ckpt",)"
                    R"("keep_fp32":["head"],"seed":18446744073709551615,"device":"cpu","guards":false})");
    const auto r = json::parse(text).get<TrainSpec>();
    EXPECT_EQ(ordered_json(r).dump(), text);
    EXPECT_EQ(r.precision, Precision::Bf16);
    EXPECT_EQ(r.seed, s.seed);
    auto j = json::parse(text);
    j["precision"] = "fp8-rowwise";  // torchao's float8 training recipes train
    EXPECT_EQ(j.get<TrainSpec>().precision, Precision::Fp8Rowwise);
    j["precision"] = "mxfp8";  // and torchao's MXFP8 training linear, NVIDIA's NVFP4 training recipe
    EXPECT_EQ(j.get<TrainSpec>().precision, Precision::Mxfp8);
    j["precision"] = "nvfp4";
    EXPECT_EQ(j.get<TrainSpec>().precision, Precision::Nvfp4);
    j["precision"] = "fp32";  // a training's reference side, not its AMP precision
    try {
        (void)j.get<TrainSpec>();
        FAIL() << "fp32 read as a training's precision";
    } catch (const json::type_error& e) {
        EXPECT_NE(std::string(e.what()).find(
                      "precision \"fp32\" in spec.precision; a training runs fp16, bf16, fp8, fp8-rowwise, mxfp8, "
                      "nvfp4 or fp8-delayed"),
                  std::string::npos)
            << e.what();
    }
    j = json::parse(text);
    j.erase("guards");
    EXPECT_THROW(j.get<TrainSpec>(), json::out_of_range);
}

TEST(JsonTypes, TrainSpecFp8ProductSettingsRoundTripAndRefuseNonBooleans) {
    TrainSpec s;
    s.precision = Precision::Fp8Rowwise;
    s.fp8_all_gemms = true;
    s.rowwise_gw_hp = true;
    auto j = json::parse(ordered_json(s).dump());
    EXPECT_EQ(j["fp8_all_gemms"], true);
    EXPECT_EQ(j["rowwise_gw_hp"], true);
    const auto r = j.get<TrainSpec>();
    EXPECT_TRUE(r.fp8_all_gemms);
    EXPECT_TRUE(r.rowwise_gw_hp);
    for (const char* key : {"fp8_all_gemms", "rowwise_gw_hp"}) {
        auto plain = j;
        plain.erase(key);  // trainings recorded before the setting: off
        const auto p = plain.get<TrainSpec>();
        EXPECT_FALSE(std::string(key) == "fp8_all_gemms" ? p.fp8_all_gemms : p.rowwise_gw_hp) << key;
        auto bad = j;
        bad[key] = "yes";
        try {
            (void)bad.get<TrainSpec>();
            ADD_FAILURE() << key << ": a string read as a boolean";
        } catch (const ampscope::InputError& e) {
            EXPECT_EQ(e.field(), std::string("spec.") + key);
            EXPECT_NE(std::string(e.what()).find("'\"yes\"'; expected true or false"), std::string::npos) << e.what();
        }
    }
}

TEST(JsonTypes, OriginKeepsItsAlphabeticalKeysAndGradFnOnlyForTheBackwardPass) {
    Origin o{"forward", "fc1", "aten::linear", 3, {"s1", "s2"}, ""};
    const std::string text = ordered_json(o).dump();
    EXPECT_EQ(text, R"({"index":3,"module":"fc1","op":"aten::linear","samples":["s1","s2"],"stage":"forward"})");
    auto r = json::parse(text).get<Origin>();
    EXPECT_EQ(ordered_json(r).dump(), text);
    EXPECT_EQ(r.grad_fn, "");
    o.stage = "backward";
    o.grad_fn = "MmBackward0";
    r = json::parse(ordered_json(o).dump()).get<Origin>();
    EXPECT_EQ(r.stage, "backward");
    EXPECT_EQ(r.grad_fn, "MmBackward0");
    EXPECT_EQ(r.samples, o.samples);
    auto j = json::parse(text);
    j.erase("op");
    EXPECT_THROW(j.get<Origin>(), json::out_of_range);
}
