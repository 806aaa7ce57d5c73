// SPDX-License-Identifier: MIT
#pragma once
// A comparison run in its phases (run/passes.cpp), shared with the advisor (advise/), which
// runs the same phases up to the reference and then its own passes against it.

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ampscope/engine/compare.h"
#include "ampscope/engine/run.h"
#include "run/pass.h"

namespace ampscope::detail {

/// The model's parameters and buffers as loaded. Every pass starts from them: a model that
/// changes its own state in forward (a counter, a running statistic, a cache, train-mode
/// BatchNorm) must not carry the change into the next pass. Buffers are copied and compared
/// by value (kernels such as native_batch_norm update running statistics without a version
/// bump). Parameters are not copied up front (a copy would double the weights' memory on the
/// device, for a rare case): their version counters (every in-place op bumps them) and
/// identities (TorchScript may assign a new tensor to an attribute) tell when one changed, and
/// the first such change takes the state as loaded from `reload` (the model loaded again).
class StateKeeper {
public:
    using Reload = std::function<std::vector<std::pair<std::string, at::Tensor>>()>;
    StateKeeper(Model& m, Reload reload);
    /// Restores every tensor changed since the last call; returns the changed names.
    std::vector<std::string> restore(Model& m);

private:
    struct Entry {
        std::string name;
        const void* impl;
        int64_t version;
        bool buffer;
        at::Tensor copy;  ///< buffers always; parameters once one has changed
    };
    void take_originals();
    std::vector<Entry> entries_;
    Reload reload_;
};

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
    /// The state every pass starts from, and the names a pass changed (warned once).
    std::unique_ptr<StateKeeper> state;
    std::vector<std::string> state_changed;
    /// Runs a pass in place of run_pass over `probes` (a distributed run: this rank's shard and the
    /// others' gathered, run/distributed.cpp); unset: run_pass.
    std::function<PassResult(const PassOptions&, bool first)> pass_runner;

    void stage(const char* name);
    /// Criteria first: validated and fixed (timestamped) before anything runs.
    void fix_criteria();
    void choose_backend();
    void load_inputs();
    PassOptions options() const;
    PassResult pass(PassOptions o, bool first);
    /// The run's warning when a pass changed the model's parameters or buffers (once).
    void note_state_changes(const std::vector<std::string>& changed);
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
    /// Labels against a sequence output of `shape` (per sample): token labels [N, T] with T
    /// positions, ids below V, at least one scored; class labels refused.
    void check_labels_fit(const std::vector<int64_t>& shape, const SequenceLayout& s) const;
    /// One AMP pass against the reference, per position for sequence outputs.
    Comparison compare_pass(const PassResult& ref, const PassResult& amp) const;
    /// The FP32 reference; false when it is not finite (invalid_reference).
    bool reference(PassResult& ref);
    /// AMP passes, each compared with the reference (res.passes.front()).
    void amp_passes();
    /// Whether spec.fp8_real_gemm asks for pass `p` to run again with real FP8 GEMMs.
    bool wants_real_gemm(Precision p) const;
    /// The simulated pass `sim` run again with real FP8 GEMMs (options `o`, no inspection) and
    /// set beside it and the reference (run/real_gemm.cpp); where it cannot run, why (and a warning).
    RealGemmCheck real_gemm_check(const PassResult& ref, const PassResult& sim, PassOptions o);
    /// Criteria fixed, backend chosen, model and probes loaded: nothing has run.
    void setup();
    /// The sink told, the reference and the AMP passes run and compared, the sink told the end.
    RunResult execute();
    RunResult run();
};

}  // namespace ampscope::detail
