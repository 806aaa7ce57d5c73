// SPDX-License-Identifier: MIT
// Engine errors name the field ("data", "init_scale"), never a CLI flag: the CLI maps fields to its
// flags (app/cli/common.cpp, named_by_flag), the GUI to its dialog fields (ui/src/text/uitext.cpp).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/replay.h"
#include "model/model.h"
#include "run/pass.h"
#include "probes/probes.h"

namespace {

using namespace ampscope;

/// The InputError `fn` throws; fails the test when it throws none.
template <class Fn>
InputError refusal(Fn fn) {
    try {
        fn();
    } catch (const InputError& e) {
        return e;
    }
    ADD_FAILURE() << "no InputError";
    return InputError("", "", "");
}

/// demo:mlp under another kind: a model the built-in sets do not belong to.
std::unique_ptr<ampscope::detail::Model> not_a_demo_model() {
    auto m = ampscope::detail::load_model("demo:mlp", 1);
    m->info.kind = "torch.export";
    m->info.source = "user.pt2";
    return m;
}

std::string temp_folder() {
    char dir[] = "/tmp/ampscope-field-names-XXXXXX";
    const char* made = mkdtemp(dir);
    return made ? std::string(made) : std::string();
}

}  // namespace

TEST(FieldNames, BuiltInSetsOfAnotherModelNameTheirField) {
    auto model = not_a_demo_model();
    const InputError data = refusal([&] { ampscope::detail::load_training_data("demo", *model, 1); });
    EXPECT_EQ(data.file(), "demo");
    EXPECT_EQ(data.field(), "data") << data.what();
    for (const char* field : {"data", "batch_file"}) {  // a file that is not there: named as the caller names it
        const InputError missing =
            refusal([&] { ampscope::detail::load_training_data("/nonexistent/x.pt", *model, 1, true, field); });
        EXPECT_EQ(missing.file(), "/nonexistent/x.pt");
        EXPECT_EQ(missing.field(), field) << missing.what();
    }
    const InputError probes = refusal([&] { ampscope::detail::load_probes("demo", *model, 1); });
    EXPECT_EQ(probes.file(), "demo");
    EXPECT_EQ(probes.field(), "probes") << probes.what();
}

TEST(FieldNames, ReplayRemediesNameTheirFields) {
    const std::string dir = temp_folder();
    ASSERT_FALSE(dir.empty());
    ReplaySpec spec = demo_incident(dir);
    spec.no_scaler = true;
    spec.init_scale = 8.0;
    const InputError scale = refusal([&] { run_replay(spec); });
    EXPECT_EQ(scale.file(), "");
    EXPECT_EQ(scale.field(), "init_scale") << scale.what();
    spec.init_scale.reset();
    spec.growth_interval = 10;
    EXPECT_EQ(refusal([&] { run_replay(spec); }).field(), "growth_interval");
    spec = demo_incident(dir);
    spec.param_groups = dir + "/no-such-groups.json";
    const InputError groups = refusal([&] { run_replay(spec); });
    EXPECT_EQ(groups.file(), spec.param_groups);
    EXPECT_EQ(groups.field(), "param_groups_file") << groups.what();
    std::filesystem::remove_all(dir);
}

/// A remedy in the message is worded for both front ends ("use device cpu", "an output name"), never as
/// a CLI flag the GUI's user never typed; the CLI's users get the flag of the field in the prefix.
TEST(FieldNames, RemediesInTheMessageSpellNoFlag) {
    const InputError device = refusal([] { ampscope::detail::parse_device("cuda:99"); });
    EXPECT_EQ(device.field(), "device");
    EXPECT_EQ(std::string(device.what()).find("--"), std::string::npos) << device.what();
    const InputError output = refusal([] { ampscope::detail::load_model("demo:mlp", 1, "logits"); });
    EXPECT_EQ(output.field(), "output");
    EXPECT_NE(std::string(output.what()).find("take an output name"), std::string::npos) << output.what();
    EXPECT_EQ(std::string(output.what()).find("--"), std::string::npos) << output.what();
}
