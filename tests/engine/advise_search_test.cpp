// SPDX-License-Identifier: MIT
// The advisor's torch-free parts: candidate modules at a granularity, the minimal-set search
// (against synthetic criteria whose answer is known), the Python snippet.
#include <gtest/gtest.h>

#include <algorithm>
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
              (std::vector<std::string>{"embed", "blocks.0.attn.qkv", "blocks.0.attn.proj", "blocks.0.mlp.up",
                                        "blocks.0.mlp.down", "blocks.1.norm", "head"}));
    EXPECT_EQ(candidate_modules(kModules, parse_granularity("block")),
              (std::vector<std::string>{"embed", "blocks.0", "blocks.1", "head"}));
    EXPECT_EQ(candidate_modules(kModules, parse_granularity("1")),
              (std::vector<std::string>{"embed", "blocks", "head"}));
    EXPECT_EQ(candidate_modules(kModules, parse_granularity("3")),
              (std::vector<std::string>{"embed", "blocks.0.attn", "blocks.0.mlp", "blocks.1.norm", "head"}));
}

TEST(AdviseCandidates, GranularityRefusedWithItsName) {
    for (const char* bad : {"", "banana", "0", "-1", "1.5", "10000"}) {
        try {
            parse_granularity(bad);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const InputError& e) {
            EXPECT_EQ(e.field(), "granularity") << e.what();  // the field; the CLI names its flag (named_by_flag)
            EXPECT_EQ(e.file(), "") << e.what();
        }
    }
}

/// Criteria met exactly when every module of `needed` is in the set (monotone). Counts, on its
/// own, how often it is called and which distinct sets (as sets) it was asked about.
struct Needs {
    std::set<std::string> needed;
    int calls = 0;
    std::set<std::set<std::string>> asked{};
    bool operator()(const std::vector<std::string>& s) {
        ++calls;
        asked.emplace(s.begin(), s.end());
        return std::all_of(needed.begin(), needed.end(),
                           [&](const std::string& m) { return std::find(s.begin(), s.end(), m) != s.end(); });
    }
};

std::vector<std::string> names(int n) {
    std::vector<std::string> v;
    for (int i = 0; i < n; ++i) v.push_back("layers." + std::to_string(i));
    return v;
}

/// The documented bound on the calls for n candidates and an answer of k: 2 k ceil(log2 n) + 2
/// (ceil(log2 1) = 0), one fewer when the caller already saw the empty set fail.
int bound(int n, int k, bool empty_set_fails) {
    int log2n = 0;
    while ((1 << log2n) < n) ++log2n;
    return 2 * k * log2n + 2 - (empty_set_fails ? 1 : 0);
}

/// The search with `needed` (names(n) indices), checked against the criteria's own count: the
/// exact set, each distinct set asked once, the reported count equal to the calls, the empty
/// set never asked when the caller says it fails. Returns the calls.
int checked_search(int n, const std::set<std::string>& needed, bool empty_set_fails) {
    Needs needs{needed};
    const auto out = minimal_passing_set(names(n), std::ref(needs), empty_set_fails);
    const std::string what = "n " + std::to_string(n) + " k " + std::to_string(needed.size()) +
                             (empty_set_fails ? " (empty set known)" : "");
    EXPECT_TRUE(out.found) << what;
    EXPECT_EQ(std::set<std::string>(out.set.begin(), out.set.end()), needed) << what;
    EXPECT_EQ(needs.calls, int(needs.asked.size())) << what << ": a set was evaluated twice";
    EXPECT_EQ(out.evaluations, needs.calls) << what;
    EXPECT_EQ(needs.asked.count({}), empty_set_fails ? 0u : 1u) << what;
    EXPECT_LE(needs.calls, bound(n, int(needed.size()), empty_set_fails)) << what;
    return needs.calls;
}

