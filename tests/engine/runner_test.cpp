// SPDX-License-Identifier: MIT
// The demo story through the engine's public API (no LibTorch needed here).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <ctime>
#include <cstring>
#include <set>
#include <unistd.h>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/run.h"
#include "model/model.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/script.h>

using namespace ampscope;

namespace {

std::vector<std::string> ids_with_tag(const RunResult& r, const std::string& tag) {
    std::vector<std::string> out;
    for (const auto& s : r.samples)
        if (s.tag == tag) out.push_back(s.id);
    return out;
}

const PassResult& pass(const RunResult& r, Precision p) {
    for (const auto& x : r.passes)
        if (x.precision == p) return x;
    throw std::runtime_error("no pass");
}

class RecordingSink : public RunSink {
public:
    std::vector<std::string> events;
    void run_started(const RunResult& h) override {
        events.push_back("started");
        fixed_at = h.criteria.fixed_at;
    }
    void pass_finished(const PassResult& p) override {
        events.push_back("pass " + to_string(p.precision));
        if (first_pass_finished.empty()) first_pass_finished = now_iso8601();
    }
    void comparison_finished(const Comparison& c) override { events.push_back("compare " + to_string(c.precision)); }
    void run_finished(const RunResult&) override { events.push_back("finished"); }
    void run_failed(const std::string& status, const std::string&) override { events.push_back(status); }
    std::string fixed_at;
    std::string first_pass_finished;  ///< wall clock when the FP32 reference pass was reported
};

/// Milliseconds since the epoch of an ISO-8601 UTC time with milliseconds ("...T14:10:27.366Z").
int64_t ms_of(const std::string& iso) {
    std::tm tm{};
    int ms = 0;
    if (std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                    &tm.tm_sec, &ms) != 7)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return int64_t(timegm(&tm)) * 1000 + ms;
}

}  // namespace

TEST(DemoStory, TransformerEdgeSamplesOverflowInFp16Only) {
    RunSpec spec;
    spec.model = "demo:transformer";
    spec.probes = "demo";
    spec.device = "cpu";
    RecordingSink sink;
    auto r = run_comparison(spec, &sink);
    const auto edge = ids_with_tag(r, "edge");
    ASSERT_FALSE(edge.empty());
    EXPECT_TRUE(pass(r, Precision::Fp32).nonfinite_samples.empty());
    EXPECT_TRUE(pass(r, Precision::Bf16).nonfinite_samples.empty());
    EXPECT_EQ(pass(r, Precision::Fp16).nonfinite_samples, edge);
    // where it is born: the embed projection's matmul, for exactly the edge samples
    const auto& o = pass(r, Precision::Fp16).origin;
    ASSERT_TRUE(o.has_value());
    EXPECT_EQ(o->stage, "forward");
    EXPECT_EQ(o->module, "embed");
    EXPECT_EQ(o->op, "aten::matmul");
    EXPECT_EQ(o->samples, edge);
    EXPECT_FALSE(pass(r, Precision::Bf16).origin.has_value());
    EXPECT_FALSE(pass(r, Precision::Fp32).origin.has_value());
    // later non-finite layers are propagation, not new origins
    int origins = 0;
    for (const auto& l : pass(r, Precision::Fp16).layers) origins += l.origin;
    EXPECT_EQ(origins, 1);
    // some boundary samples flip under AMP
    for (const auto& c : r.comparisons) {
        int boundary_flips = 0;
        for (const auto& f : c.flips) boundary_flips += f.tag == "boundary";
        EXPECT_GT(boundary_flips, 0) << to_string(c.precision);
    }
    EXPECT_EQ(r.verdict, Verdict::Rejected);
    // criteria fixed before the first pass and reported first
    EXPECT_EQ(sink.events, (std::vector<std::string>{"started", "pass fp32", "pass fp16", "compare fp16", "pass bf16",
                                                     "compare bf16", "finished"}));
    EXPECT_EQ(sink.fixed_at, r.criteria.fixed_at);
}

