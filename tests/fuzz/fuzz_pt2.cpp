// SPDX-License-Identifier: MIT
// Fuzz target: torch.export archives (.pt2) as `run --model FILE.pt2` reads them before any
// pass: pt2::sniff_zip, then pt2::read_program (engine/src/model/export_program.cpp), which
// parses the program JSON, resolves every op against the dispatcher and reads the weights.
// A refusal is an InputError; findings are what the sanitizers and libFuzzer report.
// Two kinds of input: a whole archive (starts with "PK"; mutations mostly break the zip's CRCs),
// or, so that the fuzzer reaches the program reader itself, the text of models/model.json
// (starts with '{'), which is zipped here beside the weights of the seed tests/fuzz/corpus/pt2/
// region.pt2 (AMPSCOPE_PT2_SEED).
#include <ATen/Parallel.h>
#include <caffe2/serialize/inline_container.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "fuzz_util.h"
#include "model/export_program.h"
#include "torchsave/pt_archive.h"

namespace {

/// The seed archive's records other than the program and those the writer adds itself.
const std::vector<std::pair<std::string, std::string>>& seed_records() {
    static const auto records = [] {
        std::ifstream in(AMPSCOPE_PT2_SEED, std::ios::binary);
        const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const auto zip = ampscope::detail::open_checked_zip(bytes, AMPSCOPE_PT2_SEED);
        std::vector<std::pair<std::string, std::string>> r;
        for (const auto& name : zip->getAllRecords()) {
            if (name.rfind("models/", 0) == 0 || name.rfind(".data/", 0) == 0 || name == "byteorder") continue;
            auto [ptr, n] = zip->getRecord(name);
            r.emplace_back(name, std::string(static_cast<const char*>(ptr.get()), n));
        }
        return r;
    }();
    return records;
}

/// model.json text zipped with the seed's weights, as torch.export.save lays them out.
std::vector<char> archive_around(const uint8_t* json, size_t size) {
    std::vector<char> out;
    caffe2::serialize::PyTorchStreamWriter w([&](const void* p, size_t n) {
        out.insert(out.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
        return n;
    });
    for (const auto& [name, data] : seed_records()) w.writeRecord(name, data.data(), data.size());
    w.writeRecord("models/model.json", json, size);
    w.writeEndOfFile();
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    at::set_num_threads(1);  // one core per fuzzer: the machines running this are shared
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    namespace pt2 = ampscope::detail::pt2;
    const std::vector<char> bytes =
        size && data[0] == '{' ? archive_around(data, size) : std::vector<char>(data, data + size);
    fuzz::guarded([&] {
        if (pt2::sniff_zip(bytes, "fuzz.pt2") != pt2::ZipKind::Export) return;
        const auto p = pt2::read_program(bytes, "fuzz.pt2");
        if (p.graphs.empty()) fuzz::finding("a program without a root graph was accepted");
        for (const auto& [fqn, t] : p.parameters)
            if (!t.defined()) fuzz::finding("an undefined parameter was accepted");
    });
    return 0;
}
