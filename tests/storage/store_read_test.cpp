// SPDX-License-Identifier: MIT
// The store's typed readers: a training run and the benchmarks of a run read back as values,
// and stored values in the one JSON mapping of their type.
#include "ampscope/engine/rules.h"
#include "store_test_util.h"

using namespace store_test;

namespace {

TrainResult make_training(int steps = 4) {
    TrainResult t;
    t.run_id = make_uuid();
    t.spec.model = "demo:mlp";
    t.spec.data = "data.pt";
    t.spec.steps = steps;
    t.spec.batch_size = 8;
    t.spec.loss = "mse";
    t.spec.optimizer = "adamw";
    t.spec.lr = 0.125;
    t.spec.momentum = 0.5;
    t.spec.weight_decay = 0.25;
    t.spec.precision = Precision::Bf16;
    t.spec.scaler.init_scale = 1024;
    t.spec.scaler.growth_interval = 2;
    t.spec.accumulate = 3;
    t.spec.lr_schedule = "cosine";
    t.spec.keep_fp32 = {"head"};
    t.spec.seed = 7;
    t.backend.device = "cpu";
    t.backend.name = "test cpu";
    t.backend.compute_capability = "9.0";
    t.backend.cuda_device_count = 2;
    t.model.source = "demo:mlp";
    t.model.kind = "demo";
    t.model.sha256 = "abc";
    t.model.weights_sha256 = "def";
    t.model.mode = "train";
    t.model.parameters = 42;
    t.model.modules = {"", "head"};
    t.started_at = now_iso8601();
    t.warnings = {"a warning"};
    for (int i = 0; i < steps; ++i) {
        TrainStep s;
        s.step = i;
        s.scale = i < 2 ? 1024 : 512;
        s.skipped = s.found_inf = i == 1;
        s.effective_updates = i == 0 ? 1 : i;
        s.growth_tracker = i == 1 ? 0 : 1;
        s.loss_ref = 1.0 / (i + 1);
        s.loss_amp = s.loss_ref + 1e-3;
        if (i == 1) {
            s.nonfinite_stage = "gradient";
            s.origin = Origin{"backward", "head", "aten::mm", 3, {}, "MmBackward0"};
        }
        t.steps.push_back(s);
    }
    return t;
}

std::string record_training(Store& s, const TrainResult& t) {
    TrainWriter w(s);
    w.train_started(t);
    for (const auto& st : t.steps) w.step_finished(st);
    w.checkpoint_written("/tmp/ckpt-2.pt", 2);
    w.train_finished(t);
    return w.run_uuid();
}

}  // namespace

TEST(StoreRead, ATrainingRunReadsBackAsValues) {
    TempDir d;
    Store s(d.file("runs.sqlite"));
    const auto t = make_training();
    const auto uuid = record_training(s, t);
    const auto got = s.load_training(uuid);
    EXPECT_EQ(got.run_id, t.run_id);
    EXPECT_EQ(got.spec.model, "demo:mlp");
    EXPECT_EQ(got.spec.data, "data.pt");
    EXPECT_EQ(got.spec.steps, 4);
    EXPECT_EQ(got.spec.batch_size, 8);
    EXPECT_EQ(got.spec.loss, "mse");
    EXPECT_EQ(got.spec.optimizer, "adamw");
    EXPECT_EQ(got.spec.lr, 0.125);
    EXPECT_EQ(got.spec.momentum, 0.5);
    EXPECT_EQ(got.spec.weight_decay, 0.25);
    EXPECT_EQ(got.spec.precision, Precision::Bf16);
    EXPECT_EQ(got.spec.scaler.init_scale, 1024);
    EXPECT_EQ(got.spec.scaler.growth_interval, 2);
    EXPECT_EQ(got.spec.accumulate, 3);
    EXPECT_EQ(got.spec.lr_schedule, "cosine");
    EXPECT_EQ(got.spec.keep_fp32, std::vector<std::string>{"head"});
    EXPECT_EQ(got.spec.seed, 7u);
    EXPECT_EQ(got.backend.name, "test cpu");
    EXPECT_EQ(got.backend.compute_capability, "9.0");
    EXPECT_EQ(got.backend.cuda_device_count, 2);
    EXPECT_EQ(got.model.modules, (std::vector<std::string>{"", "head"}));
    EXPECT_EQ(got.model.weights_sha256, "def");
    EXPECT_EQ(got.started_at, t.started_at);
    EXPECT_EQ(got.warnings, std::vector<std::string>{"a warning"});
    EXPECT_EQ(got.checkpoints, std::vector<std::string>{"/tmp/ckpt-2.pt"});
    ASSERT_EQ(got.steps.size(), 4u);
    EXPECT_EQ(got.steps[1].nonfinite_stage, "gradient");
    ASSERT_TRUE(got.steps[1].origin);
    EXPECT_EQ(got.steps[1].origin->grad_fn, "MmBackward0");
    // totals by the engine's rule
    const auto want = training_totals(t.steps, t.spec.scaler);
    EXPECT_EQ(got.iterations, 4);
    EXPECT_EQ(got.skipped, 1);
    EXPECT_EQ(got.effective_updates, 3);
    EXPECT_EQ(got.final_scale, want.final_scale);
    EXPECT_EQ(got.final_scale, 512.0);
}

TEST(StoreRead, LoadTrainingRefusesOtherRuns) {
    TempDir d;
    Store s(d.file("runs.sqlite"));
    const auto r = make_run();
    record(s, r);
    EXPECT_THROW(s.load_training(r.run_id), InputError);
    EXPECT_THROW(s.load_training("nope"), InputError);
}

