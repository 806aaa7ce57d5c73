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

#include "ampscope/engine/compare.h"
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
    /// Sequence outputs [N, T, V]: the layout compared per position (run/sequence.cpp), known
    /// after the reference pass; the output axis of positions (1, or 2 for [N, V, T]).
    std::optional<SequenceLayout> sequence;
    int sequence_axis = 1;
    /// Labels and targets of the probe set, as the comparison reads them.
    Truth truth() const;
    /// The mask input named or found (attention_mask) and the token-label metric, recorded with
    /// the criteria before the run starts.
    void resolve_sequence_inputs();
    /// After the reference pass: whether its output is a sequence, its mask and token labels
    /// checked against it (InputError before any AMP pass).
    void setup_sequence(const PassResult& ref);
    /// One AMP pass against the reference, per position for sequence outputs.
    Comparison compare_pass(const PassResult& ref, const PassResult& amp) const;
    /// The FP32 reference; false when it is not finite (invalid_reference).
    bool reference(PassResult& ref);
    /// AMP passes, each compared with the same reference.
    void amp_passes(const PassResult& ref);
    RunResult run();
};

}  // namespace ampscope::detail
