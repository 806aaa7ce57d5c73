// SPDX-License-Identifier: MIT
// Per-op observer (at::RecordFunction): module scopes, statistics per op output (on the host
// through inspect/tensor_stats.cpp, or on the device), origins, captured module outputs.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "ampscope/engine/errors.h"
#include "inspect/observer.h"
#include "precision/precision.h"
#include "inspect/stats_kernel.h"

#ifdef AMPSCOPE_HAVE_GPU_STATS
#include <c10/core/impl/VirtualGuardImpl.h>

#include "stats_gpu.h"
#endif
#include "inspect/gpu/device_notes.h"

namespace ampscope::detail {

// ---- the observer ---------------------------------------------------------------------------

namespace {

/// Ops that only re-view or copy existing values: they cannot create non-finite values.
const std::unordered_set<std::string_view>& view_ops_set() {
    // string_view keys over literals: looked up once per op, without building a string
    static const std::unordered_set<std::string_view> s = {"aten::view",
                                                           "aten::reshape",
                                                           "aten::_reshape_alias",
                                                           "aten::_unsafe_view",
                                                           "aten::permute",
                                                           "aten::transpose",
                                                           "aten::t",
                                                           "aten::select",
                                                           "aten::slice",
                                                           "aten::expand",
                                                           "aten::unsqueeze",
                                                           "aten::squeeze",
                                                           "aten::flatten",
                                                           "aten::contiguous",
                                                           "aten::detach",
                                                           "aten::alias",
                                                           "aten::as_strided",
                                                           "aten::split",
                                                           "aten::chunk",
                                                           "aten::unbind",
                                                           "aten::narrow",
                                                           "aten::clone",
                                                           "aten::empty",
                                                           "aten::empty_like",
                                                           "aten::resize_",
                                                           "aten::size",
                                                           "aten::numel",
                                                           "aten::dim",
                                                           "aten::is_floating_point",
                                                           "aten::item",
                                                           "aten::_local_scalar_dense",
                                                           "aten::lift_fresh",
                                                           "aten::set_",
                                                           "aten::empty_strided",
                                                           "ampscope::to_fp32",
                                                           "ampscope::enter_scope"};
    return s;
}

}  // namespace

bool is_view_op(std::string_view name) {
    return view_ops_set().count(name) > 0;
}

namespace {

struct Ctx : at::ObserverContext {
    bool top = false;
    bool reenable = false;  ///< this op turned the callback off for the ops inside it
    std::vector<c10::IValue> captured_inputs;
    std::string module;
    bool autocast = false;
    std::vector<at::Tensor> inputs;
};

}  // namespace

namespace {
std::atomic<bool> g_device_statistics{true};

#ifdef AMPSCOPE_HAVE_GPU_STATS
/// Statistics of one batch's ops on a CUDA device: slots in device memory, written by the
/// kernel on the op's stream; nothing is read back before the pass has ended.
struct DeviceBatch {
    int64_t first_row = 0, rows = 0;
    at::Tensor slots, in_slots;  ///< uint8 [capacity * sizeof(DeviceStats)]: outputs, inputs
    at::Tensor row_nf;           ///< int64 [capacity, rows]: non-finite values per sample row
    struct Entry {
        int idx;
        bool rows_match;
    };
    std::vector<Entry> entries;  ///< entry k uses slot k
};

TensorStats from_device(const gpu::DeviceStats& d) {
    KernelAcc a;
    a.count = int64_t(d.count);
    a.nan = int64_t(d.nan);
    a.posinf = int64_t(d.posinf);
    a.neginf = int64_t(d.neginf);
    a.zeros = int64_t(d.zeros);
    a.h_over = int64_t(d.h_over);
    a.h_sub = int64_t(d.h_sub);
    a.h_under = int64_t(d.h_under);
    a.b_over = int64_t(d.b_over);
    a.b_sub = int64_t(d.b_sub);
    a.b_under = int64_t(d.b_under);
    a.min_key = d.min_key;
    a.max_key = d.max_key;
    a.amax_bits = d.amax_bits;
    a.minnz_bits = d.minnz_bits;
    a.sum = d.sum;
    a.sumsq = d.sumsq;
    return to_stats(a);
}

gpu::DType device_dtype(at::ScalarType t) {
    return t == at::kHalf ? gpu::DType::Float16 : t == at::kBFloat16 ? gpu::DType::BFloat16 : gpu::DType::Float32;
}

constexpr int64_t kSlot = int64_t(sizeof(gpu::DeviceStats));
static_assert(kSlot % 4 == 0, "slots are filled as 32-bit words");

/// `count` empty slots (gpu::empty_stats()) made on the device: zeros, then the words that are
/// not zero filled in place. No host-to-device copy, which would wait for the device.
at::Tensor empty_slots_on(const at::Device& dev, int64_t count) {
    auto words = at::zeros({count, kSlot / 4}, at::TensorOptions().dtype(at::kInt).device(dev));
    const gpu::DeviceStats init = gpu::empty_stats();
    int32_t w[kSlot / 4];
    std::memcpy(w, &init, sizeof init);
    for (int64_t i = 0; i < kSlot / 4; ++i)
        if (w[i] != 0) words.select(1, i).fill_(int64_t(w[i]));
    return words.reshape({-1}).view(at::kByte);
}

/// The current stream of a GPU device (cudaStream_t or hipStream_t), through c10's
/// device-generic interface: the same code for CUDA and ROCm builds.
void* current_stream(const at::Device& dev) {
    return c10::impl::VirtualGuardImpl(dev.type()).getStream(dev).native_handle();
}
#endif
}  // namespace

void set_device_statistics(bool on) {
    g_device_statistics = on;
}

const char* device_statistics_platform() {
#if defined(AMPSCOPE_HAVE_GPU_STATS) && defined(AMPSCOPE_GPU_STATS_HIP)
    return "hip";
#elif defined(AMPSCOPE_HAVE_GPU_STATS)
    return "cuda";
#else
    return "";
#endif
}

namespace {

/// Floating-point operations of one op, from its shapes: 2 M N K for matrix products (linear,
/// mm, addmm, bmm, baddbmm, matmul), 2 x output x (C_in / groups x kernel) for convolutions,
/// 2 B H L S (E + E_v) for scaled dot-product attention, and one per output element otherwise.
double op_flops(std::string_view name, const std::vector<at::Tensor>& in, const at::Tensor& out) {
    const double n_out = double(out.numel());
    auto has = [&](const char* s) { return name.find(s) != std::string_view::npos; };
    if (has("scaled_dot_product_attention") && in.size() >= 3 && in[0].dim() >= 2 && in[1].dim() >= 2) {
        const double s = double(in[1].size(-2));
        return 2.0 * double(in[0].numel()) * s + 2.0 * n_out * s;
    }
    if (has("conv") && in.size() >= 2 && in[1].dim() >= 1 && in[1].size(0) > 0)
        return 2.0 * n_out * double(in[1].numel() / in[1].size(0));
    if (has("linear") && !in.empty() && in[0].dim() >= 1) return 2.0 * n_out * double(in[0].size(-1));
    const bool with_bias = has("addmm") || has("baddbmm") || has("addbmm");
    if ((with_bias || has("mm") || has("matmul")) && in.size() > size_t(with_bias) && in[size_t(with_bias)].dim() >= 1)
        return 2.0 * n_out * double(in[size_t(with_bias)].size(-1));
    return n_out;
}

}  // namespace

struct OpObserver::State {
    int64_t batch_rows = 0;  ///< rows of the current batch
    int64_t first_row = 0;
    int depth = 0;
    uint64_t handle = 0;  ///< the RecordFunction callback (turned off inside a top-level op)
    bool busy = true;     ///< paused: between batches, and while the observer itself runs ops
    int index = 0;        ///< op index within the current batch
    std::vector<LayerStat> layers;
    std::vector<int> row_origin;           ///< per global row: op index, -1 none
    std::vector<bool> row_nonfinite_seen;  ///< per row of the current batch
    bool batch_nonfinite_seen = false;
    bool capture = false;
    std::vector<OpObserver::Captured> captured;
    std::map<std::string, std::vector<at::Tensor>> module_outputs;  ///< keys: the modules captured
    std::optional<std::string> open_module;                         ///< the captured module the last op ran in
    at::Tensor open_output;                                         ///< its output so far
    void capture_output(const std::string& module, const at::Tensor& out);
    void close_module();
#ifdef AMPSCOPE_HAVE_GPU_STATS
    std::vector<DeviceBatch> device;
    at::Tensor empty_slots;  ///< 256 initial slots on the device, appended when a batch needs more
    bool device_batch_open = false;
    void device_op(Ctx& c, int idx, const std::vector<at::Tensor>& outs, bool rows_match);
#endif
    bool finalized = true;
    /// Every batch's device slots as one byte tensor on the device (undefined when none).
    at::Tensor pending_bytes() const;
    /// Applies the host copy of pending_bytes(), batch by batch, in op order.
    void apply_bytes(const uint8_t* p, int64_t size);

