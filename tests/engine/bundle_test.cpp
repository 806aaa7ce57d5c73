// SPDX-License-Identifier: MIT
// read_bundle (ampscope/engine/bundle.h): an incident bundle as the capture package writes it
// (docs/capture.md, tests/python for the package itself) reads back field by field; a bundle
// that is not one (a missing file, another version, a field of the wrong type, JSON nested too
// deep, a file name leaving the folder) is refused with InputError naming the file and field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/bundle.h"

namespace fs = std::filesystem;
using ampscope::InputError;
using ampscope::read_bundle;
using nlohmann::json;

namespace {

json good() {
    return json::parse(
        R"({"format": "ampscope-incident", "version": 1, "created_at": "2026-12-02T17:00:00+00:00", "step": 41200,
        "rank": 3, "local_rank": 3, "world_size": 8,
        "framework": {"name": "lightning", "version": "2.6.6", "torch": "2.11.0"},
        "detected": {"what": "grad", "detail": "non-finite gradients"},
        "precision": {"dtype": "float16", "device_type": "cuda", "keep_fp32": ["head", "blocks.*.ln"]},
        "loss": "ce", "clip_grad_norm": 1.0, "accumulation_steps": 2,
        "optimizer": {"class": "torch.optim.adamw.AdamW", "kind": "adamw", "fused": true, "foreach": null},
        "scaler": true, "files": {"model": "model.pt2", "checkpoint": "checkpoint.pt", "batch": "batch.pt"},
        "export_error": null})");
}

class Bundle : public ::testing::Test {
protected:
    void SetUp() override {
        std::string tmpl = (fs::temp_directory_path() / "ampscope-bundle-XXXXXX").string();
        ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
        dir = tmpl;
        for (const char* f : {"model.pt2", "checkpoint.pt", "batch.pt"}) std::ofstream(fs::path(dir) / f) << "x";
    }
    // Not std::filesystem::remove_all: in this binary it resolves into libtorch.so's copy, which
    // crashes (a null call); the shell removes the folder (as checkpoint_test does).
    void TearDown() override {
        const int rc = std::system(("rm -rf '" + dir + "'").c_str());
        (void)rc;
    }
    void write_text(const std::string& text) { std::ofstream(fs::path(dir) / "incident.json") << text; }
    void write(const json& j) { write_text(j.dump()); }
    /// The InputError's message; fails the test when read_bundle accepts the bundle.
    std::string refused() {
        try {
            read_bundle(dir);
        } catch (const InputError& e) {
            return e.what();
        }
        ADD_FAILURE() << "accepted";
        return "";
    }
    std::string dir;
};

TEST_F(Bundle, ReadsEveryField) {
    write(good());
    auto b = read_bundle(dir);
    EXPECT_EQ(b.model, (fs::path(dir) / "model.pt2").string());
    EXPECT_EQ(b.checkpoint, (fs::path(dir) / "checkpoint.pt").string());
    EXPECT_EQ(b.batch, (fs::path(dir) / "batch.pt").string());
    EXPECT_EQ(b.precision, "fp16");
    EXPECT_EQ(b.device_type, "cuda");
    EXPECT_EQ(b.keep_fp32, (std::vector<std::string>{"head", "blocks.*.ln"}));
    EXPECT_EQ(b.loss, "ce");
    ASSERT_TRUE(b.clip_grad_norm.has_value());
    EXPECT_EQ(*b.clip_grad_norm, 1.0);
    EXPECT_EQ(b.optimizer_kind, "adamw");
    EXPECT_EQ(b.optimizer_class, "torch.optim.adamw.AdamW");
    EXPECT_TRUE(b.scaler);
    EXPECT_EQ(b.step, 41200);
    EXPECT_EQ(b.rank, 3);
    EXPECT_EQ(b.world_size, 8);
    EXPECT_EQ(b.accumulation_steps, 2);
    EXPECT_EQ(b.detected_what, "grad");
    EXPECT_EQ(b.framework, "lightning");
    EXPECT_EQ(b.framework_version, "2.6.6");
    EXPECT_EQ(b.export_error, "");
    EXPECT_TRUE(b.origin_ranks.empty());
    auto j = good();
    j["origin_ranks"] = {3, 5};
    write(j);
    EXPECT_EQ(read_bundle(dir).origin_ranks, (std::vector<int64_t>{3, 5}));
}

