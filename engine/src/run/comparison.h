// SPDX-License-Identifier: MIT
#pragma once
// A comparison run in its phases (run/passes.cpp), shared with the advisor (advise/), which
// runs the same phases up to the reference and then its own passes against it.

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ampscope/engine/run.h"
#include "run/pass.h"

namespace ampscope::detail {

/// A comparison run in its phases: criteria fixed, backend, inputs, the FP32 reference
/// (checked before it is trusted), then each AMP pass compared with it.
struct ComparisonRun {
    ComparisonRun(const RunSpec& s, RunSink* k, ProgressObserver* p) : spec(s), sink(k), progress(p) {}
    const RunSpec& spec;
    RunSink* sink;
    ProgressObserver* progress;
    RunResult res;
    std::unique_ptr<Model> model;
    ProbeSet probes;
    at::Device device = at::Device(at::kCPU);
    std::optional<Origin> input_origin;
    /// The advisor's reference pass: module outputs captured (empty: none).
    std::vector<std::string> capture_modules;
    std::map<std::string, std::vector<at::Tensor>>* module_outputs = nullptr;

    void stage(const char* name);
    /// Criteria first: validated and fixed (timestamped) before anything runs.
    void fix_criteria();
    void choose_backend();
    void load_inputs();
    PassOptions options() const;
    PassResult pass(PassOptions o, bool first);
    /// The FP32 reference; false when it is not finite (invalid_reference).
    bool reference(PassResult& ref);
    /// AMP passes, each compared with the same reference.
    void amp_passes(const PassResult& ref);
    RunResult run();
};

}  // namespace ampscope::detail
