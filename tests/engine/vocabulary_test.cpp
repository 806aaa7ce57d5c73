// SPDX-License-Identifier: MIT
// The engine's vocabulary (vocabulary.h): every name parses back to its value, and a bad name is
// refused naming the field and the accepted names. The names are what storage writes: fixed here.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/run.h"
#include "ampscope/engine/vocabulary.h"

namespace ampscope {
namespace {

/// Each name formats from the value it parses to, in the enum's order.
template <class E, class Parse>
void expect_round_trip(const std::vector<std::string>& names, Parse parse, int first_value = 0) {
    for (size_t i = 0; i < names.size(); ++i) {
        const E v = parse(names[i]);
        EXPECT_EQ(int(v), first_value + int(i)) << names[i];
        EXPECT_EQ(to_string(v), names[i]);
    }
}

/// The message of the InputError `fn` throws (empty when none).
template <class Fn>
std::string refusal(Fn fn, std::string* field = nullptr) {
    try {
        fn();
    } catch (const InputError& e) {
        if (field) *field = e.field();
        return e.what();
    }
    return {};
}

TEST(Vocabulary, NamesAreTheStoredStrings) {
    EXPECT_EQ(loss_kind_names(), (std::vector<std::string>{"ce", "mse", "lm", "model"}));
    EXPECT_EQ(optimizer_kind_names(), (std::vector<std::string>{"sgd", "adam", "adamw"}));
    EXPECT_EQ(lr_schedule_names(), (std::vector<std::string>{"constant", "cosine"}));
    EXPECT_EQ(replay_stage_names(),
              (std::vector<std::string>{"checkpoint", "input", "forward", "loss", "backward", "unscale", "optimizer"}));
    EXPECT_EQ(replay_side_names(), (std::vector<std::string>{"amp", "reference", "both"}));
    EXPECT_EQ(review_status_names(), (std::vector<std::string>{"open", "accepted", "rejected"}));
    EXPECT_EQ(real_gemm_names(), (std::vector<std::string>{"auto", "on", "off"}));
}

TEST(Vocabulary, EveryNameRoundTrips) {
    expect_round_trip<LossKind>(
        loss_kind_names(), [](const std::string& s) { return parse_loss_kind(s); }, 1);
    EXPECT_EQ(parse_loss_kind(""), LossKind::Auto);
    EXPECT_EQ(to_string(LossKind::Auto), "");
    expect_round_trip<OptimizerKind>(optimizer_kind_names(),
                                     [](const std::string& s) { return parse_optimizer_kind(s); });
    expect_round_trip<LrSchedule>(lr_schedule_names(), [](const std::string& s) { return parse_lr_schedule(s); });
    expect_round_trip<ReplayStageKind>(replay_stage_names(),
                                       [](const std::string& s) { return parse_replay_stage(s); });
    expect_round_trip<ReplaySide>(replay_side_names(), [](const std::string& s) { return parse_replay_side(s); });
    expect_round_trip<ReviewStatus>(review_status_names(), [](const std::string& s) { return parse_review_status(s); });
    expect_round_trip<RealGemm>(real_gemm_names(), [](const std::string& s) { return parse_real_gemm(s); });
    expect_round_trip<MxScaling>(mx_scaling_names(), [](const std::string& s) { return parse_mx_scaling(s); });
}

TEST(Vocabulary, ABadNameIsRefusedNamingTheFieldAndTheNames) {
    std::string field;
    EXPECT_EQ(refusal([] { parse_loss_kind("CE"); }, &field), "field 'loss': 'CE'; expected ce, mse, lm or model");
    EXPECT_EQ(field, "loss");
    EXPECT_EQ(refusal([] { parse_optimizer_kind("rmsprop"); }),
              "field 'optimizer': 'rmsprop'; expected sgd, adam or adamw");
    EXPECT_EQ(refusal([] { parse_lr_schedule("linear"); }),
              "field 'lr_schedule': 'linear'; expected constant or cosine");
    EXPECT_EQ(refusal([] { parse_replay_stage("step"); }),
              "field 'stage': 'step'; expected checkpoint, input, forward, loss, backward, unscale or optimizer");
    EXPECT_EQ(refusal([] { parse_replay_side(""); }), "field 'side': ''; expected amp, reference or both");
    EXPECT_EQ(refusal([] { parse_review_status("closed", "review"); }, &field),
              "field 'review': 'closed'; expected open, accepted or rejected");
    EXPECT_EQ(field, "review");
    EXPECT_EQ(refusal([] { parse_real_gemm("yes"); }, &field),
              "field 'fp8_real_gemm': 'yes'; expected auto, on or off");
}

}  // namespace
}  // namespace ampscope
