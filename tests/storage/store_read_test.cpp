// SPDX-License-Identifier: MIT
// The store's typed readers: a training run and the benchmarks of a run read back as values,
// and stored values in the one JSON mapping of their type.
#include <functional>

#include <nlohmann/json.hpp>

#include "ampscope/engine/rules.h"
#include "ampscope/storage/replay_record.h"
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
    t.spec.loss = LossKind::Mse;
    t.spec.optimizer = OptimizerKind::Adamw;
    t.spec.lr = 0.125;
    t.spec.momentum = 0.5;
    t.spec.weight_decay = 0.25;
    t.spec.precision = Precision::Bf16;
    t.spec.scaler.init_scale = 1024;
    t.spec.scaler.growth_interval = 2;
    t.spec.accumulate = 3;
    t.spec.lr_schedule = LrSchedule::Cosine;
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
    EXPECT_EQ(got.spec.loss, LossKind::Mse);
    EXPECT_EQ(got.spec.optimizer, OptimizerKind::Adamw);
    EXPECT_EQ(got.spec.lr, 0.125);
    EXPECT_EQ(got.spec.momentum, 0.5);
    EXPECT_EQ(got.spec.weight_decay, 0.25);
    EXPECT_EQ(got.spec.precision, Precision::Bf16);
    EXPECT_EQ(got.spec.scaler.init_scale, 1024);
    EXPECT_EQ(got.spec.scaler.growth_interval, 2);
    EXPECT_EQ(got.spec.accumulate, 3);
    EXPECT_EQ(got.spec.lr_schedule, LrSchedule::Cosine);
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
    // a figure of a precision no build writes: refused, not read as a second FP32 figure
    raw_exec(path, "UPDATE benchmarks SET result_json='{\"figures\": [{\"precision\": \"fp9\"}]}'");
    const auto m2 = error_of([&] { Store(path).benchmarks(r.run_id); });
    EXPECT_NE(m2.find("benchmarks.result_json"), std::string::npos) << m2;
    EXPECT_NE(m2.find("figures[].precision"), std::string::npos) << m2;
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

namespace {

/// make_run's six samples run by two ranks under torchrun: rank 0 the first four, rank 1 the
/// last two.
RunResult ranked_run() {
    auto r = make_run(6);
    r.ranks = {{0, "node-a", "cuda:0", 0, 4, 1.5, 0}, {1, "node-b", "cuda:1", 4, 2, 0.75, 1234}};
    return r;
}

void expect_ranks(const RunResult& got, const RunResult& want) {
    ASSERT_EQ(got.ranks.size(), want.ranks.size());
    for (size_t i = 0; i < got.ranks.size(); ++i) {
        const auto &g = got.ranks[i], &w = want.ranks[i];
        EXPECT_EQ(g.rank, w.rank) << i;
        EXPECT_EQ(g.host, w.host) << i;
        EXPECT_EQ(g.device, w.device) << i;
        EXPECT_EQ(g.first_sample, w.first_sample) << i;
        EXPECT_EQ(g.samples, w.samples) << i;
        EXPECT_EQ(g.seconds, w.seconds) << i;
        EXPECT_EQ(g.bytes, w.bytes) << i;
    }
}

}  // namespace

TEST(StoreRanks, ARunUnderTorchrunReadsBackItsRanks) {
    // Recorded as it progresses: the header knows the ranks' samples, the finished run their times.
    TempDir d;
    Store s(d.file("runs.sqlite"));
    const auto r = ranked_run();
    RunWriter w(s);
    auto header = r;
    header.passes.clear();
    header.comparisons.clear();
    for (auto& k : header.ranks) k.seconds = 0, k.bytes = 0;
    w.run_started(header);
    EXPECT_EQ(s.load_run(r.run_id).ranks.size(), 2u) << "the ranks are written with the run's header";
    for (const auto& p : r.passes) w.pass_finished(p);
    for (const auto& c : r.comparisons) w.comparison_finished(c);
    w.run_finished(r);
    const auto got = s.load_run(r.run_id);
    expect_ranks(got, r);
    EXPECT_EQ(js(got), js(r));
    // a single-process run has none
    const auto one = make_run();
    record(s, one);
    EXPECT_TRUE(s.load_run(one.run_id).ranks.empty());
}

