// SPDX-License-Identifier: MIT
// Fuzz target: checkpoint files as `replay --checkpoint FILE` reads them: ckpt::load_checkpoint
// (engine/src/replay/loaders.cpp): a torch.save file (plain state_dict, a dict with model,
// optimizer and scaler, a Lightning .ckpt; read by pt_archive in its lenient mode, which
// rewrites the pickle around Python objects LibTorch cannot build), else a safetensors file.
// A refusal is an InputError; findings are what the sanitizers and libFuzzer report.
#include <ATen/Parallel.h>

#include <cstdint>

#include "replay/checkpoint.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    at::set_num_threads(1);  // one core per fuzzer: the machines running this are shared
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::scratch_path("fuzz.ckpt");
    fuzz::write_file(path, data, size);
    fuzz::guarded([&] {
        const auto c = ampscope::detail::ckpt::load_checkpoint(path, "model.");
        for (const auto& [name, t] : c.weights)
            if (!t.defined()) fuzz::finding("an undefined weight was accepted: " + name);
    });
    return 0;
}
