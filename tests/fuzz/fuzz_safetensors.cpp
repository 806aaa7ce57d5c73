// SPDX-License-Identifier: MIT
// Fuzz target: safetensors files as `replay --checkpoint` reads them (Hugging Face Trainer
// folders, .safetensors files): detail::parse_safetensors (engine/src/replay/
// safetensors.cpp), header length, JSON header, every entry's dtype, shape and offsets.
// A refusal is an InputError; findings are what the sanitizers and libFuzzer report, and an
// accepted file whose tensors do not tile its data exactly.
#include <ATen/Parallel.h>

#include <cstdint>
#include <vector>

#include "replay/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    at::set_num_threads(1);  // one core per fuzzer: the machines running this are shared
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::vector<char> bytes(data, data + size);
    fuzz::guarded([&] {
        const auto st = ampscope::detail::parse_safetensors(bytes, "fuzz.safetensors");
        uint64_t header = 0;
        for (int i = 7; i >= 0; --i) header = (header << 8) | data[i];
        size_t total = 0;
        for (const auto& [name, t] : st.tensors) {
            if (!t.defined()) fuzz::finding("an undefined tensor was accepted: " + name);
            total += t.nbytes();
        }
        if (total != size - 8 - header) fuzz::finding("accepted tensors do not cover the data exactly");
    });
    return 0;
}