TEST(StoreRanks, ExportAndImportCarryTheRanks) {
    TempDir d;
    Store a(d.file("a.sqlite"));
    const auto r = ranked_run();
    a.insert_run(r, "completed", "", {}, {});
    expect_ranks(a.load_run(r.run_id), r);
    export_runs(a, {r.run_id}, d.file("x.ampscope"));
    Store b(d.file("b.sqlite"));
    EXPECT_EQ(import_file(b, d.file("x.ampscope")).added, 1);
    expect_ranks(b.load_run(r.run_id), r);
    EXPECT_EQ(js(b.load_run(r.run_id)), js(r));
}

TEST(StoreRanks, ImportRefusesRanksThatDoNotTileTheSamples) {
    TempDir d;
    Store a(d.file("a.sqlite"));
    a.insert_run(ranked_run(), "completed", "", {}, {});
    Store into(d.file("into.sqlite"));
    int n = 0;
    auto expect_refused = [&](const std::string& edit, const std::string& field, const std::string& detail) {
        const auto f = d.file("bad" + std::to_string(n++) + ".ampscope");
        export_runs(a, {a.list_runs()[0].uuid}, f);
        raw_exec(f, edit);
        const auto m = error_of([&] { import_file(into, f); });
        EXPECT_NE(m.find(f), std::string::npos) << m;
        EXPECT_NE(m.find(field), std::string::npos) << edit << ": " << m;
        EXPECT_NE(m.find(detail), std::string::npos) << edit << ": " << m;
        EXPECT_TRUE(into.list_runs().empty()) << edit << ": nothing may be half-imported";
    };
    expect_refused("UPDATE run_ranks SET rank=-1 WHERE rank=0", "run_ranks.rank", "rank -1");
    expect_refused("UPDATE run_ranks SET samples=-2 WHERE rank=1", "run_ranks.samples", "-2 samples");
    expect_refused("UPDATE run_ranks SET first_sample=3 WHERE rank=1", "run_ranks.first_sample", "overlaps");
    expect_refused("UPDATE run_ranks SET first_sample=5 WHERE rank=1", "run_ranks.first_sample", "missing");
    expect_refused("UPDATE run_ranks SET samples=1 WHERE rank=1", "run_ranks.samples", "ran 5 samples");
    expect_refused("UPDATE run_ranks SET seconds=-1 WHERE rank=1", "run_ranks.seconds", "rank 1");
    expect_refused("UPDATE run_ranks SET bytes=-1 WHERE rank=1", "run_ranks.bytes", "rank 1");
    expect_refused("UPDATE run_ranks SET first_sample='four' WHERE rank=1", "run_ranks.first_sample", "wrong type");
}

TEST(StoreRanks, RanksThatDoNotTileTheSamplesAreNotRecorded) {
    TempDir d;
    Store s(d.file("runs.sqlite"));
    auto r = ranked_run();
    r.ranks[1].first_sample = 3;
    const auto m = error_of([&] { s.insert_run(r, "completed", "", {}, {}); });
    EXPECT_NE(m.find("run_ranks.first_sample"), std::string::npos) << m;
    EXPECT_TRUE(s.list_runs().empty());
}

TEST(StoreRanks, ADatabaseWithoutTheRanksTableOpens) {
    // A database of schema version 7 (before run_ranks): read as it is when opened read-only,
    // migrated (the table added) when opened to record.
    TempDir d;
    const auto path = d.file("v7.sqlite");
    const auto r = make_run();
    {
        Store s(path);
        record(s, r);
    }
    raw_exec(path, undo_migrations(7));
    {
        Store s(path, Store::Mode::ReadOnly);
        EXPECT_EQ(s.schema_version(), 7);
        EXPECT_TRUE(s.load_run(r.run_id).ranks.empty());
        EXPECT_EQ(js(s.load_run(r.run_id)), js(r));
    }
    Store s(path);
    EXPECT_EQ(s.schema_version(), kSchemaVersion);
    EXPECT_EQ(js(s.load_run(r.run_id)), js(r));
    const auto ranked = ranked_run();
    record(s, ranked);
    expect_ranks(s.load_run(ranked.run_id), ranked);
}

TEST(RunJson, RanksOnlyWhenTheRunHasThem) {
    const auto one = json::run_to_json(make_run(), false, -1);  // compact
    EXPECT_EQ(one.find("\"ranks\""), std::string::npos) << "a single-process run's JSON is unchanged";
    const auto two = json::run_to_json(ranked_run(), false, -1);
    EXPECT_NE(two.find(R"("ranks":[{"rank":0,"host":"node-a","device":"cuda:0","first_sample":0,"samples":4,)"
                       R"("seconds":1.5,"bytes":0},{"rank":1,"host":"node-b","device":"cuda:1","first_sample":4,)"
                       R"("samples":2,"seconds":0.75,"bytes":1234}])"),
              std::string::npos)
        << two;
}