TEST(Runner, CriteriaFixedBeforeTheReferencePassBegins) {
    // fixed before the reference pass began (when it was reported, less its duration): criteria
    // fixed any later (after a pass, at the end) would fail this by the pass's duration. One
    // sample a batch, so that the pass lasts well beyond the timestamps' millisecond resolution
    // (the demo's whole probe set in one batch took under 2 ms on a fast run).
    RunSpec spec;
    spec.model = "demo:transformer";
    spec.probes = "demo";
    spec.device = "cpu";
    spec.precisions = {Precision::Bf16};
    spec.batch_size = 1;
    RecordingSink sink;
    const auto r = run_comparison(spec, &sink);
    const int64_t fixed = ms_of(r.criteria.fixed_at),
                  began = ms_of(sink.first_pass_finished) - int64_t(pass(r, Precision::Fp32).seconds * 1000);
    ASSERT_GT(fixed, 0) << r.criteria.fixed_at;
    EXPECT_GT(pass(r, Precision::Fp32).seconds, 0.005);  // longer than the timestamps' resolution: the check can tell
    EXPECT_LE(fixed, began + 1) << r.criteria.fixed_at << " vs first pass reported at " << sink.first_pass_finished;
}

TEST(DemoStory, KeepFp32OnTheOriginRemovesNonFinite) {
    RunSpec spec;
    spec.device = "cpu";
    spec.precisions = {Precision::Fp16};
    spec.keep_fp32 = {"embed"};
    auto r = run_comparison(spec);
    EXPECT_TRUE(pass(r, Precision::Fp16).nonfinite_samples.empty());
    EXPECT_EQ(pass(r, Precision::Fp16).keep_fp32, std::vector<std::string>{"embed"});
    // the embed op ran without autocast: its output stays float32
    for (const auto& l : pass(r, Precision::Fp16).layers) {
        if (l.module == "embed") {
            EXPECT_EQ(l.dtype, "Float");
        }
    }
}

TEST(DemoStory, DeterministicAcrossRuns) {
    RunSpec spec;
    spec.device = "cpu";
    spec.inspect = false;
    auto a = run_comparison(spec), b = run_comparison(spec);
    EXPECT_EQ(a.model.weights_sha256, b.model.weights_sha256);
    EXPECT_EQ(a.probes.sha256, b.probes.sha256);
    for (size_t i = 0; i < a.passes.size(); ++i) {  // bitwise (NaN included)
        ASSERT_EQ(a.passes[i].outputs.size(), b.passes[i].outputs.size());
        EXPECT_EQ(0, std::memcmp(a.passes[i].outputs.data(), b.passes[i].outputs.data(),
                                 a.passes[i].outputs.size() * sizeof(float)));
    }
    spec.seed = 1;
    auto c = run_comparison(spec);
    EXPECT_NE(a.model.weights_sha256, c.model.weights_sha256);
}

TEST(DemoStory, BoundarySamplesAreWithinOneThousandthInFp32) {
    RunSpec spec;
    spec.device = "cpu";
    spec.inspect = false;
    auto r = run_comparison(spec);
    const auto& ref = r.passes[0];
    const int k = ref.num_outputs;
    int n = 0;
    for (size_t i = 0; i < r.samples.size(); ++i) {
        if (r.samples[i].tag != "boundary") continue;
        std::vector<float> s(ref.outputs.begin() + long(i) * k, ref.outputs.begin() + long(i + 1) * k);
        std::sort(s.rbegin(), s.rend());
        EXPECT_LT(s[0] - s[1], 1e-3f) << r.samples[i].id;
        ++n;
    }
    EXPECT_GE(n, 4);
}

TEST(Runner, CriteriaThatAcceptGiveAcceptedVerdict) {
    RunSpec spec;
    spec.device = "cpu";
    spec.precisions = {Precision::Bf16};
    spec.criteria.atol = 0.1;
    spec.criteria.max_flips = 40;
    auto r = run_comparison(spec);
    EXPECT_EQ(r.verdict, Verdict::Accepted);
}

