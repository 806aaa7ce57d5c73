// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include "ampscope/engine/errors.h"
#include "ampscope/storage/json_io.h"

using namespace ampscope;

TEST(CriteriaJson, ParsesEveryKey) {
    auto c = json::parse_criteria(R"({"atol": 0.5, "rtol": 0.25, "heads": [{"name": "logits", "begin": 0, "end": 10,
        "atol": 1e-3, "rtol": 1e-2}], "tie_tolerance": 0.01, "tie_rule": "abstain", "max_flips": 3,
        "quality_metric": "mse", "quality_threshold": 0.2, "allow_nonfinite": true})",
                                  "c.json");
    EXPECT_EQ(c.atol, 0.5);
    EXPECT_EQ(c.rtol, 0.25);
    ASSERT_EQ(c.heads.size(), 1u);
    EXPECT_EQ(c.heads[0].name, "logits");
    EXPECT_EQ(c.heads[0].end, 10);
    EXPECT_EQ(c.tie_rule, TieRule::Abstain);
    EXPECT_EQ(c.max_flips, 3);
    EXPECT_EQ(c.quality_metric, QualityMetric::Mse);
    EXPECT_TRUE(c.quality_metric_set);
    EXPECT_TRUE(c.allow_nonfinite);
}

TEST(CriteriaJson, ErrorsNameFileAndField) {
    auto expect_error = [](const std::string& text, const std::string& field) {
        try {
            json::parse_criteria(text, "crit.json");
            FAIL() << "no error for " << text;
        } catch (const InputError& e) {
            EXPECT_EQ(e.file(), "crit.json");
            EXPECT_EQ(e.field(), field) << e.what();
        }
    };
    expect_error("{", "");
    expect_error(R"({"atol": "x"})", "atol");
    expect_error(R"({"tie_rule": "random"})", "tie_rule");
    expect_error(R"({"max_flips": 1.5})", "max_flips");
    expect_error(R"({"bogus": 1})", "bogus");
    expect_error(R"({"heads": [{"begin": "a"}]})", "heads[0]");
    expect_error("[1, 2]", "");
}