// What the GUI's Replay tab and the CLI summary say of a torchrun incident: the rank that
// wrote the bundle and, where the ranks exchanged records, the ranks it started on.
TEST_F(Bundle, WordsNameTheRanksItStartedOn) {
    auto j = good();
    j["origin_ranks"] = {3, 5};
    write(j);
    ampscope::ReplayResult r;
    r.spec = ampscope::replay_spec_of(read_bundle(dir));
    ASSERT_TRUE(r.spec.incident.has_value());
    EXPECT_EQ(r.spec.incident->origin_ranks, (std::vector<int64_t>{3, 5}));
    EXPECT_EQ(ampscope::incident_in_words(r),
              "The job (lightning 2.6.6) saw non-finite gradients at step 41200 on rank 3 of 8, where it started "
              "(ranks 3 and 5); the "
              "replay does NOT reproduce it (a non-deterministic kernel, a data race or the hardware, or the bundle's "
              "batch is not the "
              "step's).");
    j["origin_ranks"] = {3};
    write(j);
    r.spec = ampscope::replay_spec_of(read_bundle(dir));
    EXPECT_NE(ampscope::incident_in_words(r).find("on rank 3 of 8, where it started (rank 3);"), std::string::npos);
    write(good());  // no exchange (no watch_ddp / watch_fsdp): the rank only
    r.spec = ampscope::replay_spec_of(read_bundle(dir));
    EXPECT_NE(ampscope::incident_in_words(r).find("at step 41200 on rank 3 of 8; the replay"), std::string::npos);
}

TEST_F(Bundle, ExportFailureLeavesTheModelToTheUser) {
    auto j = good();
    j["files"]["model"] = nullptr;
    j["export_error"] = "UserError: data-dependent control flow";
    j["clip_grad_norm"] = nullptr;
    write(j);
    fs::remove(fs::path(dir) / "model.pt2");
    auto b = read_bundle(dir);
    EXPECT_EQ(b.model, "");
    EXPECT_EQ(b.export_error, "UserError: data-dependent control flow");
    EXPECT_FALSE(b.clip_grad_norm.has_value());
    j["export_error"] = nullptr;  // no program and no reason
    write(j);
    EXPECT_NE(refused().find("export_error"), std::string::npos);
}

TEST_F(Bundle, MissingFilesAreNamed) {
    EXPECT_NE(refused().find("incident.json"), std::string::npos);
    write(good());
    fs::remove(fs::path(dir) / "batch.pt");
    auto msg = refused();
    EXPECT_NE(msg.find("batch.pt"), std::string::npos) << msg;
    EXPECT_NE(msg.find("files.batch"), std::string::npos) << msg;
    fs::create_directory(fs::path(dir) / "batch.pt");  // a folder where a file belongs
    EXPECT_NE(refused().find("batch.pt"), std::string::npos);
    EXPECT_THROW(read_bundle((fs::path(dir) / "checkpoint.pt").string()), InputError);  // not a folder
}

