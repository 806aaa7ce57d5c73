// SPDX-License-Identifier: MIT
// The advisor's verifying run, injected: a set the search's own passes accepted is advice
// (Found) only when its verifying run accepts it too, else Unverified (the set still reported).
// demo:mlp with tolerances tight enough that its AMP passes fail and FP32 regions fix them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ampscope/engine/advise.h"
#include "ampscope/engine/errors.h"

using namespace ampscope;

namespace {

AdviseSpec mlp_spec() {
    AdviseSpec a;
    a.run.model = "demo:mlp";
    a.run.probes = "demo";
    a.run.device = "cpu";
    a.run.criteria.atol = 1e-6;  // tight: the AMP passes are rejected, FP32 regions fix them
    a.run.criteria.rtol = 0;
    a.granularity = parse_granularity("leaf");
    return a;
}

/// Counts the passes run, independently of the advisor's own count, and the search's
/// evaluations (one "search" progress call each).
struct Counting : ProgressObserver {
    int passes = 0, searched = 0;
    void progress(const std::string& stage, int done, int) override {
        if (stage.rfind("pass ", 0) == 0 && done == 0) ++passes;
        if (stage == "search") ++searched;
    }
};

TEST(AdviseVerify, ARejectedVerifyingRunMakesTheSetUnverified) {
    AdviseSpec spec = mlp_spec();
    std::vector<std::vector<std::string>> asked;
    Verdict verdict = Verdict::Rejected;
    spec.verify = [&](const std::vector<std::string>& keep) {
        asked.push_back(keep);
        return verdict;
    };
    Counting counted;
    const AdviseResult r = advise(spec, &counted);
    ASSERT_EQ(r.outcome, AdviseResult::Outcome::Unverified) << r.message;
    EXPECT_EQ(to_string(r.outcome), "unverified");
    ASSERT_EQ(asked.size(), 1u) << "one verifying run, of the set found";
    EXPECT_EQ(asked[0], r.keep_fp32);
    EXPECT_FALSE(r.keep_fp32.empty()) << "the search's set is still reported";
    EXPECT_NE(r.message.find("verifying run was rejected"), std::string::npos) << r.message;
    EXPECT_EQ(counted.passes, r.passes_used) << "the advisor's pass count against the observer's";
    EXPECT_EQ(counted.searched, r.evaluations);

    verdict = Verdict::Accepted;  // the same search, accepted by its verifying run: advice
    const AdviseResult ok = advise(spec);
    EXPECT_EQ(ok.outcome, AdviseResult::Outcome::Found) << ok.message;
    EXPECT_EQ(ok.keep_fp32, r.keep_fp32);
    ASSERT_EQ(asked.size(), 2u);

    spec.verify = nullptr;  // no verifier (the GUI verifies later): Found, not yet verified
    EXPECT_EQ(advise(spec).outcome, AdviseResult::Outcome::Found);
}

/// Advising a recorded run, from either front end (advise_spec_of): the run's spec without its
/// kept sets, and a refusal when its model or probe files are no longer those it ran on (the
/// GUI once advised a replaced model silently: only the CLI compared the hashes).
TEST(AdviseRecorded, RefusesAModelOrProbeSetChangedSinceTheRun) {
    RunResult r;
    r.run_id = "run-1";
    r.spec = mlp_spec().run;
    r.spec.keep_fp32 = {"fc1"};
    r.criteria = r.spec.criteria;
    r.criteria.fixed_at = "2026-12-06T00:00:00Z";
    const RunInputs then = identify_inputs(r.spec.model, r.spec.probes, r.spec.device, r.spec.seed);
    r.model = then.model;
    r.probes = then.probes;

    AdviseSpec a = advise_spec_of(r, parse_granularity("leaf"));
    EXPECT_TRUE(a.run.keep_fp32.empty()) << "the advice starts from no kept set";
    EXPECT_TRUE(a.run.criteria.fixed_at.empty());
    EXPECT_EQ(a.run.advised_from, "run-1");
    EXPECT_EQ(a.run.criteria.atol, 1e-6);
    EXPECT_NE(advise(a).outcome, AdviseResult::Outcome::InvalidReference) << "the same files: advised";

    const auto refused = [&](RunResult changed, const std::string& file, const std::string& what) {
        try {
            advise(advise_spec_of(changed, parse_granularity("leaf")));
            ADD_FAILURE() << what << ": advised although it changed since the run";
        } catch (const InputError& e) {
            EXPECT_EQ(e.file(), file);
            EXPECT_NE(e.expected().find("the " + what + " changed since run run-1"), std::string::npos) << e.what();
        }
    };
    RunResult m = r;
    m.model.sha256 = std::string(64, '0');
    refused(m, "demo:mlp", "model");
    RunResult w = r;
    w.model.weights_sha256 = std::string(64, '0');
    refused(w, "demo:mlp", "model's weights");
    RunResult p = r;
    p.probes.sha256 = std::string(64, '0');
    refused(p, "demo", "probe set");
}

}  // namespace