    void on_end(Ctx& c, const at::RecordFunction& fn);
    LayerStat& layer_for(const Ctx& c, int idx, std::string_view name, const at::Tensor& out0);
    /// Origin bookkeeping for one op of the current batch, given its statistics.
    template <class InputsNonfinite>
    void apply(int idx, const TensorStats& st, const std::vector<int64_t>& row_nf, bool rows_match,
               InputsNonfinite inputs_nonfinite);
    /// Reads device statistics back (one copy, after the pass) unless the pass did, and
    /// applies them in op order.
    void finalize();
};

namespace {
thread_local OpObserver::State* tls_state = nullptr;

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    auto* s = tls_state;
    if (!s || s->busy) return nullptr;
    auto c = std::make_unique<Ctx>();
    static const bool trace = std::getenv("AMPSCOPE_TRACE_OPS") != nullptr;
    if (trace) std::fprintf(stderr, "%*s> %s\n", 2 * s->depth, "", fn.name());
    c->top = s->depth++ == 0;
    if (c->top) {
        const auto& scope = pass_context().scope;
        c->module = scope.empty() ? std::string() : scope.back();
        c->autocast = at::autocast::is_autocast_enabled(pass_context().device_type);
        s->busy = true;
        if (s->capture)
            for (const auto& v : fn.inputs())  // copies: in-place ops would change them later
                c->captured_inputs.push_back(v.isTensor() && v.toTensor().defined() ? c10::IValue(v.toTensor().clone())
                                                                                    : v);
        c->inputs = floating_tensors(fn.inputs());
        s->busy = false;
        // The ops inside this one (autocast's casts, a linear's addmm) are not observed: the
        // callback is off until this op ends, so LibTorch neither boxes their arguments nor
        // calls us for them (most of the observer's cost on small ops). This op's end callback
        // still runs: a RecordFunction keeps the callbacks it started with. AMPSCOPE_TRACE_OPS
        // keeps it on, to print the nested ops too.
        if (!trace) {
            at::disableCallback(s->handle);
            c->reenable = true;
        }
    }
    return c;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
    auto* s = tls_state;
    if (!s || !ctx) return;
    s->depth--;
    static const bool trace = std::getenv("AMPSCOPE_TRACE_OPS") != nullptr;
    if (trace) std::fprintf(stderr, "%*s< %s\n", 2 * s->depth, "", fn.name());
    auto* c = static_cast<Ctx*>(ctx);
    struct Reenable {  // after this op's own work, and on every way out of it
        uint64_t handle;
        bool on;
        ~Reenable() {
            if (on) at::reenableCallback(handle);
        }
    } reenable{s->handle, c->reenable};
    if (!c->top || s->busy) return;
    s->busy = true;
    try {
        s->on_end(*c, fn);
    } catch (...) {
        s->busy = false;
        throw;
    }
    s->busy = false;
}

}  // namespace