TEST(StoreRead, AMalformedTrainingHeaderNamesTheColumn) {
    TempDir d;
    const auto path = d.file("runs.sqlite");
    std::string uuid;
    {
        Store s(path);
        uuid = record_training(s, make_training(2));
    }
    for (const char* header : {"[1,", "{\"batch_size\": \"many\"}", "{\"spec\": {\"model\": 3}}", "[1]"}) {
        raw_exec(path, std::string("DROP TRIGGER IF EXISTS runs_criteria_immutable; UPDATE runs SET header_json='") +
                           header + "'");
        const auto m = error_of([&] { Store(path).load_training(uuid); });
        EXPECT_NE(m.find(path + ": run " + uuid + ": column runs.header_json"), std::string::npos)
            << header << ": " << m;
        EXPECT_THROW(Store(path).load_training(uuid), StoreError) << header;
    }
}

TEST(StoreRead, BenchmarksReadBackAsValues) {
    TempDir d;
    Store s(d.file("runs.sqlite"));
    const auto r = make_run();
    record(s, r);
    BenchResult b;
    b.model = r.model;
    b.probes.sha256 = "123";
    b.backend.device = "cpu";
    b.batch = 32;
    b.train = true;
    b.timer = "steady_clock";
    b.memory = "rss";
    b.figures = {{Precision::Fp32, 2.0, 1.5, 2.5, 1 << 20, 1.0, 1.0},
                 {Precision::Fp16, 1.0, 0.5, 1.5, 1 << 19, 2.0, 0.5}};
    BenchSpec spec;
    spec.precisions = {Precision::Fp16};
    Validation v;
    v.precision = Precision::Fp16;
    v.run = r.run_id;
    v.criteria.atol = 0.25;
    s.record_benchmark(b, spec, {v});
    const auto rows = s.benchmarks(r.run_id);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_TRUE(rows[0].validated);
    EXPECT_EQ(rows[0].result.batch, 32);
    EXPECT_TRUE(rows[0].result.train);
    EXPECT_EQ(rows[0].result.timer, "steady_clock");
    EXPECT_EQ(rows[0].result.model.weights_sha256, "def");
    ASSERT_EQ(rows[0].result.figures.size(), 2u);
    EXPECT_EQ(rows[0].result.figures[1].precision, Precision::Fp16);
    EXPECT_EQ(rows[0].result.figures[1].p10_ms, 0.5);
    EXPECT_EQ(rows[0].result.figures[1].peak_bytes, 1 << 19);
    EXPECT_EQ(rows[0].result.figures[1].speedup, 2.0);
    // the run a benchmark relies on and the gate's rule: unvalidated when a precision has none
    s.record_benchmark(b, spec, {v, Validation{}});
    const auto both = s.benchmarks(r.run_id);
    ASSERT_EQ(both.size(), 2u);
    EXPECT_NE(both[0].validated, both[1].validated);
}

TEST(StoreRead, AMalformedBenchmarkNamesTheColumn) {
    TempDir d;
    const auto path = d.file("runs.sqlite");
    const auto r = make_run();
    {
        Store s(path);
        record(s, r);
    }
    raw_exec(path,
             "INSERT INTO benchmarks(uuid, run_id, validated, model_sha256, probes_sha256, device, created_at, "
             "result_json) VALUES('b1', 1, 1, '', '', 'cpu', '2025', '{\"figures\": 3}')");
    const auto m = error_of([&] { Store(path).benchmarks(r.run_id); });
    EXPECT_NE(m.find(path + ": run " + r.run_id + ": benchmark b1: column benchmarks.result_json"), std::string::npos)
        << m;
}

TEST(StoreRead, StoredCriteriaKeepWhetherTheUserChoseMetricAndThreshold) {
    TempDir d;
    Store s(d.file("runs.sqlite"));
    for (bool chosen : {false, true}) {
        auto r = make_run();
        r.criteria.quality_metric = QualityMetric::Mse;
        r.criteria.quality_metric_set = chosen;
        r.criteria.quality_threshold = 0.5;
        r.criteria.quality_threshold_set = chosen;
        r.spec.criteria = r.criteria;
        record(s, r);
        const auto got = s.load_run(r.run_id);
        EXPECT_EQ(got.criteria.quality_metric_set, chosen);
        EXPECT_EQ(got.criteria.quality_threshold_set, chosen);
        EXPECT_EQ(got.spec.criteria.quality_threshold_set, chosen);
        EXPECT_EQ(got.criteria.quality_metric, QualityMetric::Mse);
        EXPECT_EQ(got.criteria.fixed_at, r.criteria.fixed_at);
    }
}

TEST(StoreRead, TheStoredSpecIsTheSpecRun) {
    // A recorded spec is what "keep in FP32 and re-run" replays: its precisions must come back as
    // they were run (they were appended to RunSpec's default {fp16, bf16}), the output choice too.
    TempDir d;
    Store s(d.file("runs.sqlite"));
    auto r = make_run();
    r.spec.precisions = {Precision::Bf16};
    r.spec.keep_fp32 = {"blocks.1.*"};
    r.spec.criteria.output = "cls";
    r.criteria.output = "cls";
    record(s, r);
    const auto got = s.load_run(r.run_id);
    EXPECT_EQ(got.spec.precisions, std::vector<Precision>{Precision::Bf16});
    EXPECT_EQ(got.spec.keep_fp32, std::vector<std::string>{"blocks.1.*"});
    EXPECT_EQ(got.spec.criteria.output, "cls");
    EXPECT_EQ(got.criteria.output, "cls");
}
