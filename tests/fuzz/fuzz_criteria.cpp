// SPDX-License-Identifier: MIT
// Fuzz target: criteria JSON (`run --criteria FILE`), parsed by json::parse_criteria
// (storage/src/json_io.cpp), written back by criteria_to_json, and then applied by compare()
// to a small fixed pair of passes (criteria drive tolerances, heads, ties and flips there).
#include <cstdint>
#include <string>

#include "ampscope/engine/compare.h"
#include "ampscope/storage/json_io.h"
#include "fuzz_util.h"

namespace {

using namespace ampscope;

struct Fixture {
    PassResult ref, amp;
    std::vector<SampleInfo> samples;
    Truth truth;
};

/// Four samples x three scores: a clean one, a tie, a flip, a non-finite AMP score.
const Fixture& fixture() {
    static const Fixture f = [] {
        Fixture x;
        x.samples = {{"a", "ordinary"}, {"b", "boundary"}, {"c", "edge"}, {"d", "edge"}};
        x.ref.precision = Precision::Fp32;
        x.ref.num_outputs = 3;
        x.ref.outputs = {0.1f, 2.0f, -1.0f, 1.0f, 1.0f, 0.5f, 3.0f, 2.999f, 0.0f, 5.0f, -5.0f, 0.0f};
        x.amp = x.ref;
        x.amp.precision = Precision::Fp16;
        x.amp.outputs = {0.1f, 2.001f, -1.0f, 1.0f, 1.0005f, 0.5f, 2.998f, 3.0f, 0.0f, 65504.0f, -5.0f, 1.0f / 0.0f};
        x.amp.nonfinite_samples = {"d"};
        x.truth.labels = {1, 0, 0, 0};
        return x;
    }();
    return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    fuzz::guarded([&] {
        const Criteria c = json::parse_criteria(text, "criteria.json");
        volatile size_t n = json::criteria_to_json(c).size();
        (void)n;
        const auto& f = fixture();
        const Comparison cmp = compare(f.ref, f.amp, f.samples, f.truth, c);
        if (cmp.deltas.size() > f.samples.size()) fuzz::finding("more deltas than samples");
        auto q = quality(f.amp, f.truth, c);
        (void)q;
    });
    return 0;
}