TEST(AdviseSearch, FindsExactlyTheNeededModulesWithinTheBound) {
    std::mt19937 rng(7);
    for (int n : {1, 2, 3, 4, 5, 50, 500})
        for (int k : {1, 2, 3, 4}) {
            if (k > n) continue;
            for (int trial = 0; trial < 20; ++trial) {
                auto shuffled = names(n);
                std::shuffle(shuffled.begin(), shuffled.end(), rng);
                const std::set<std::string> needed(shuffled.begin(), shuffled.begin() + k);
                const int calls = checked_search(n, needed, false);
                // the empty set known to fail (the advisor's plain AMP passes): exactly one call fewer
                EXPECT_EQ(checked_search(n, needed, true), calls - 1) << "n " << n << " k " << k;
            }
        }
}

TEST(AdviseSearch, ExactCallsForOneAndTwoCandidates) {
    // n = 1: the empty set, then {layers.0}: the bound 2 k ceil(log2 1) + 2 = 2, met exactly.
    EXPECT_EQ(checked_search(1, {"layers.0"}, false), 2);
    EXPECT_EQ(checked_search(1, {"layers.0"}, true), 1);
    // n = 2 (bound 4 for k = 1, 6 for k = 2): {}, {0, 1}, then the bisection's {0}; when layers.1
    // is the one needed, {1} is asked too (the bound, met); both needed: nothing more to ask.
    EXPECT_EQ(checked_search(2, {"layers.0"}, false), 3);
    EXPECT_EQ(checked_search(2, {"layers.1"}, false), 4);
    EXPECT_EQ(checked_search(2, {"layers.0", "layers.1"}, false), 4);
    EXPECT_EQ(checked_search(2, {"layers.1"}, true), 3);
}

TEST(AdviseSearch, EmptySetAndNoSet) {
    Needs none{{}};
    auto out = minimal_passing_set(names(10), std::ref(none));
    EXPECT_TRUE(out.found);
    EXPECT_TRUE(out.set.empty());
    EXPECT_EQ(none.calls, 1);
    EXPECT_EQ(out.evaluations, 1);
    // needs a module that is not a candidate: the whole list fails
    Needs outside{{"root_op"}};
    out = minimal_passing_set(names(10), std::ref(outside));
    EXPECT_FALSE(out.found);
    EXPECT_EQ(outside.calls, 2);
    EXPECT_EQ(out.evaluations, 2);
    Needs outside_known{{"root_op"}};  // the empty set known to fail: only the whole list asked
    const auto all = names(10);
    out = minimal_passing_set(all, std::ref(outside_known), true);
    EXPECT_FALSE(out.found);
    EXPECT_EQ(outside_known.asked, (std::set<std::set<std::string>>{{all.begin(), all.end()}}));
}

TEST(AdviseVerification, ARejectedVerifyingRunMakesTheSetUnverified) {
    AdviseResult found;
    found.outcome = AdviseResult::Outcome::Found;
    found.keep_fp32 = {"blocks.0.up", "head"};
    found.message = "2 modules kept in FP32 make every AMP pass meet the criteria; dropping any one fails";
    for (auto verdict : {Verdict::Rejected, Verdict::InvalidReference}) {
        auto r = found;
        apply_verification(r, verdict);
        EXPECT_EQ(r.outcome, AdviseResult::Outcome::Unverified);
        EXPECT_EQ(to_string(r.outcome), "unverified");
        EXPECT_EQ(r.keep_fp32, found.keep_fp32) << "the set is still reported";
        EXPECT_NE(r.message.find("verifying run was " + to_string(verdict)), std::string::npos) << r.message;
        EXPECT_NE(r.message.find("refuses it as a keep-FP32 file unless unverified sets are allowed"),
                  std::string::npos)
            << r.message;
    }
    auto r = found;
    apply_verification(r, Verdict::Accepted);
    EXPECT_EQ(r.outcome, AdviseResult::Outcome::Found);
    EXPECT_EQ(r.message, found.message);
    AdviseResult whole;  // only a set found can be unverified
    whole.outcome = AdviseResult::Outcome::WholeModelOnly;
    apply_verification(whole, Verdict::Rejected);
    EXPECT_EQ(whole.outcome, AdviseResult::Outcome::WholeModelOnly);
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
    auto passes = [&](const std::vector<std::string>& s) {
        return passing.count(std::set<std::string>(s.begin(), s.end())) > 0;
    };
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
