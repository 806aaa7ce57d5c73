// SPDX-License-Identifier: MIT
// The built-in demo incident (ampscope --demo): torch.save files Python reads as a user's job
// wrote them, whose FP16 replay breaks in embed and whose replay with embed kept in FP32 does not.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ampscope/engine/replay.h"

namespace {

using namespace ampscope;

std::string temp_folder() {
    char dir[] = "/tmp/ampscope-demo-incident-XXXXXX";
    const char* made = mkdtemp(dir);
    return made ? std::string(made) : std::string();
}

/// What Python's torch.load reads from the files: the checkpoint's keys, the optimizer's and
/// scaler's kinds, and whether embed's FP16 output of the batch overflows while FP32's does not.
std::string python_reads(const ReplaySpec& s) {
    const std::string code =
        "import sys, torch\n"
        "c = torch.load(sys.argv[1], weights_only=True); b = torch.load(sys.argv[2], weights_only=True)\n"
        "w = c['model']['embed.weight']; x = b['inputs']\n"
        "print(sorted(c), c['optimizer']['param_groups'][0]['lr'], c['scaler']['scale'], list(x.shape),"
        " b['labels'].tolist(), bool((x.half() @ w.half().T).isinf().any()), bool((x @ w.T).isinf().any()))\n";
    const std::string script = std::filesystem::path(s.checkpoint).parent_path() / "read.py";
    std::ofstream(script) << code;
    FILE* p = popen(
        (std::string(AMPSCOPE_PYTHON) + " -W ignore " + script + " " + s.checkpoint + " " + s.batch).c_str(), "r");
    std::string out;
    char buf[4096];
    while (p && fgets(buf, sizeof buf, p)) out += buf;
    if (p) pclose(p);
    return out;
}

}  // namespace

TEST(DemoIncident, PythonReadsTheFilesAndTheirFp16EmbedOverflows) {
    const std::string dir = temp_folder();
    ASSERT_FALSE(dir.empty());
    const ReplaySpec spec = demo_incident(dir);
    EXPECT_EQ(spec.model, "demo:transformer");
    EXPECT_EQ(python_reads(spec),
              "['model', 'optimizer', 'scaler'] 0.01 1024.0 [8, 8, 16] [0, 1, 2, 3, 0, 1, 2, 3] True False\n");
    std::filesystem::remove_all(dir);
}

TEST(DemoIncident, ReplaysBreakingInEmbedAndKeepingEmbedInFp32Remedies) {
    const std::string dir = temp_folder();
    ASSERT_FALSE(dir.empty());
    const ReplaySpec spec = demo_incident(dir);
    const ReplayResult original = run_replay(spec);
    ASSERT_TRUE(original.first_nonfinite.has_value());
    EXPECT_EQ(original.first_nonfinite->stage, ReplayStageKind::Forward);
    EXPECT_EQ(original.first_nonfinite->side, ReplaySide::Amp);
    EXPECT_EQ(original.first_nonfinite->module, "embed");
    EXPECT_EQ(original.first_nonfinite->step, 0);
    ASSERT_EQ(original.steps.size(), 4u);
    for (const auto& s : original.steps) EXPECT_TRUE(s.skipped) << "step " << s.step;
    EXPECT_EQ(original.steps.back().scale_after, 1024.0 / 16);
    EXPECT_EQ(original.checkpoint_format, "dict");
    EXPECT_EQ(original.optimizer_groups.kind, "sgd");

    ReplaySpec remedy = spec;
    remedy.keep_fp32 = {original.first_nonfinite->module};
    const ReplayResult fixed = run_replay(remedy);
    EXPECT_FALSE(fixed.first_nonfinite.has_value());
    ASSERT_EQ(fixed.steps.size(), 4u);
    for (const auto& s : fixed.steps) {
        EXPECT_FALSE(s.skipped) << "step " << s.step;
        EXPECT_NEAR(s.loss_amp, s.loss_ref, 1e-3) << "step " << s.step;
    }
    // the FP32 reference is the same job on both sides
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(fixed.steps[i].loss_ref, original.steps[i].loss_ref);
    // written again, the files are the same bytes: the demo replays the same incident every time
    EXPECT_EQ(demo_incident(dir).checkpoint, spec.checkpoint);
    EXPECT_EQ(run_replay(spec).checkpoint_sha256, original.checkpoint_sha256);
    std::filesystem::remove_all(dir);
}
