// SPDX-License-Identifier: MIT
// The backward probe: where a backward pass first turns finite gradients into NaN/Inf
// (at::RecordFunction on autograd nodes and the ATen ops inside them).
#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "inspect/backward_probe.h"
#include "inspect/observer.h"
#include "precision/precision.h"

namespace ampscope::detail {

// ---- the backward probe -----------------------------------------------------------------

struct BackwardProbe::State {
    enum class Phase { Off, Forward, Backward } phase = Phase::Off;
    struct Fwd {
        std::string module, op;
    };
    std::map<int64_t, Fwd> by_seq;  ///< autograd sequence number -> forward module and op
    int fwd_depth = 0;
    std::string fwd_module, fwd_op;  ///< the current top-level forward op
    struct Node {
        std::string name;
        int64_t seq;
        int depth;  ///< ATen nesting inside the node
    };
    std::vector<Node> nodes;
    int outside_depth = 0;
    int index = 0;
    std::optional<Origin> origin;
    std::mutex mu;  ///< backward may run on the engine's device threads
};

namespace {
std::atomic<BackwardProbe::State*> g_probe{nullptr};
thread_local bool tls_in_probe = false;  ///< ops the probe itself runs are not observed

struct InProbe {
    InProbe() { tls_in_probe = true; }
    ~InProbe() { tls_in_probe = false; }
};

struct ProbeCtx : at::ObserverContext {
    bool node = false;
    bool top = false;  ///< a top-level ATen op (of the forward, or inside a backward node)
    std::vector<at::Tensor> inputs;
};

std::unique_ptr<at::ObserverContext> probe_start(const at::RecordFunction& fn) {
    auto* s = g_probe.load();
    if (!s || tls_in_probe || s->phase == BackwardProbe::State::Phase::Off) return nullptr;
    InProbe guard;
    std::lock_guard<std::mutex> lock(s->mu);
    auto c = std::make_unique<ProbeCtx>();
    if (s->phase == BackwardProbe::State::Phase::Forward) {
        if (fn.scope() != at::RecordScope::FUNCTION) return c;
        if (s->fwd_depth++ == 0) {
            const auto& scope = pass_context().scope;
            s->fwd_module = scope.empty() ? std::string() : scope.back();
            s->fwd_op = fn.name();
        }
        // The outer op and the first op inside it share the next sequence number: the first
        // record wins, so an autograd node maps to the top-level op the user's module ran.
        if (fn.seqNr() >= 0) s->by_seq.emplace(fn.seqNr(), BackwardProbe::State::Fwd{s->fwd_module, s->fwd_op});
        return c;
    }
    if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
        c->node = true;
        s->nodes.push_back({fn.name(), fn.seqNr(), 0});
        return c;
    }
    if (fn.scope() != at::RecordScope::FUNCTION) return c;
    int& depth = s->nodes.empty() ? s->outside_depth : s->nodes.back().depth;
    c->top = depth++ == 0;
    if (c->top && !s->origin) {
        c->inputs = floating_tensors(fn.inputs());
    }
    return c;
}

void probe_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
    auto* s = g_probe.load();
    if (!s || !ctx || tls_in_probe) return;
    InProbe guard;
    std::lock_guard<std::mutex> lock(s->mu);
    auto* c = static_cast<ProbeCtx*>(ctx);
    if (s->phase == BackwardProbe::State::Phase::Forward) {
        if (fn.scope() == at::RecordScope::FUNCTION) --s->fwd_depth;
        return;
    }
    if (s->phase != BackwardProbe::State::Phase::Backward) return;
    if (c->node) {
        if (!s->nodes.empty()) s->nodes.pop_back();
        return;
    }
    if (fn.scope() != at::RecordScope::FUNCTION) return;
    int& depth = s->nodes.empty() ? s->outside_depth : s->nodes.back().depth;
    --depth;
    if (!c->top || s->origin) return;
    const int idx = s->index++;
    if (is_view_op(fn.name())) return;
    const auto outs = floating_tensors(fn.outputs());
    if (std::none_of(outs.begin(), outs.end(), [](const at::Tensor& t) { return any_nonfinite(t); })) return;
    for (const auto& t : c->inputs)
        if (any_nonfinite(t)) return;  // propagation, not birth
    Origin o;
    o.stage = "backward";
    o.op = fn.name();
    o.index = idx;
    if (!s->nodes.empty()) {
        o.grad_fn = s->nodes.back().name;
        auto it = s->by_seq.find(s->nodes.back().seq);
        if (it != s->by_seq.end()) o.module = it->second.module;
    }
    s->origin = std::move(o);
}
}  // namespace

BackwardProbe::BackwardProbe() : s_(std::make_unique<State>()) {
    State* expected = nullptr;
    if (!g_probe.compare_exchange_strong(expected, s_.get())) throw std::logic_error("one backward probe at a time");
    handle_ = at::addGlobalCallback(at::RecordFunctionCallback(&probe_start, &probe_end)
                                        .needsInputs(true)
                                        .needsOutputs(true)
                                        .needsIds(true)
                                        .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

BackwardProbe::~BackwardProbe() {
    at::removeCallback(handle_);
    g_probe = nullptr;
}

void BackwardProbe::forward_phase() {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->phase = State::Phase::Forward;
    s_->fwd_depth = 0;
}

void BackwardProbe::backward_phase() {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->phase = State::Phase::Backward;
    s_->nodes.clear();
    s_->outside_depth = 0;
}

void BackwardProbe::stop() {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->phase = State::Phase::Off;
}

std::optional<Origin> BackwardProbe::origin() const {
    std::lock_guard<std::mutex> lock(s_->mu);
    return s_->origin;
}

}  // namespace ampscope::detail