TEST(CriteriaJson, RangesAreCheckedNotWrapped) {
    auto expect_error = [](const std::string& text, const std::string& field, const std::string& words) {
        try {
            json::parse_criteria(text, "crit.json");
            FAIL() << "no error for " << text;
        } catch (const InputError& e) {
            EXPECT_EQ(e.file(), "crit.json") << e.what();
            EXPECT_EQ(e.field(), field) << e.what();
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
    };
    expect_error(R"({"atol": 1e400})", "atol", "out of range");
    expect_error(R"({"heads": [{"begin": 0, "end": 2, "rtol": -1e999}]})", "rtol", "out of range");
    expect_error(R"({"max_flips": 4294967297})", "max_flips", "from 0 to 2147483647");
    expect_error(R"({"max_flips": -1})", "max_flips", "from 0 to 2147483647");
    expect_error(R"({"max_flips": 18446744073709551615})", "max_flips", "from 0 to 2147483647");
    expect_error(R"({"heads": [{"begin": 0, "end": 4294967297}]})", "heads[0].end", "to 2147483647");
    expect_error(R"({"heads": [{"begin": 3, "end": 3}]})", "heads[0].end", "end > begin");
    expect_error(R"({"heads": [{"name": 7, "begin": 0, "end": 3}]})", "heads[0].name", "a string");
    expect_error(R"({"atol": -0.1})", "atol", ">= 0");
    expect_error(R"({"tie_tolerance": "nan"})", "tie_tolerance", "a finite number");
    expect_error(R"({"rtol": true})", "rtol", "a finite number");
    expect_error(R"({"heads": [{"begin": 0, "end": 2, "atol": -1}]})", "heads[0].atol", ">= 0");
    expect_error(R"({"quality_threshold": null})", "quality_threshold", "a finite number");
    const auto c =
        json::parse_criteria(R"({"max_flips": 2147483647, "heads": [{"begin": 0, "end": 2147483647}]})", "c.json");
    EXPECT_EQ(c.max_flips, 2147483647);
    EXPECT_EQ(c.heads[0].end, 2147483647);
}

TEST(CriteriaJson, OneMappingBothWays) {
    // What --json shows of criteria reads back as a criteria file, flags included.
    Criteria c;
    c.atol = 0.5;
    c.heads = {{"logits", 0, 3, 1e-3, 2e-2}};
    c.tie_rule = TieRule::Abstain;
    c.quality_metric = QualityMetric::MaxAbsError;
    c.quality_metric_set = false;  // a default chosen by the model's kind, not the user
    c.quality_threshold = 0.25;
    c.quality_threshold_set = true;
    c.fixed_at = "2026-11-30T10:00:00.000Z";
    const auto back = json::parse_criteria(json::criteria_to_json(c), "out.json");
    EXPECT_EQ(back.atol, 0.5);
    ASSERT_EQ(back.heads.size(), 1u);
    EXPECT_EQ(back.heads[0].rtol, 2e-2);
    EXPECT_EQ(back.tie_rule, TieRule::Abstain);
    EXPECT_EQ(back.quality_metric, QualityMetric::MaxAbsError);
    EXPECT_FALSE(back.quality_metric_set);
    EXPECT_TRUE(back.quality_threshold_set);
    EXPECT_EQ(back.fixed_at, c.fixed_at);
}

TEST(BackendJson, TheContractsKeys) {
    BackendReport b;
    b.compute_capability = "9.0";
    b.cuda_device_count = 2;
    b.bf16_supported = false;
    b.num_threads = 16;
    const auto text = json::backend_to_json(b, -1);
    for (const char* key : {"\"torch\":", "\"compute_capability\":\"9.0\"", "\"cuda_device_count\":2",
                            "\"bf16_supported\":false", "\"num_threads\":16"})
        EXPECT_NE(text.find(key), std::string::npos) << key << " in " << text;
}

// ---- the FP32-regions file (storage/input_file.h): one reader for the CLI and the GUI ----------

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "ampscope/storage/input_file.h"

namespace {

struct RegionsFile : ::testing::Test {
    std::string dir;
    void SetUp() override {
        char tmpl[] = "/tmp/ampscope-regions-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir = tmpl;
    }
    void TearDown() override {
        const int rc = std::system(("rm -rf '" + dir + "'").c_str());
        (void)rc;
    }
    std::string file(const std::string& name, const std::string& bytes) {
        const std::string p = dir + "/" + name;
        std::ofstream(p, std::ios::binary) << bytes;
        return p;
    }
    /// The InputError's message; fails the test when the file is accepted.
    std::string refused(const std::string& path, bool allow_unverified = false) {
        try {
            storage::read_regions_file(path, "--keep-fp32-file", allow_unverified);
        } catch (const InputError& e) {
            return e.what();
        }
        ADD_FAILURE() << path << " accepted";
        return "";
    }
};

using Globs = std::vector<std::string>;

TEST_F(RegionsFile, TextLinesCommentsAndLineEndings) {
    EXPECT_EQ(
        storage::read_regions_file(file("a.txt", "# regions\nblocks.0.*\r\n\n  head\t# the classifier\n"), "f", false),
        (Globs{"blocks.0.*", "head"}));
    EXPECT_EQ(storage::read_regions_file(file("bom.txt",
                                              "\xEF\xBB\xBF"
                                              "fc1\nfc2\n"),
                                         "f", false),
              (Globs{"fc1", "fc2"}));
    const auto spaced = refused(file("spaced.txt", "fc1\nfc2, fc3\n"));
    EXPECT_NE(spaced.find("line 2"), std::string::npos) << spaced;
    EXPECT_NE(spaced.find("no spaces or commas"), std::string::npos) << spaced;
    EXPECT_NE(refused(file("none.txt", "# nothing\n\n")).find("no FP32 region"), std::string::npos);
}

TEST_F(RegionsFile, AdviseJson) {
    EXPECT_EQ(storage::read_regions_file(file("a.json", R"({"outcome": "found", "keep_fp32": ["embed", "head"]})"), "f",
                                         false),
              (Globs{"embed", "head"}));
    EXPECT_EQ(storage::read_regions_file(file("bom.json",
                                              "\xEF\xBB\xBF"
                                              R"({"keep_fp32": ["embed"]})"),
                                         "f", false),
              (Globs{"embed"}));
    EXPECT_EQ(storage::read_regions_file(file("none.json", R"({"outcome": "already_accepted", "keep_fp32": []})"), "f",
                                         false),
              Globs{});
    const auto unverified = file("u.json", R"({"outcome": "unverified", "keep_fp32": ["fc1"]})");
    EXPECT_NE(refused(unverified).find("field 'outcome'"), std::string::npos) << refused(unverified);
    EXPECT_EQ(storage::read_regions_file(unverified, "f", true), (Globs{"fc1"}));
    for (const auto& [name, text, words] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"broken.json", R"({"keep_fp32": ["fc1",)", "not valid JSON"},
             {"nolist.json", R"({"keep": ["fc1"]})", "\"keep_fp32\" list"},
             {"numbers.json", R"({"keep_fp32": [1]})", "non-empty module-path strings"},
             {"array.json", R"(["fc1"])", "\"keep_fp32\" list"}}) {
        const auto msg = refused(file(name, text));
        EXPECT_NE(msg.find("field 'keep_fp32'"), std::string::npos) << msg;
        EXPECT_NE(msg.find(words), std::string::npos) << msg;
    }
}