TEST_F(Bundle, WrongFormatVersionAndTypesAreNamed) {
    struct Case {
        const char* pointer;
        json value;
        const char* named;
    };
    const Case cases[] = {
        {"/format", "something-else", "format"},
        {"/version", 2, "version 1"},
        {"/version", "1", "version"},
        {"/step", "41200", "step"},
        {"/step", -1, "step"},
        {"/rank", 8, "rank"},
        {"/precision/dtype", "float32", "precision.dtype"},
        {"/precision/keep_fp32", "head", "precision.keep_fp32"},
        {"/precision/keep_fp32/0", 3, "precision.keep_fp32[0]"},
        {"/loss", "nll", "loss"},
        {"/clip_grad_norm", "1.0", "clip_grad_norm"},
        {"/clip_grad_norm", -1.0, "clip_grad_norm"},
        {"/optimizer/kind", "lion", "optimizer.kind"},
        {"/scaler", 1, "scaler"},
        {"/detected/what", "nan", "detected.what"},
        {"/files/checkpoint", "../checkpoint.pt", "files.checkpoint"},
        {"/files/batch", nullptr, "files.batch"},
        {"/files", json::array(), "files"},
        {"/origin_ranks", json::array({8}), "origin_ranks[0]"},
        {"/origin_ranks", "3", "origin_ranks"},
    };
    for (const auto& c : cases) {
        auto j = good();
        j[json::json_pointer(c.pointer)] = c.value;
        write(j);
        auto msg = refused();
        EXPECT_NE(msg.find(c.named), std::string::npos) << c.pointer << ": " << msg;
        EXPECT_NE(msg.find("incident.json"), std::string::npos) << c.pointer << ": " << msg;
    }
    auto j = good();
    j.erase("loss");
    write(j);
    EXPECT_NE(refused().find("'loss'"), std::string::npos);
}

TEST_F(Bundle, RepeatedRanksAndNonIntegerStepsAreNamed) {
    auto j = good();
    j["origin_ranks"] = {3, 5, 3};  // was read as "ranks 3, 5 and 3"
    write(j);
    auto msg = refused();
    EXPECT_NE(msg.find("origin_ranks[2]': 3 again; expected each rank once"), std::string::npos) << msg;
    j = good();
    j["step"] = 1e30;  // was "a JSON number; expected an integer"
    write(j);
    msg = refused();
    EXPECT_NE(msg.find("'step': 1e+30 is not an integer"), std::string::npos) << msg;
}

TEST_F(Bundle, BadJsonIsRefusedNotACrash) {
    write_text("{\"format\": ");
    EXPECT_NE(refused().find("not valid JSON"), std::string::npos);
    write_text("[1, 2]");
    EXPECT_NE(refused().find("expected an object"), std::string::npos);
    write_text(std::string(100000, '[') + std::string(100000, ']'));
    EXPECT_NE(refused().find("deeper than"), std::string::npos);
}

/// The contract between the Python writer and this reader: a bundle the capture package wrote
/// (tests/engine/bundle_writer.py) reads back with the job's settings.
TEST_F(Bundle, RealBundleFromThePackage) {
    const std::string cmd =
        std::string(AMPSCOPE_PYTHON) + " " + AMPSCOPE_TESTS_DIR + "/engine/bundle_writer.py '" + dir + "/out'";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    while (fgets(buf, sizeof buf, p)) out += buf;
    ASSERT_EQ(pclose(p), 0) << out;
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    ASSERT_FALSE(out.empty());
    auto b = read_bundle(out);
    EXPECT_EQ(b.step, 2);
    EXPECT_EQ(b.detected_what, "loss");
    EXPECT_EQ(b.framework, "pytorch");
    EXPECT_EQ(b.precision, "bf16");
    EXPECT_EQ(b.device_type, "cpu");
    EXPECT_EQ(b.keep_fp32, std::vector<std::string>{"2"});
    EXPECT_EQ(b.loss, "ce");
    EXPECT_EQ(b.optimizer_kind, "adamw");
    EXPECT_FALSE(b.scaler);
    ASSERT_TRUE(b.clip_grad_norm.has_value());
    EXPECT_EQ(*b.clip_grad_norm, 0.5);
    EXPECT_EQ(b.rank, 0);
    EXPECT_EQ(b.world_size, 1);
    EXPECT_EQ(b.export_error, "");
    EXPECT_EQ(b.model, (fs::path(out) / "model.pt2").string());
    EXPECT_EQ(b.checkpoint, (fs::path(out) / "checkpoint.pt").string());
    EXPECT_EQ(b.batch, (fs::path(out) / "batch.pt").string());
}

}  // namespace