void OpObserver::State::on_end(Ctx& c, const at::RecordFunction& fn) {
    const std::string_view name = fn.name();
    if (is_view_op(name)) return;
    if (capture) {
        std::string full(name);
        if (auto on = fn.operator_name(); on && !on->overload_name.empty()) full += "." + on->overload_name;
        std::string odt;
        for (const auto& v : fn.outputs())
            if (v.isTensor() && v.toTensor().defined()) {
                odt = c10::toString(v.toTensor().scalar_type());
                break;
            }
        captured.push_back({full, c.module, std::move(c.captured_inputs), odt});
    }
    std::vector<at::Tensor> outs = floating_tensors(fn.outputs());
    if (outs.empty()) return;
    // a padded batch (pass_context().padded_rows): only its first batch_rows rows are samples
    if (const int64_t padded = pass_context().padded_rows; padded > batch_rows)
        for (auto* list : {&outs, &c.inputs})
            for (auto& t : *list)
                if (t.dim() >= 1 && t.size(0) == padded) t = t.slice(0, 0, batch_rows);
    if (!module_outputs.empty()) capture_output(c.module, outs[0]);
    const int idx = index++;
    const double flops = op_flops(name, c.inputs, outs[0]);
    const bool rows_match = outs[0].dim() >= 1 && outs[0].size(0) == batch_rows;
#ifdef AMPSCOPE_HAVE_GPU_STATS
    if (outs[0].is_cuda() && g_device_statistics) {
        layer_for(c, idx, name, outs[0]).flops += flops;
        device_op(c, idx, outs, rows_match);
        return;
    }
#endif
    TensorStats st;
    std::vector<int64_t> row_nf;
    for (size_t i = 0; i < outs.size(); ++i) {
        const TensorStats si = tensor_stats(outs[i]);
        // Rows already non-finite in this batch cannot be born again: only the others are read.
        if (i == 0 && rows_match) new_nonfinite_rows(outs[0], si.nonfinite(), row_nonfinite_seen, row_nf);
        st.merge(si);
    }
    layer_for(c, idx, name, outs[0]).flops += flops;
    // Inputs finite? Checked only when the output has non-finite values.
    apply(idx, st, row_nf, rows_match, [&] {
        for (const auto& t : c.inputs)
            if (any_nonfinite(t)) return true;
        return false;
    });
}