TEST(Runner, BadInputsAreInputErrors) {
    auto expect_input_error = [](RunSpec spec, const std::string& needle) {
        spec.device = "cpu";
        try {
            run_comparison(spec);
            FAIL() << "no error, expected " << needle;
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    RunSpec s;
    s.model = "demo:nope";
    expect_input_error(s, "unknown demo model");
    s = {};
    s.keep_fp32 = {"nothing.*"};
    expect_input_error(s, "matches no module");
    s = {};
    s.precisions = {};
    expect_input_error(s, "field 'precision'");  // the field, not a CLI flag (the CLI maps it to --precision)
    s = {};
    s.criteria.atol = -1;
    expect_input_error(s, "atol");
    s = {};
    s.model = "/nonexistent/model.pt";
    expect_input_error(s, "file not found");
    s = {};
    s.device = "tpu";
    try {
        run_comparison(s);
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("expected cpu, cuda or cuda:N"), std::string::npos);
    }
}

TEST(Runner, CancelIsReportedToTheSink) {
    RunSpec spec;
    spec.device = "cpu";
    spec.batch_size = 4;
    RecordingSink sink;
    struct CancelAfterReference : ProgressObserver {
        void progress(const std::string& stage, int, int) override {
            if (stage == "pass fp16") cancel = true;
        }
    } progress;
    EXPECT_THROW(run_comparison(spec, &sink, &progress), Cancelled);
    EXPECT_EQ(sink.events.back(), "cancelled");
    EXPECT_NE(std::find(sink.events.begin(), sink.events.end(), "pass fp32"), sink.events.end());
}

/// A traced TorchScript model whose graph holds tensor constants (torch.tensor(...) in forward):
/// to_device moves them with the parameters and buffers, so a forward on another device meets no
/// constant left on the CPU. The meta device stands in for CUDA here (tools/gpu-check.sh's
/// ts-constants runs the same on cuda).
TEST(TorchScriptModel, GraphConstantsFollowTheDevice) {
    const auto dir = std::filesystem::temp_directory_path() / ("ampscope-ts-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto path = (dir / "const.pt").string();
    const std::string script =
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(8, 4)\n"
        "    def forward(self, x):\n"
        "        return self.fc(x) * torch.tensor([2.0, 1.0, 0.5, 1.0])\n"
        "torch.jit.trace(M().eval(), torch.randn(3, 8)).save('" +
        path + "')\n";
    const auto py = (dir / "make.py").string();
    {
        std::FILE* f = std::fopen(py.c_str(), "w");
        ASSERT_TRUE(f);
        std::fputs(script.c_str(), f);
        std::fclose(f);
    }
    ASSERT_EQ(std::system((std::string(AMPSCOPE_PYTHON) + " -W ignore " + py).c_str()), 0);
    auto m = torch::jit::load(path, at::kCPU);
    const auto constants = [&] {  // the devices of forward's tensor constants
        std::vector<at::Device> out;
        auto& fn = torch::jit::toGraphFunction(m.get_method("forward").function());
        for (auto* n : fn.graph()->nodes())
            if (n->kind() == c10::prim::Constant && n->hasAttribute(c10::attr::value) &&
                n->kindOf(c10::attr::value) == torch::jit::AttributeKind::t)
                out.push_back(n->t(c10::attr::value).device());
        return out;
    };
    ASSERT_FALSE(constants().empty()) << "the traced graph holds its tensor constant";
    // the meta device stands in for CUDA (Module::to refuses it: the parameters are not the point)
    ampscope::detail::move_graph_constants(m, at::Device(at::kMeta));
    for (const auto& d : constants()) EXPECT_TRUE(d.is_meta()) << d;
    // the engine's own model: moved to the CPU it loaded on, the forward is the file's
    auto model = ampscope::detail::load_model(path, 0);
    model->to_device(at::Device(at::kCPU));
    const auto x = at::randn({3, 8});
    EXPECT_TRUE(at::allclose(model->forward({x}), torch::jit::load(path).forward({x}).toTensor()));
    std::filesystem::remove_all(dir);
}
