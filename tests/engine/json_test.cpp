// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include "ampscope/engine/errors.h"
#include "ampscope/storage/json_io.h"

using namespace ampscope;

TEST(CriteriaJson, ParsesEveryKey) {
    auto c = json::parse_criteria(R"({"atol": 0.5, "rtol": 0.25, "heads": [{"name": "logits", "begin": 0, "end": 10,
        "atol": 1e-3, "rtol": 1e-2}], "tie_tolerance": 0.01, "tie_rule": "abstain", "max_flips": 3,
        "quality_metric": "mse", "quality_threshold": 0.2, "allow_nonfinite": true})", "c.json");
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
