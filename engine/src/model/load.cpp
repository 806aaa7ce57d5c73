// SPDX-License-Identifier: MIT
// load_model: recognises the model's format and identifies it (file and weights hashes).
#include <ATen/ATen.h>

#include <filesystem>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/hash.h"
#include "model/model.h"

namespace ampscope::detail {

std::string weights_hash(const std::vector<std::pair<std::string, at::Tensor>>& state) {
    Sha256 h;
    for (const auto& [name, t] : state) {
        auto c = t.detach().to(at::kCPU).contiguous();
        h.update(name);
        h.update(std::string(c10::toString(c.scalar_type())));
        for (auto s : c.sizes()) h.update(&s, sizeof s);
        h.update(c.data_ptr(), c.nbytes());
    }
    return h.hex();
}


std::unique_ptr<Model> load_model(const std::string& source, uint64_t seed) {
    std::unique_ptr<Model> model;
    if (source.rfind("demo:", 0) == 0) {
        model = make_demo_model(source.substr(5), source, seed);
    } else {
        namespace fs = std::filesystem;
        std::error_code ec;
        if (!fs::exists(source, ec)) throw InputError(source, "--model", "file not found");
        if (fs::is_directory(source, ec)) throw InputError(source, "--model", "is a directory; expected a TorchScript file (.pt)");
        const auto file_hash = sha256_file(source);
        model = load_torchscript(source);
        model->info.sha256 = file_hash;
    }
    model->info.source = source;
    auto state = model->named_state();
    model->info.weights_sha256 = weights_hash(state);
    if (model->info.sha256.empty()) model->info.sha256 = model->info.weights_sha256;
    int64_t params = 0;
    for (const auto& p : model->parameters()) params += p.numel();
    model->info.parameters = params;
    model->info.modules = model->module_paths();
    return model;
}

}  // namespace ampscope::detail

