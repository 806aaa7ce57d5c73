// SPDX-License-Identifier: MIT
// Fuzz target: probe and training-data files (.pt written by torch.save, .csv), read without a
// model by detail::read_probe_file (engine/src/probes/probes.cpp), the parser `run --probes` and
// `train --data` use before the shapes are checked against the model.
// Built twice: fuzz_probe_pt (input written to a .pt file) and fuzz_probe_csv (.csv); the
// extension comes from fuzz_probe_ext_*.cpp so that this heavy translation unit compiles once.
#include <ATen/Parallel.h>

#include <cstdint>
#include <set>
#include <string>

#include "fuzz_util.h"
#include "probes/probes.h"

extern const char* const kProbeExtension;  // ".pt" or ".csv"

namespace {

/// Every byte a tensor claims to hold is read by instrumented code: a view that reaches past
/// its storage is an AddressSanitizer report here, not a silent read inside LibTorch later.
uint8_t touch(const at::Tensor& t) {
    if (!t.defined()) fuzz::finding("an input tensor is undefined");
    if (!t.device().is_cpu()) fuzz::finding("an input tensor is not on the CPU");
    const auto c = t.contiguous();
    const auto* p = static_cast<const volatile uint8_t*>(c.data_ptr());
    uint8_t acc = 0;
    for (size_t i = 0, n = c.nbytes(); i < n; ++i) acc ^= p[i];
    return acc;
}

/// The invariants of ProbeSet (probes/probes.h) that the passes and the trainer rely on.
void check(const ampscope::detail::ProbeSet& ps) {
    if (ps.inputs.empty()) fuzz::finding("a probe set without inputs was accepted");
    const int64_t n = ps.inputs[0].dim() >= 1 ? ps.inputs[0].size(0) : -1;
    if (n < 1) fuzz::finding("a probe set without samples (or a scalar input) was accepted");
    volatile uint8_t acc = 0;
    for (const auto& t : ps.inputs) {
        if (t.dim() < 1 || t.size(0) != n) fuzz::finding("inputs with different sample counts were accepted");
        acc ^= touch(t);
    }
    if (int64_t(ps.samples.size()) != n) fuzz::finding("samples.size() != N");
    std::set<std::string> ids;
    for (const auto& s : ps.samples) {
        if (s.id.empty()) fuzz::finding("an empty sample id was accepted");
        if (!ids.insert(s.id).second) fuzz::finding("a duplicate sample id was accepted");
    }
    if (!ps.labels.empty() && int64_t(ps.labels.size()) != n) fuzz::finding("labels.size() != N");
    for (auto l : ps.labels)
        if (l < 0) fuzz::finding("a negative label was accepted");
    if (ps.target_width < 0) fuzz::finding("negative target_width");
    if (!ps.targets.empty() && int64_t(ps.targets.size()) != n * int64_t(ps.target_width))
        fuzz::finding("targets.size() != N * target_width");
    if (!ps.labels.empty() && !ps.targets.empty()) fuzz::finding("labels and targets both accepted");
    (void)acc;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    at::set_num_threads(1);  // one core per fuzzer: the machines running this are shared
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string path = fuzz::scratch_path(std::string("probes") + kProbeExtension);
    fuzz::write_file(path, data, size);
    fuzz::guarded([&] { check(ampscope::detail::read_probe_file(path)); });
    return 0;
}
