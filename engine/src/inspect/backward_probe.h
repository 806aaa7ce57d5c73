// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <optional>

#include "ampscope/engine/types.h"

namespace ampscope::detail {

/// Finds where a backward pass first produces NaN/Inf: the first ATen op, in backward
/// execution order, whose inputs are finite and whose output is not, inside which autograd
/// node, and the forward module that node belongs to (matched by autograd sequence number).
/// Intrusive (reads every backward op's output): used for diagnostic re-runs only.
class BackwardProbe {
public:
    BackwardProbe();
    ~BackwardProbe();
    BackwardProbe(const BackwardProbe&) = delete;
    BackwardProbe& operator=(const BackwardProbe&) = delete;
    /// Forward phase: records which module and op each autograd sequence number comes from.
    void forward_phase();
    /// Backward phase: looks for the origin.
    void backward_phase();
    void stop();
    std::optional<Origin> origin() const;
    struct State;

private:
    std::unique_ptr<State> s_;
    uint64_t handle_ = 0;
};

}  // namespace ampscope::detail