LayerStat& OpObserver::State::layer_for(const Ctx& c, int idx, std::string_view name, const at::Tensor& out0) {
    if (size_t(idx) >= layers.size()) {
        LayerStat l;
        l.index = idx;
        l.module = c.module;
        l.op = std::string(name);
        l.dtype = c10::toString(out0.scalar_type());
        l.shape = out0.sizes().vec();
        l.autocast = c.autocast;
        layers.push_back(std::move(l));
    }
    return layers[size_t(idx)];
}

template <class InputsNonfinite>
void OpObserver::State::apply(int idx, const TensorStats& st, const std::vector<int64_t>& row_nf, bool rows_match,
                              InputsNonfinite inputs_nonfinite) {
    auto& layer = layers[size_t(idx)];
    layer.stats.merge(st);
    if (st.nonfinite() == 0) return;
    // Inputs are read only while this op's inputs are still believed finite (once one batch
    // showed otherwise, the flag stays down: no need to read them again).
    if (layer.inputs_finite && inputs_nonfinite()) layer.inputs_finite = false;
    // A sample's values are born non-finite at the first op where its row is non-finite:
    // every value producer is observed, so that op's inputs were finite for that row.
    bool born = false;
    for (int64_t r = 0; r < batch_rows; ++r) {
        const bool nf = rows_match ? row_nf[size_t(r)] > 0 : !batch_nonfinite_seen;
        if (nf && !row_nonfinite_seen[size_t(r)]) {
            row_nonfinite_seen[size_t(r)] = true;
            row_origin[size_t(first_row + r)] = idx;
            born = true;
        }
    }
    batch_nonfinite_seen = true;
    if (born) layer.origin = true;
}