/// An advice's outcome and kept_in are the words advise writes: a wrong type or an unknown word
/// (a hand-edited file, or one that was never advise's) is refused naming the field, its text made
/// visible, never taken for 'found' or for the list's own kind.
TEST_F(RegionsFile, OutcomeAndKeptInAreAdvisesWords) {
    for (const auto& [name, text, field] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"o-list.json", R"({"keep_fp32": ["fc1"], "outcome": ["x"]})", "outcome"},
             {"o-number.json", R"({"keep_fp32": ["fc1"], "outcome": 7})", "outcome"},
             {"o-word.json", R"({"keep_fp32": ["fc1"], "outcome": "garbage"})", "outcome"},
             {"o-esc.json", R"({"keep_fp32": ["fc1"], "outcome": "\u001b]0;pwned\u0007unverified"})", "outcome"},
             {"k-number.json", R"({"keep_fp32": ["fc1"], "kept_in": 5})", "kept_in"}}) {
        const auto msg = refused(file(name, text));
        EXPECT_NE(msg.find("field '" + field + "'"), std::string::npos) << name << ": " << msg;
        EXPECT_NE(msg.find("as ampscope-cli advise writes it"), std::string::npos) << name << ": " << msg;
        EXPECT_EQ(msg.find('\x1b'), std::string::npos) << name << ": " << msg;
    }
    EXPECT_NE(refused(file("o-esc2.json", R"({"keep_fp32": ["fc1"], "outcome": "\u001bX"})")).find("\\x1bX"),
              std::string::npos);
    // null is absent (a file written by hand may say so)
    EXPECT_EQ(storage::read_regions_file(
                  file("nulls.json", R"({"keep_fp32": ["fc1"], "outcome": null, "kept_in": null})"), "f", false),
              Globs{"fc1"});
}

/// The BF16 set of FP8 passes (keep_bf16) from an FP8 recipe's advice; each list refuses the
/// other kind of advice, naming the list it holds.
TEST_F(RegionsFile, Bf16SetOfAnFp8Advice) {
    const auto bf16 = storage::RegionsList::KeepBf16;
    const auto fp8_advice =
        file("fp8.json", R"({"outcome": "found", "kept_in": "bf16", "keep_fp32": [], "keep_bf16": ["fc1", "out"]})");
    EXPECT_EQ(storage::read_regions_file(fp8_advice, "f", false, bf16), (Globs{"fc1", "out"}));
    EXPECT_EQ(storage::read_regions_file(file("g.txt", "# left in BF16\nblocks.*.attn\n"), "f", false, bf16),
              Globs{"blocks.*.attn"});
    const auto fp16_advice = file("fp16.json", R"({"outcome": "found", "keep_fp32": ["embed"]})");
    try {
        storage::read_regions_file(fp16_advice, "f", false, bf16);
        ADD_FAILURE() << "an fp16/bf16 advice read as the BF16 set";
    } catch (const InputError& e) {
        EXPECT_EQ(e.field(), "keep_fp32");
        EXPECT_NE(e.expected().find("stay in FP32"), std::string::npos) << e.what();
    }
    const auto fp8_as_fp32 = refused(fp8_advice);  // and the other way round
    EXPECT_NE(fp8_as_fp32.find("field 'keep_bf16'"), std::string::npos) << fp8_as_fp32;
    const auto unverified = file("u8.json", R"({"outcome": "unverified", "keep_fp32": [], "keep_bf16": ["fc1"]})");
    EXPECT_THROW(storage::read_regions_file(unverified, "f", false, bf16), InputError);
    EXPECT_EQ(storage::read_regions_file(unverified, "f", true, bf16), Globs{"fc1"});
    try {
        storage::read_regions_file(file("nolist8.json", R"({"keep": ["fc1"]})"), "f", false, bf16);
        ADD_FAILURE() << "no keep_bf16 list accepted";
    } catch (const InputError& e) {
        EXPECT_EQ(e.field(), "keep_bf16");
        EXPECT_NE(e.expected().find("\"keep_bf16\" list"), std::string::npos) << e.what();
    }
}

TEST_F(RegionsFile, NotTextAndNotRegularFiles) {
    EXPECT_NE(refused(file("elf.bin", std::string("\x7f"
                                                  "ELF\x02\x01\x00\x00",
                                                  8)))
                  .find("not text"),
              std::string::npos);
    EXPECT_NE(refused(file("latin1.txt", "caf\xe9\n")).find("not UTF-8"), std::string::npos);
    EXPECT_NE(refused(file("nul.txt", std::string("fc1\0\n", 5))).find("control bytes"), std::string::npos);
    const std::string fifo = dir + "/regions.fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_NE(refused(fifo).find("a FIFO"), std::string::npos);  // refused before any read: never blocks
    EXPECT_NE(refused(dir).find("a directory"), std::string::npos);
    EXPECT_NE(refused(dir + "/missing.txt").find("cannot open"), std::string::npos);
    EXPECT_NE(refused(file("big.txt", "fc1\n" + std::string(2 << 20, '#'))).find("larger than 1 MB"),
              std::string::npos);
    EXPECT_NE(refused("/dev/zero").find("a device"), std::string::npos);
}

}  // namespace
