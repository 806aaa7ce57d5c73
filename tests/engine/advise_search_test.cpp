// SPDX-License-Identifier: MIT
// The advisor's torch-free parts: candidate modules at a granularity, the minimal-set search
// (against synthetic criteria whose answer is known), the Python snippet.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "ampscope/engine/advise.h"
#include "ampscope/engine/errors.h"

namespace ampscope {
namespace {

const std::vector<std::string> kModules = {"",
                                           "embed",
                                           "blocks",
                                           "blocks.0",
                                           "blocks.0.attn",
                                           "blocks.0.attn.qkv",
                                           "blocks.0.attn.proj",
                                           "blocks.0.mlp",
                                           "blocks.0.mlp.up",
                                           "blocks.0.mlp.down",
                                           "blocks.1",
                                           "blocks.1.norm",
                                           "head"};

TEST(AdviseCandidates, LeafBlockAndDepth) {
    EXPECT_EQ(candidate_modules(kModules, parse_granularity("leaf")),
              (std::vector<std::string>{"embed", "blocks.0.attn.qkv", "blocks.0.attn.proj", "blocks.0.mlp.up", "blocks.0.mlp.down",
                                        "blocks.1.norm", "head"}));
    EXPECT_EQ(candidate_modules(kModules, parse_granularity("block")), (std::vector<std::string>{"embed", "blocks.0", "blocks.1", "head"}));
    EXPECT_EQ(candidate_modules(kModules, parse_granularity("1")), (std::vector<std::string>{"embed", "blocks", "head"}));
    EXPECT_EQ(candidate_modules(kModules, parse_granularity("3")),
              (std::vector<std::string>{"embed", "blocks.0.attn", "blocks.0.mlp", "blocks.1.norm", "head"}));
}

TEST(AdviseCandidates, GranularityRefusedWithItsName) {
    for (const char* bad : {"", "banana", "0", "-1", "1.5", "10000"}) {
        try {
            parse_granularity(bad);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find("--granularity"), std::string::npos) << e.what();
        }
    }
}

/// Criteria met exactly when every module of `needed` is in the set (monotone).
struct Needs {
    std::set<std::string> needed;
    int calls = 0;
    bool operator()(const std::vector<std::string>& s) {
        ++calls;
        return std::all_of(needed.begin(), needed.end(), [&](const std::string& m) { return std::find(s.begin(), s.end(), m) != s.end(); });
    }
};

std::vector<std::string> names(int n) {
    std::vector<std::string> v;
    for (int i = 0; i < n; ++i) v.push_back("layers." + std::to_string(i));
    return v;
}

TEST(AdviseSearch, FindsExactlyTheNeededModulesWithinTheBound) {
    std::mt19937 rng(7);
    for (int n : {2, 3, 50, 500})
        for (int k : {1, 2, 3, 4}) {
            if (k > n) continue;
            for (int trial = 0; trial < 20; ++trial) {
                const auto all = names(n);
                auto shuffled = all;
                std::shuffle(shuffled.begin(), shuffled.end(), rng);
                Needs needs{{shuffled.begin(), shuffled.begin() + k}};
                const auto out = minimal_passing_set(all, std::ref(needs));
                ASSERT_TRUE(out.found);
                EXPECT_EQ(std::set<std::string>(out.set.begin(), out.set.end()), needs.needed) << "n " << n << " k " << k;
                EXPECT_EQ(out.evaluations, needs.calls) << "every set evaluated once";
                const int bound = 2 * k * int(std::ceil(std::log2(double(n)))) + 2;
                EXPECT_LE(out.evaluations, std::max(bound, 2 + 2 * k)) << "n " << n << " k " << k;
                if (n >= 4) {
                    EXPECT_LE(out.evaluations, bound) << "n " << n << " k " << k;
                }
            }
        }
}

TEST(AdviseSearch, EmptySetAndNoSet) {
    Needs none{{}};
    auto out = minimal_passing_set(names(10), std::ref(none));
    EXPECT_TRUE(out.found);
    EXPECT_TRUE(out.set.empty());
    EXPECT_EQ(out.evaluations, 1);
    // needs a module that is not a candidate: the whole list fails
    Needs outside{{"root_op"}};
    out = minimal_passing_set(names(10), std::ref(outside));
    EXPECT_FALSE(out.found);
    EXPECT_EQ(out.evaluations, 2);
}

TEST(AdviseSearch, MinimalEvenWhenCriteriaAreNotMonotone) {
    // passes with {a} alone or with {b, c}; a large set containing b and c but not a passes.
    // Whatever the order, no single member of the answer may be removable.
    const std::vector<std::string> all = {"b", "c", "x", "a", "y"};
    auto passes = [](const std::vector<std::string>& s) {
        auto has = [&](const char* m) { return std::find(s.begin(), s.end(), m) != s.end(); };
        return (has("a") && !has("x")) || (has("b") && has("c"));
    };
    const auto out = minimal_passing_set(all, passes);
    ASSERT_TRUE(out.found);
    EXPECT_TRUE(passes(out.set));
    for (size_t i = 0; i < out.set.size(); ++i) {
        auto without = out.set;
        without.erase(without.begin() + long(i));
        EXPECT_FALSE(passes(without)) << "removable: " << out.set[i];
    }
}

TEST(AdviseSearch, DropsAMemberThatLaterAdditionsMadeUnnecessary) {
    // Exactly {a}, {c}, {c, d} and {a, b, c, d} pass (found by simulating the search over random
    // non-monotone criteria): the bisection alone ends with {d, c}, where d can be dropped.
    const std::set<std::set<std::string>> passing = {{"a"}, {"c"}, {"c", "d"}, {"a", "b", "c", "d"}};
    auto passes = [&](const std::vector<std::string>& s) { return passing.count(std::set<std::string>(s.begin(), s.end())) > 0; };
    const auto out = minimal_passing_set({"a", "b", "c", "d"}, passes);
    ASSERT_TRUE(out.found);
    EXPECT_EQ(out.set, std::vector<std::string>{"c"});
}

TEST(AdviseSnippet, NamesEveryModuleQuoted) {
    const auto s = python_snippet({"blocks.0.up", "head\"x"}, Precision::Bf16);
    EXPECT_NE(s.find("\"blocks.0.up\","), std::string::npos);
    EXPECT_NE(s.find("\"head\\\"x\","), std::string::npos);
    EXPECT_NE(s.find("torch.autocast(device_type=device, enabled=False)"), std::string::npos);
    EXPECT_NE(s.find("bfloat16"), std::string::npos);
}

}  // namespace
}  // namespace ampscope