#ifdef AMPSCOPE_HAVE_GPU_STATS
void OpObserver::State::device_op(Ctx& c, int idx, const std::vector<at::Tensor>& outs, bool rows_match) {
    const auto dev = outs[0].device();
    if (!empty_slots.defined() || empty_slots.device() != dev) empty_slots = empty_slots_on(dev, 256);
    if (!device_batch_open) {
        DeviceBatch b;
        b.first_row = first_row;
        b.rows = batch_rows;
        b.slots = empty_slots.clone();
        b.in_slots = empty_slots.clone();
        b.row_nf = at::zeros({256, std::max<int64_t>(batch_rows, 1)}, at::TensorOptions().dtype(at::kLong).device(dev));
        device.push_back(std::move(b));
        device_batch_open = true;
        finalized = false;
    }
    auto& b = device.back();
    const int64_t k = int64_t(b.entries.size());
    if ((k + 1) * kSlot > b.slots.numel()) {  // grow on the device: stream-ordered, no host wait
        b.slots = at::cat({b.slots, empty_slots});
        b.in_slots = at::cat({b.in_slots, empty_slots});
        b.row_nf = at::cat({b.row_nf, at::zeros_like(b.row_nf)});
    }
    void* stream = current_stream(dev);
    auto slot = [&](at::Tensor& s) {
        return reinterpret_cast<gpu::DeviceStats*>(static_cast<uint8_t*>(s.data_ptr()) + k * kSlot);
    };
    auto launch = [&](const at::Tensor& in, at::Tensor& slots, unsigned long long* rows_out, int64_t rows) {
        at::Tensor t = in.is_contiguous() ? in : in.contiguous();
        if (t.scalar_type() != at::kFloat && t.scalar_type() != at::kHalf && t.scalar_type() != at::kBFloat16)
            t = t.to(at::kFloat);
        if (t.numel() == 0) return;
        const int err = gpu::launch_stats(t.data_ptr(), device_dtype(t.scalar_type()), t.numel(), rows, slot(slots),
                                          rows_out, stream);
        if (err != 0) throw ModelError("statistics kernel failed to launch (error " + std::to_string(err) + ")");
    };
    auto* rows_out = reinterpret_cast<unsigned long long*>(b.row_nf.data_ptr<int64_t>() + k * b.row_nf.size(1));
    for (size_t i = 0; i < outs.size(); ++i)
        launch(outs[i], b.slots, rows_match && i == 0 ? rows_out : nullptr, rows_match && i == 0 ? batch_rows : 0);
    for (const auto& t : c.inputs)
        if (t.is_cuda()) launch(t, b.in_slots, nullptr, 0);
    b.entries.push_back({idx, rows_match});
}
#endif

at::Tensor OpObserver::State::pending_bytes() const {
    std::vector<at::Tensor> parts;
#ifdef AMPSCOPE_HAVE_GPU_STATS
    for (const auto& b : device) {
        const int64_t k = int64_t(b.entries.size());
        if (k == 0) continue;
        parts.push_back(b.slots.slice(0, 0, k * kSlot));
        parts.push_back(b.in_slots.slice(0, 0, k * kSlot));
        parts.push_back(b.row_nf.slice(0, 0, k).reshape({-1}).view(at::kByte));
    }
#endif
    return parts.empty() ? at::Tensor() : at::cat(parts);
}

void OpObserver::State::apply_bytes(const uint8_t* p, int64_t size) {
    finalized = true;
#ifdef AMPSCOPE_HAVE_GPU_STATS
    int64_t off = 0;
    for (const auto& b : device) {
        const int64_t k = int64_t(b.entries.size()), width = b.row_nf.size(1);
        if (k == 0) continue;
        TORCH_CHECK(off + k * (2 * kSlot + width * 8) <= size, "device statistics read back short");
        const uint8_t *slots = p + off, *in_slots = slots + k * kSlot, *row_nf = in_slots + k * kSlot;
        off += k * (2 * kSlot + width * 8);
        first_row = b.first_row;
        batch_rows = b.rows;
        row_nonfinite_seen.assign(size_t(b.rows), false);
        batch_nonfinite_seen = false;
        for (int64_t e = 0; e < k; ++e) {
            gpu::DeviceStats ds, di;
            std::memcpy(&ds, slots + e * kSlot, sizeof ds);
            std::memcpy(&di, in_slots + e * kSlot, sizeof di);
            const auto& en = b.entries[size_t(e)];
            std::vector<int64_t> rows;
            if (en.rows_match) {
                rows.resize(size_t(b.rows));
                std::memcpy(rows.data(), row_nf + e * width * 8, size_t(b.rows) * 8);
            }
            apply(en.idx, from_device(ds), rows, en.rows_match, [&] { return di.nan + di.posinf + di.neginf > 0; });
        }
    }
    device.clear();
#endif
}

