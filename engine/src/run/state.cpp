// SPDX-License-Identifier: MIT
// The model's state as loaded, restored before every pass (run/comparison.h: StateKeeper).
#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <map>
#include <set>

#include "ampscope/engine/errors.h"
#include "run/comparison.h"

namespace ampscope::detail {

namespace {
at::Tensor as_bytes(const at::Tensor& t) {
    return t.detach().contiguous().reshape({-1}).view(at::kByte);
}
}  // namespace

StateKeeper::StateKeeper(Model& m, Reload reload) : reload_(std::move(reload)) {
    at::NoGradGuard ng;
    std::set<const void*> params;
    for (const auto& p : m.parameters()) params.insert(p.unsafeGetTensorImpl());
    for (auto& [name, t] : m.named_state()) {
        const bool buffer = !params.count(t.unsafeGetTensorImpl());
        entries_.push_back(
            {name, t.unsafeGetTensorImpl(), t._version(), buffer, buffer ? t.detach().clone() : at::Tensor()});
    }
}

void StateKeeper::take_originals() {
    auto fresh = reload_();
    std::map<std::string, at::Tensor> by_name(fresh.begin(), fresh.end());
    for (auto& e : entries_) {
        if (e.copy.defined()) continue;
        const auto it = by_name.find(e.name);
        if (it == by_name.end())
            throw ModelError("the model changed its parameter '" + e.name +
                             "' in forward, and loading it again gave no such parameter");
        e.copy = it->second.detach();
    }
}

std::vector<std::string> StateKeeper::restore(Model& m) {
    at::NoGradGuard ng;
    std::vector<std::string> changed;
    auto state = m.named_state();
    if (state.size() != entries_.size())
        throw ModelError("the model's parameters and buffers changed in number during a pass (" +
                         std::to_string(entries_.size()) + " before, " + std::to_string(state.size()) + " after)");
    for (size_t i = 0; i < state.size(); ++i) {
        auto& t = state[i].second;
        auto& e = entries_[i];
        const bool same = t.unsafeGetTensorImpl() == e.impl && t._version() == e.version &&
                          (!e.buffer || (t.sizes() == e.copy.sizes() && at::equal(as_bytes(t), as_bytes(e.copy))));
        if (same) continue;
        changed.push_back(e.name);
        if (!e.copy.defined()) take_originals();
        if (e.copy.device() != t.device()) e.copy = e.copy.to(t.device());
        if (t.sizes() != e.copy.sizes() || t.scalar_type() != e.copy.scalar_type())
            throw ModelError("the model replaced its state '" + e.name +
                             "' in forward with a tensor of another shape or dtype; "
                             "passes cannot start from the same state");
        t.detach().copy_(e.copy);
        e.impl = t.unsafeGetTensorImpl();
        e.version = t._version();
    }
    return changed;
}

}  // namespace ampscope::detail