/// A replay's first non-finite stage and side are stored by their names and read back as the
/// values; a name outside the vocabulary (not written by a build) is refused naming the file and
/// the field.
TEST(StoreRead, ReplayFirstNonFiniteStageAndSideByName) {
    ReplayResult r;
    r.run_id = make_uuid();
    r.spec.steps = 3;  // as replay records them: every step asked, in order from 0
    for (int i = 0; i < 3; ++i) r.steps.emplace_back().step = i;
    r.first_nonfinite = ReplayStage{2, ReplayStageKind::Unscale, ReplaySide::Both, "fc1", "aten::mul", ""};
    const auto text = replay_to_json(r);
    auto j = nlohmann::json::parse(text);
    EXPECT_EQ(j["first_nonfinite"]["stage"], "unscale");
    EXPECT_EQ(j["first_nonfinite"]["side"], "both");
    const auto back = replay_from_json(text, "r.json");
    ASSERT_TRUE(back.first_nonfinite);
    EXPECT_EQ(back.first_nonfinite->stage, ReplayStageKind::Unscale);
    EXPECT_EQ(back.first_nonfinite->side, ReplaySide::Both);
    EXPECT_EQ(back.first_nonfinite->step, 2);
    for (const std::string field : {"stage", "side"}) {
        auto bad = j;
        bad["first_nonfinite"][field] = "sideways";
        const auto m = error_of([&] { replay_from_json(bad.dump(), "r.json"); });
        EXPECT_NE(m.find("r.json"), std::string::npos) << m;
        EXPECT_NE(m.find("first_nonfinite." + field), std::string::npos) << m;
        EXPECT_NE(m.find("'sideways'; expected"), std::string::npos) << m;
    }
}

/// A replay records every step it was asked for, in order from 0, and its first non-finite stage
/// at one of them: a record that says otherwise (hand-edited, or not written by a build) is
/// refused naming the file and the field, not drawn as steps out of order or a stage at a step
/// that never ran.
TEST(StoreRead, ReplayStepsOutOfOrderOrMissingAreRefusedByField) {
    ReplayResult r;
    r.run_id = make_uuid();
    r.spec.steps = 3;
    for (int i = 0; i < 3; ++i) r.steps.emplace_back().step = i;
    r.first_nonfinite = ReplayStage{1, ReplayStageKind::Forward, ReplaySide::Amp, "fc1", "aten::mm", ""};
    const auto good = nlohmann::json::parse(replay_to_json(r));
    EXPECT_EQ(replay_from_json(good.dump(), "r.json").steps.size(), 3u);
    const auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& field,
                             const std::string& expected) {
        auto bad = good;
        edit(bad);
        const auto m = error_of([&] { replay_from_json(bad.dump(), "r.json"); });
        EXPECT_NE(m.find("r.json"), std::string::npos) << m;
        EXPECT_NE(m.find(field), std::string::npos) << field << ": " << m;
        EXPECT_NE(m.find(expected), std::string::npos) << field << ": " << m;
    };
    refused([](auto& j) { std::swap(j["steps"][0], j["steps"][1]); }, "steps[0].step", "0");
    refused([](auto& j) { j["steps"][2]["step"] = 7; }, "steps[2].step", "2");
    refused([](auto& j) { j["steps"].erase(2); }, "steps", "3 steps, as inputs.steps says");
    refused([](auto& j) { j["inputs"]["steps"] = 0; }, "inputs.steps", "an integer from 1");
    refused([](auto& j) { j["first_nonfinite"]["step"] = 3; }, "first_nonfinite.step", "a step the replay ran");
    refused([](auto& j) { j["first_nonfinite"]["step"] = -1; }, "first_nonfinite.step", "a step the replay ran");
    // a replay recorded before inputs.steps: its steps in order, its stage at one of them
    auto old = good;
    old["inputs"].erase("steps");
    EXPECT_EQ(replay_from_json(old.dump(), "r.json").steps.size(), 3u);
    old["first_nonfinite"]["step"] = 5;
    const auto m = error_of([&] { replay_from_json(old.dump(), "r.json"); });
    EXPECT_NE(m.find("first_nonfinite.step"), std::string::npos) << m;
}