void OpObserver::State::finalize() {
    if (finalized) return;
    const at::Tensor bytes = pending_bytes();
    if (!bytes.defined()) return apply_bytes(nullptr, 0);
    const at::Tensor host = bytes.to(at::kCPU);  // the observer's one read-back
    apply_bytes(host.data_ptr<uint8_t>(), host.numel());
}

OpObserver::OpObserver(int64_t total_rows) : s_(std::make_unique<State>()) {
    s_->row_origin.assign(size_t(total_rows), -1);
    tls_state = s_.get();
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                             .needsInputs(true)
                                             .needsOutputs(true)
                                             .scopes({at::RecordScope::FUNCTION}));
    s_->handle = handle_;
}

OpObserver::~OpObserver() {
    at::removeCallback(handle_);
    tls_state = nullptr;
}

void OpObserver::begin_batch(int64_t first_row, int64_t rows) {
    s_->first_row = first_row;
    s_->batch_rows = rows;
    s_->index = 0;
    s_->depth = 0;
    s_->row_nonfinite_seen.assign(size_t(rows), false);
    s_->batch_nonfinite_seen = false;
#ifdef AMPSCOPE_HAVE_GPU_STATS
    s_->device_batch_open = false;
#endif
    s_->busy = false;
}

void OpObserver::end_batch() {
    s_->busy = true;
    s_->close_module();
}

void OpObserver::capture_module_outputs(const std::vector<std::string>& modules) {
    for (const auto& m : modules) s_->module_outputs[m];
}

std::map<std::string, std::vector<at::Tensor>> OpObserver::take_module_outputs() {
    s_->close_module();
    return std::exchange(s_->module_outputs, {});
}

void OpObserver::State::capture_output(const std::string& module, const at::Tensor& out) {
    std::optional<std::string> key;  // the captured module this op belongs to: its path or the nearest enclosing one
    for (std::string k = module;;) {
        if (module_outputs.count(k)) {
            key = k;
            break;
        }
        if (k.empty()) break;
        const auto dot = k.rfind('.');
        k = dot == std::string::npos ? std::string() : k.substr(0, dot);
    }
    if (key != open_module) close_module();
    if (!key) return;
    open_module = key;
    open_output = out.detach().to(at::kCPU, at::kFloat, false, true);  // a copy: in-place ops would change it
}

void OpObserver::State::close_module() {
    if (open_module && open_output.defined()) module_outputs[*open_module].push_back(std::move(open_output));
    open_output = at::Tensor();
    open_module.reset();
}

std::vector<LayerStat> OpObserver::layers() const {
    s_->finalize();
    return s_->layers;
}
void OpObserver::set_capture(bool on) {
    s_->capture = on;
}
const std::vector<OpObserver::Captured>& OpObserver::captured() const {
    return s_->captured;
}
at::Tensor OpObserver::pending_device_bytes() const {
    return s_->finalized ? at::Tensor() : s_->pending_bytes();
}
void OpObserver::apply_device_bytes(const at::Tensor& host) {
    TORCH_CHECK(host.is_cpu() && host.scalar_type() == at::kByte && host.is_contiguous(),
                "device statistics: expected host bytes");
    s_->apply_bytes(host.data_ptr<uint8_t>(), host.numel());
}
const std::vector<int>& OpObserver::row_origin() const {
    s_->finalize();
    return s_->row_origin;
}

}  // namespace ampscope::detail
