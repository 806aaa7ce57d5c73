// SPDX-License-Identifier: MIT
// The built-in demo incident (`ampscope --demo`): an FP16 job on demo:transformer whose batch
// overflows FP16 in `embed`, written as a user's job would write it (a torch.save dict
// checkpoint and batch), so that it replays through the normal path.
#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/replay.h"
#include "model/model.h"

namespace ampscope {
namespace {

/// `v` as torch.save writes it: torch::pickle_save's archive, without the TorchScript type tags
/// (torch.jit._pickle.restore_type_tag) it puts round typed dicts and lists.
void write_pickle(const c10::IValue& v, const std::string& path) {
    std::vector<char> pickled;
    torch::jit::Pickler pickler([&](const char* b, size_t n) { pickled.insert(pickled.end(), b, b + n); }, nullptr,
                                nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
    pickler.protocol();
    pickler.pushIValue(v);
    pickler.stop();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* b, size_t n) {
        out.write(static_cast<const char*>(b), std::streamsize(n));
        return n;
    });
    torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(), writer);
    writer.writeEndOfFile();
    if (!out.flush()) throw InputError(path, "demo incident", "cannot be written");
}

c10::impl::GenericDict str_dict() {
    return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
}

/// torch.optim.SGD(lr=0.01).state_dict() before its first momentum-free step: no per-parameter state.
c10::impl::GenericDict sgd_state(int64_t params) {
    c10::impl::GenericDict group = str_dict();
    group.insert("lr", 0.01);
    group.insert("momentum", 0.0);
    group.insert("dampening", 0.0);
    group.insert("weight_decay", 0.0);
    group.insert("nesterov", false);
    group.insert("maximize", false);
    group.insert("foreach", c10::IValue());
    group.insert("differentiable", false);
    group.insert("fused", c10::IValue());
    c10::impl::GenericList ids(c10::AnyType::get());  // a plain list: an int list pickles as build_intlist
    for (int64_t i = 0; i < params; ++i) ids.push_back(i);
    group.insert("params", ids);
    c10::impl::GenericList groups(c10::AnyType::get());
    groups.push_back(group);
    c10::impl::GenericDict sd = str_dict();
    sd.insert("state", c10::impl::GenericDict(c10::IntType::get(), c10::AnyType::get()));
    sd.insert("param_groups", groups);
    return sd;
}

/// torch.amp.GradScaler("cpu", init_scale=1024).state_dict().
c10::impl::GenericDict scaler_state() {
    c10::impl::GenericDict sd = str_dict();
    sd.insert("scale", 1024.0);
    sd.insert("growth_factor", 2.0);
    sd.insert("backoff_factor", 0.5);
    sd.insert("growth_interval", int64_t(2000));
    sd.insert("_growth_tracker", int64_t(0));
    return sd;
}

}  // namespace

ReplaySpec demo_incident(const std::string& folder, uint64_t seed) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec) throw InputError(folder, "demo incident", "cannot create the folder: " + ec.message());
    auto model = detail::make_demo_model("transformer", "demo:transformer", seed);
    c10::impl::GenericDict weights(c10::StringType::get(), c10::TensorType::get());
    at::Tensor embed;
    for (auto& [name, t] : model->named_state()) {
        weights.insert(name, t.detach().clone());
        if (name == "embed.weight") embed = t.detach();
    }
    c10::impl::GenericDict ckpt = str_dict();
    ckpt.insert("model", weights);
    ckpt.insert("optimizer", sgd_state(int64_t(model->parameters().size())));
    ckpt.insert("scaler", scaler_state());
    // The batch: 8 samples of [T=8, F=16] standard normal features, the first position of each
    // at 60000 (representable in FP16) signed like embed's first row, so that embed's output
    // (about 60000 x sum|w|) overflows FP16's 65504 while FP32 holds it.
    auto gen = at::detail::createCPUGenerator(seed + 4242);
    auto x = at::randn({8, 8, 16}, gen);
    x.select(1, 0).copy_((embed[0].sign() * 60000.0).expand({8, 16}));
    c10::impl::GenericDict batch = str_dict();
    batch.insert("inputs", x);
    batch.insert("labels", at::arange(8, at::kLong).remainder(4));

    ReplaySpec spec;
    spec.model = "demo:transformer";
    spec.checkpoint = (fs::path(folder) / "checkpoint.pt").string();
    spec.batch = (fs::path(folder) / "batch.pt").string();
    spec.steps = 4;
    spec.precision = Precision::Fp16;
    spec.seed = seed;
    write_pickle(ckpt, spec.checkpoint);
    write_pickle(batch, spec.batch);
    return spec;
}

}  // namespace ampscope
