// SPDX-License-Identifier: MIT
// Fuzz target: one layer_chunks.data blob (per-op statistics of a pass, storage/src/layer_chunk.h)
// as a database from someone else holds it. Decoding checks every length and index; what it
// accepts must encode again and decode to the same rows.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ampscope/storage/store.h"
#include "fuzz_util.h"
#include "layer_chunk.h"

using namespace ampscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // A copy of exactly `size` bytes: reads past the blob are heap-buffer-overflows.
    std::vector<uint8_t> blob(data, data + size);
    std::vector<LayerStat> layers;
    fuzz::guarded<storage::StoreError>([&] { storage::chunk::decode(blob.data(), blob.size(), layers, "fuzz"); });
    if (layers.empty()) return 0;
    const std::string again = storage::chunk::encode(layers, 0, layers.size());
    std::vector<LayerStat> back;
    try {
        storage::chunk::decode(again.data(), again.size(), back, "re-encoded");
    } catch (const std::exception& e) {
        fuzz::finding(std::string("a decoded chunk does not decode after encoding: ") + e.what());
    }
    if (back.size() != layers.size()) fuzz::finding("re-encoded chunk has a different row count");
    for (size_t i = 0; i < back.size(); ++i) {
        const auto &a = layers[i], &b = back[i];
        if (a.index != b.index || a.module != b.module || a.op != b.op || a.dtype != b.dtype || a.shape != b.shape ||
            a.autocast != b.autocast || a.origin != b.origin || a.inputs_finite != b.inputs_finite ||
            a.stats.count != b.stats.count || a.stats.nan != b.stats.nan ||
            std::memcmp(&a.stats.min, &b.stats.min, sizeof(double)) != 0)
            fuzz::finding("re-encoded chunk row " + std::to_string(i) + " differs");
    }
    return 0;
}
