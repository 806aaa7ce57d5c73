// SPDX-License-Identifier: MIT
// Autocast guard, the FP32 reference and AMP passes, the comparison runner (the backend report: backend.cpp).
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/Parallel.h>
#include <ATen/Context.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/runtime/jit_exception.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>

#include "ampscope/engine/vocabulary.h"
#include "ampscope/engine/compare.h"
#include "ampscope/engine/errors.h"
#include "ampscope/engine/train.h"
#include "inspect/gpu/device_notes.h"
#include "inspect/observer.h"
#include "precision/fp8_pass.h"
#include "precision/precision.h"
#include "run/comparison.h"
#include "run/pass.h"

namespace ampscope {
namespace detail {

/// The informative line of an error: TorchScript wraps the real message after a traceback.
std::string first_line(const std::string& s) {
    for (const char* marker : {"RuntimeError: ", "Error: "}) {
        const auto p = s.rfind(marker);
        if (p != std::string::npos) {
            const auto b = p + std::strlen(marker);
            return s.substr(b, s.find('\n', b) - b);
        }
    }
    return s.substr(0, s.find('\n'));
}

at::Device parse_device(const std::string& d) {
    static const std::regex re("^(cpu|cuda)(:([0-9]{1,4}))?$");
    std::smatch m;
    if (!std::regex_match(d, m, re))
        throw InputError("", "device", "'" + d + "' is not a device; expected cpu, cuda or cuda:N (N a device index)");
    if (m[1] == "cpu") return at::Device(at::kCPU);
    const int idx = m[3].matched ? std::stoi(m[3]) : 0;
    if (!torch::cuda::is_available())
        throw InputError(
            "", "device",
            "'" + d + "' requested, but no CUDA (or ROCm) device is available on this machine; use device cpu");
    if (idx >= int(torch::cuda::device_count()))
        throw InputError(
            "", "device",
            "'" + d + "' requested, but only " + std::to_string(torch::cuda::device_count()) + " CUDA device(s) exist");
    return at::Device(at::kCUDA, c10::DeviceIndex(idx));
}

namespace {

/// What the model did when its forward threw, as the error the user sees: out of memory
/// (runtime, 3), the model's own exception (3), or its inputs refused on the first batch (2).
std::exception_ptr forward_error(const std::exception& err, const Model& model, const ProbeSet& probes,
                                 const std::string& stage, bool first_batch, int64_t rows) {
    if (dynamic_cast<const ModelError*>(&err) || dynamic_cast<const InputError*>(&err)) return std::current_exception();
    const auto* c10err = dynamic_cast<const c10::Error*>(&err);
    const std::string full = c10err ? c10err->what_without_backtrace() : err.what();
    const std::string msg = first_line(full);
    if (dynamic_cast<const c10::OutOfMemoryError*>(&err) || dynamic_cast<const std::bad_alloc*>(&err) ||
        full.find("not enough memory") != std::string::npos || full.find("out of memory") != std::string::npos ||
        full.find("can't allocate memory") != std::string::npos)
        return std::make_exception_ptr(ModelError("out of memory in " + stage + " (batch of " + std::to_string(rows) +
                                                  "); try a smaller batch size: " + msg));
    if (dynamic_cast<const torch::jit::JITException*>(&err))
        return std::make_exception_ptr(
            ModelError("the model " + model.info.source + " raised an exception in " + stage + ": " + msg));
    if (first_batch && model.info.kind == "torchscript") {
        std::string shapes;
        for (const auto& t : probes.inputs) shapes += (shapes.empty() ? "" : ", ") + c10::str(t.sizes());
        return std::make_exception_ptr(InputError(probes.info.source, "inputs",
                                                  "the model " + model.info.source + " failed on inputs of shape " +
                                                      shapes + " (is that the input it expects?): " + msg));
    }
    if (!model.unchecked_ids.empty() && msg.find("index out of range") != std::string::npos)
        return std::make_exception_ptr(ModelError(stage + " failed: " + msg + " (" + model.unchecked_ids + ")"));
    return std::make_exception_ptr(ModelError(stage + " failed: " + msg));
}

/// One batch of the probe inputs on `device`, as copies the model may write into. On a GPU
/// they go through pinned host memory and are copied asynchronously, in stream order: no
/// host wait. `originals`, when given, receives what the model was given (to compare after).
std::vector<at::Tensor> upload_batch(const std::vector<at::Tensor>& inputs, int64_t b, int64_t e,
                                     const at::Device& device, std::vector<at::Tensor>* originals) {
    std::vector<at::Tensor> in;
    if (originals) originals->clear();
    for (const auto& t : inputs) {
        at::Tensor src = t.slice(0, b, e);  // a view of the probes
        if (!device.is_cpu()) {
            if (src.is_cpu()) src = src.contiguous().pin_memory();
            src = src.to(device, t.scalar_type(), /*non_blocking=*/true, /*copy=*/true);
        }
        in.push_back(device.is_cpu() || originals ? src.clone() : src);
        if (originals) originals->push_back(src);
    }
    return in;
}

/// Accumulates, on the device, whether the model changed its input copies (bitwise).
void note_mutation(const std::vector<at::Tensor>& in, const std::vector<at::Tensor>& originals,
                   const at::Device& device, at::Tensor& flag) {
    for (size_t i = 0; i < in.size(); ++i) {
        const auto& orig = originals[i];
        at::Tensor changed = in[i].sizes() != orig.sizes() || in[i].scalar_type() != orig.scalar_type()
                                 ? at::ones({}, at::TensorOptions().dtype(at::kBool).device(device))
                                 : in[i].view(at::kByte).ne(orig.view(at::kByte)).any();  // any dtype: token ids, masks
        flag = flag.defined() ? flag.logical_or(changed) : changed;
    }
}

/// The model's output of one batch, checked, as [rows, scores] (a view, left on its device).
at::Tensor batch_scores(const at::Tensor& y, int64_t rows, const Model& model) {
    if (y.dim() == 0 || y.size(0) != rows)
        throw ModelError("the model's output has shape " + c10::str(y.sizes()) + "; expected a batch dimension of " +
                         std::to_string(rows));
    if (y.numel() == 0)
        throw InputError(
            model.info.source, "outputs",
            "the model returned no scores (shape " + c10::str(y.sizes()) + "); expected at least one score per sample");
    return y.detach().reshape({rows, -1});
}

/// A pass's scores as its batches come. On the CPU each batch goes straight into the result,
/// converted to float32 in that one copy (a language model's logits are the largest tensor of
/// a pass: no second copy of them is held). On a GPU they stay on the device until the pass
/// ends and come back in its one host read, with the observer's statistics and the mutation flag.
class PassScores {
public:
    PassScores(const at::Device& device, int64_t n, const std::string& stage)
        : cpu_(device.is_cpu()), n_(n), stage_(stage) {}

    void add(const at::Tensor& y, int64_t b, int64_t rows, const Model& model, PassResult& r) {
        const at::Tensor s = batch_scores(y, rows, model);
        if (k_ < 0) k_ = s.size(1);
        if (s.size(1) != k_)
            throw ModelError(stage_ + ": the model's output has shape " + c10::str(y.sizes()) + " for samples " +
                             std::to_string(b) + " to " + std::to_string(b + rows - 1) + " but " + std::to_string(k_) +
                             " scores per sample in the first batch; its size per sample must not depend on the batch");
        if (!cpu_) {
            device_.push_back(s.to(at::kFloat));
            return;
        }
        if (r.outputs.empty()) r.outputs.resize(size_t(n_ * k_));
        at::from_blob(r.outputs.data() + b * k_, {rows, k_}, at::TensorOptions().dtype(at::kFloat)).copy_(s);
    }

    /// After the last batch: the scores on the host, the statistics applied, the samples with
    /// a non-finite score listed; returns whether the model wrote into its inputs.
    bool finish(const at::Tensor& mutated, OpObserver* observer, const ProbeSet& probes, PassResult& r) {
        const at::Tensor stats = observer ? observer->pending_device_bytes() : at::Tensor();
        bool changed = false;
        if (cpu_) {
            if (stats.defined()) observer->apply_device_bytes(stats.contiguous());
            changed = mutated.defined() && mutated.item<bool>();
        } else {
            changed = read_back(mutated, stats, observer, r);
        }
        r.num_outputs = int(std::max<int64_t>(k_, 0));
        for (int64_t i = 0; i < n_ && k_ > 0; ++i)
            if (!std::all_of(r.outputs.begin() + i * k_, r.outputs.begin() + (i + 1) * k_,
                             [](float v) { return std::isfinite(v); }))
                r.nonfinite_samples.push_back(probes.samples[size_t(i)].id);
        return changed;
    }

private:
    /// The only host read of a GPU pass: scores, statistics slots and mutation flag in one copy.
    bool read_back(const at::Tensor& mutated, const at::Tensor& stats, OpObserver* observer, PassResult& r) {
        at::Tensor all = at::cat(device_, 0);
        device_.clear();
        const int64_t score_bytes = all.numel() * int64_t(sizeof(float));
        std::vector<at::Tensor> parts{all.reshape({-1}).view(at::kByte)};
        if (stats.defined()) parts.push_back(stats);
        if (mutated.defined()) parts.push_back(mutated.to(at::kByte).reshape({1}));
        all = at::Tensor();
        const at::Tensor host = (parts.size() == 1 ? parts[0] : at::cat(parts)).to(at::kCPU).contiguous();
        parts.clear();
        r.outputs.resize(size_t(score_bytes) / sizeof(float));
        std::memcpy(r.outputs.data(), host.data_ptr(), size_t(score_bytes));
        if (stats.defined()) observer->apply_device_bytes(host.slice(0, score_bytes, score_bytes + stats.numel()));
        return mutated.defined() && host[host.numel() - 1].item<uint8_t>() != 0;
    }

    bool cpu_;
    int64_t n_, k_ = -1;
    std::string stage_;
    std::vector<at::Tensor> device_;  ///< GPU: [rows, k] float32 per batch, on the device
};

/// The forward origin: the earliest op where some sample's values were born non-finite.
std::optional<Origin> forward_origin(const std::vector<LayerStat>& layers, const std::vector<int>& ro,
                                     const ProbeSet& probes) {
    int first = -1;
    for (int v : ro)
        if (v >= 0 && (first < 0 || v < first)) first = v;
    if (first < 0 || size_t(first) >= layers.size()) return std::nullopt;
    Origin org;
    org.stage = "forward";
    org.index = first;
    org.module = layers[size_t(first)].module;
    org.op = layers[size_t(first)].op;
    for (size_t i = 0; i < ro.size(); ++i)
        if (ro[i] == first) org.samples.push_back(probes.samples[i].id);
    return org;
}

}  // namespace

PassResult run_pass(Model& model, const ProbeSet& probes, const at::Device& device, const PassOptions& o,
                    ProgressObserver* progress, bool first_pass) {
    PassResult r;
    r.precision = o.precision;
    r.keep_fp32 = o.keep_fp32;
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t n = probes.inputs[0].size(0);
    const std::string stage = "pass " + to_string(o.precision) + (o.fp8_real_gemm ? " (real FP8 GEMMs)" : "");
    model.set_train(o.train);
    torch::manual_seed(o.seed);  // same RNG stream (dropout) for every pass
    at::NoGradGuard no_grad;
    PassScope pass_scope(device.type(), o.precision == Precision::Fp32 ? std::vector<std::string>{} : o.keep_fp32,
                         o.inspect);
    if (o.precision != Precision::Fp32) pass_scope.context().amp_only = o.amp_only;
    if (is_fp8(o.precision)) pass_scope.context().keep_bf16 = o.keep_bf16;
    std::unique_ptr<OpObserver> observer;
    if (o.inspect) observer = std::make_unique<OpObserver>(n);
    if (observer && o.module_outputs) observer->capture_module_outputs(o.capture_modules);
    std::vector<at::Tensor> originals;
    at::Tensor mutated;  // device flag: the model wrote into an input
    PassScores scores(device, n, stage);
    const int64_t bs = model.fixed_batch > 0 ? model.fixed_batch : std::max(1, o.batch_size);
    for (int64_t b = 0; b < n; b += bs) {
        if (progress) {
            if (progress->cancel_requested()) throw Cancelled();
            progress->progress(stage, int(b), int(n));
        }
        const int64_t e = std::min(n, b + bs);
        // Copies, always: a model that writes into its inputs (x.mul_(2)) must not change
        // the probes the next pass reads.
        const auto in = upload_batch(probes.inputs, b, e, device, o.inputs_mutated ? &originals : nullptr);
        if (observer) observer->begin_batch(b, e - b);
        at::Tensor y;
        try {
            // No cast cache: a comparison pass runs without gradients, so the weights' low-precision
            // copies (half the weights' bytes) need not outlive their op; the values are the same.
            AutocastGuard guard(device.type(), autocast_precision(o.precision), /*cache=*/false);
            Fp8PassGuard fp8(o.precision, o.inspect && !o.fp8_real_gemm ? &r.fp8_operands : nullptr,
                             {o.fp8_amax_history, o.fp8_margin}, o.fp8_real_gemm, o.mx_scaling);
            const bool what_if = o.fp8_what_if && o.inspect && o.precision == Precision::Bf16;
            Fp8WhatIfGuard fp8_what_if(what_if ? &r.fp8_operands : nullptr, o.mx_scaling);
            Fp8AllGemmsScope all_gemms(o.fp8_all_gemms);
            Fp8GemmCounter gemm_counter(o.gemm_counts);
            y = model.forward(in);
            if (observer) observer->end_batch();
        } catch (const Cancelled&) {
            throw;
        } catch (const std::exception& err) {
            std::rethrow_exception(forward_error(err, model, probes, stage, first_pass && b == 0, e - b));
        }
        if (o.inputs_mutated) note_mutation(in, originals, device, mutated);
        if (r.output_shape.empty() && y.dim() > 0) r.output_shape = y.sizes().slice(1).vec();
        scores.add(y, b, e - b, model, r);
    }
    if (progress) progress->progress(stage, int(n), int(n));
    const bool changed = scores.finish(mutated, observer.get(), probes, r);
    if (o.inputs_mutated && mutated.defined()) *o.inputs_mutated = changed;
    if (observer) {
        if (o.module_outputs) *o.module_outputs = observer->take_module_outputs();
        r.layers = observer->layers();
        r.origin = forward_origin(r.layers, observer->row_origin(), probes);
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

/// Labels and targets against the scores the model really gives (known after a forward).
void check_outputs_fit(const ProbeSet& probes, const std::string& file, int num_outputs) {
    if (!probes.targets.empty() && probes.target_width != num_outputs)
        throw InputError(file, "targets",
                         "has " + std::to_string(probes.target_width) + " values per sample; the model gives " +
                             std::to_string(num_outputs));
    for (size_t i = 0; probes.label_width == 0 && i < probes.labels.size(); ++i)  // token labels: run/sequence.cpp
        if (probes.labels[i] >= num_outputs)
            throw InputError(file, "labels",
                             "label " + std::to_string(probes.labels[i]) + " of sample '" + probes.samples[i].id +
                                 "' is out of range; the model gives " + std::to_string(num_outputs) + " scores");
}

namespace {

void validate_criteria(const Criteria& c) {
    auto nonneg = [](double v, const char* field) {
        if (!(v >= 0) || !std::isfinite(v)) throw InputError("criteria", field, "expected a finite number >= 0");
    };
    nonneg(c.atol, "atol");
    nonneg(c.rtol, "rtol");
    nonneg(c.tie_tolerance, "tie_tolerance");
    if (c.max_flips < 0) throw InputError("criteria", "max_flips", "expected an integer >= 0");
    if (!std::isfinite(c.quality_threshold))
        throw InputError("criteria", "quality_threshold", "expected a finite number");
    for (size_t i = 0; i < c.heads.size(); ++i) {
        const auto& h = c.heads[i];
        const std::string f = "heads[" + std::to_string(i) + "]";
        if (h.begin < 0 || h.end <= h.begin) throw InputError("criteria", f, "expected 0 <= begin < end");
        nonneg(h.atol, (f + ".atol").c_str());
        nonneg(h.rtol, (f + ".rtol").c_str());
    }
}

}  // namespace
}  // namespace detail

namespace detail {

void ComparisonRun::stage(const char* name) {
    if (progress) progress->progress(name, 0, 1);
}

void ComparisonRun::fix_criteria() {
    res.run_id = make_uuid();
    res.tool_version = version();
    res.spec = spec;
    validate_criteria(spec.criteria);
    res.criteria = spec.criteria;
    res.criteria.fixed_at = now_iso8601();
    res.started_at = res.criteria.fixed_at;
    // every precision train takes is a pass of a run (fp32 is the reference)
    if (spec.precisions.empty())
        throw InputError("", "precision",
                         "no AMP precision given; expected one or more of " + training_precisions_listed());
    for (auto p : spec.precisions)
        if (p == Precision::Fp32)
            throw InputError(
                "", "precision",
                "fp32 is the reference and always runs; expected one or more of " + training_precisions_listed());
    if (spec.batch_size < 1) throw InputError("", "batch_size", "expected an integer >= 1");
    if (spec.fp8_amax_history < 1 || spec.fp8_amax_history > kMaxAmaxHistory)
        throw InputError("", "fp8_amax_history",
                         std::to_string(spec.fp8_amax_history) + "; expected an integer from 1 to " +
                             std::to_string(kMaxAmaxHistory));
    if (spec.mx_scaling != MxScaling::Floor && !spec.has_pass(Precision::Mxfp8) && !spec.fp8_what_if)
        throw InputError("", "mx_scaling",
                         "'" + to_string(spec.mx_scaling) +
                             "' for MX block scales, but the run has no mxfp8 pass and no FP8 what-if; expected floor");
    if (spec.fp8_all_gemms && !spec.fp8_what_if &&
        std::none_of(spec.precisions.begin(), spec.precisions.end(), [](Precision p) { return is_fp8(p); }))
        throw InputError(
            "", "fp8_all_gemms",
            "quantizes the model's matrix products in FP8 passes, but the run has no FP8 pass and no FP8 "
            "what-if; expected an FP8 precision (fp8, fp8-rowwise, mxfp8, nvfp4 or fp8-delayed) or the what-if");
    if (spec.fp8_real_gemm == RealGemm::On && !spec.has_pass(Precision::Fp8) && !spec.has_pass(Precision::Fp8Rowwise))
        throw InputError("", "fp8_real_gemm",
                         "on applies to fp8 and fp8-rowwise passes (torch._scaled_mm); this run has neither");
    if (spec.fp8_margin < 0 || spec.fp8_margin > kMaxFp8Margin)
        throw InputError(
            "", "fp8_margin",
            std::to_string(spec.fp8_margin) + "; expected an integer from 0 to " + std::to_string(kMaxFp8Margin));
}

void ComparisonRun::choose_backend() {
    stage("backend");
    res.backend = backend_report(spec.device);
    device = parse_device(res.backend.device);
    if (auto w = host_statistics_warning(res.backend.kind, device_statistics_platform(), spec.inspect); !w.empty())
        res.warnings.push_back(std::move(w));
    for (auto p : spec.precisions) {
        if (p == Precision::Fp8Delayed)
            res.warnings.push_back(delayed_scaling_note({spec.fp8_amax_history, spec.fp8_margin}));
        if (autocast_precision(p) == Precision::Bf16 && !res.backend.bf16_supported)
            throw InputError("", "precision",
                             to_string(p) + " requested (BF16 autocast), but " + res.backend.device + " (" +
                                 res.backend.name +
                                 ") has no bf16 support (needs compute capability >= 8.0 or a ROCm GPU)");
    }
}

void ComparisonRun::load_inputs() {
    stage("load model");
    model = load_model(spec.model, spec.seed, spec.criteria.output);
    check_fp32_regions(*model, spec.keep_fp32);
    check_bf16_modules(*model, spec.keep_bf16, spec.precisions);
    check_kept_once(spec.keep_fp32, spec.keep_bf16);
    if (spec.fp8_what_if && (!spec.has_pass(Precision::Bf16) || !spec.inspect))
        throw InputError("", "fp8_what_if",
                         std::string("the FP8 what-if gathers its statistics in the BF16 pass, with inspection on: ") +
                             (spec.inspect ? "the run has no bf16 pass; expected bf16 among the precisions"
                                           : "inspection is off; expected it on"));
    stage("load probes");
    probes = load_probes(spec.probes, *model, spec.seed);
    if (model->fixed_batch == 0)
        model->check_batches(probes.inputs[0].size(0), spec.batch_size, spec.probes);  // before any pass
    model->to_device(device);
    state = std::make_unique<StateKeeper>(
        *model, [this] { return load_model(spec.model, spec.seed, spec.criteria.output)->named_state(); });
    res.criteria.output = model->output_name;  // recorded as resolved, with the criteria
    res.model = model->info;
    res.model.mode = to_string(spec.mode);
    res.warnings.insert(res.warnings.end(), model->warnings.begin(), model->warnings.end());
    for (auto& w : model->mode_warnings(spec.mode == Mode::Train)) res.warnings.push_back(std::move(w));
    if (model->fixed_batch > 0 && model->fixed_batch != spec.batch_size)
        res.warnings.push_back(
            "the model was exported with a static batch of " + std::to_string(model->fixed_batch) +
            ": passes run in batches of that size (the last one padded in eval mode), not batch size " +
            std::to_string(spec.batch_size));
    const int64_t n = probes.inputs[0].size(0), bs = model->fixed_batch > 0 ? model->fixed_batch : spec.batch_size;
    if (spec.has_pass(Precision::Fp8Delayed) && n <= bs)
        res.warnings.push_back(one_batch_delayed_note(n, model->fixed_batch));
    res.probes = probes.info;
    res.samples = probes.samples;
    res.labels = probes.labels;
    res.targets = probes.targets;
    auto& c = res.criteria;
    if (!c.quality_metric_set && !probes.targets.empty()) c.quality_metric = QualityMetric::Mse;
    if (c.quality_metric_set) {
        const bool acc =
            c.quality_metric != QualityMetric::Mse && c.quality_metric != QualityMetric::MaxAbsError;  // label metrics
        if (acc && probes.labels.empty())
            throw InputError(spec.probes, "labels",
                             "quality_metric " + to_string(c.quality_metric) + " needs labels in the probe set");
        if (!acc && probes.targets.empty())
            throw InputError(spec.probes, "targets",
                             "quality_metric " + to_string(c.quality_metric) + " needs targets in the probe set");
    }
    // Probe inputs themselves non-finite: stage "input".
    for (const auto& t : probes.inputs) {
        const auto rows = t.reshape({t.size(0), -1}).isfinite().logical_not().any(1).contiguous();
        const bool* r = rows.data_ptr<bool>();
        for (int64_t i = 0; i < t.size(0); ++i)
            if (r[i]) {
                if (!input_origin) input_origin = Origin{"input", "", "", -1, {}, {}};
                input_origin->samples.push_back(probes.samples[size_t(i)].id);
            }
    }
    resolve_sequence_inputs();  // run/sequence.cpp: recorded with the criteria
}

PassOptions ComparisonRun::options() const {
    PassOptions o;
    o.train = spec.mode == Mode::Train;
    o.seed = spec.seed;
    o.batch_size = spec.batch_size;
    o.inspect = spec.inspect;
    o.keep_bf16 = spec.keep_bf16;
    o.fp8_amax_history = spec.fp8_amax_history;
    o.fp8_margin = spec.fp8_margin;
    o.fp8_what_if = spec.fp8_what_if;
    o.mx_scaling = spec.mx_scaling;
    o.fp8_all_gemms = spec.fp8_all_gemms;
    return o;
}

PassResult ComparisonRun::pass(PassOptions o, bool first) {
    state->restore(*model);  // a failed pass may have left changes behind
    PassResult p = pass_runner ? pass_runner(o, first) : run_pass(*model, probes, device, o, progress, first);
    note_state_changes(state->restore(*model));
    if (input_origin) p.origin = input_origin;
    p.quality = quality(p, truth(), res.criteria);
    return p;
}

void ComparisonRun::note_state_changes(const std::vector<std::string>& changed) {
    if (changed.empty() || !state_changed.empty()) return;
    state_changed = changed;
    std::string names;
    for (size_t i = 0; i < changed.size() && i < 8; ++i) names += (i ? ", " : "") + changed[i];
    if (changed.size() > 8) names += ", … (" + std::to_string(changed.size()) + " in all)";
    res.warnings.push_back(
        "the model changes its own state in forward (" + names +
        "); every pass was started from the state as loaded, so passes differ only in precision policy, "
        "but a deployed model would see the changed state");
}

namespace {

/// The samples whose reference scores are broken: NaN or +inf anywhere; -inf too, unless the
/// scores are a classifier's or a sequence's (a -inf logit is a masked entry, probability 0).
std::vector<std::string> broken_reference(const PassResult& ref, const Truth& truth,
                                          const std::vector<SampleInfo>& samples) {
    const size_t k = size_t(std::max(ref.num_outputs, 0));
    const bool scores = is_classifier(ref.num_outputs, truth);
    std::vector<std::string> out;
    for (size_t i = 0; k > 0 && i < samples.size() && (i + 1) * k <= ref.outputs.size(); ++i)
        if (std::any_of(ref.outputs.begin() + long(i * k), ref.outputs.begin() + long((i + 1) * k),
                        [scores](float v) { return std::isnan(v) || v == INFINITY || (!scores && v == -INFINITY); }))
            out.push_back(samples[i].id);
    return out;
}

}  // namespace

bool ComparisonRun::reference(PassResult& ref) {
    bool mutated = false;
    PassOptions o = options();
    o.inputs_mutated = &mutated;
    if (module_outputs) {
        o.inspect = true;
        o.capture_modules = capture_modules;
        o.module_outputs = module_outputs;
    }
    ref = pass(o, true);
    if (mutated)
        res.warnings.push_back(
            "the model changes its input tensors in place; every pass was given its own copy of "
            "the probes, but the model's outputs may depend on that side effect");
    setup_sequence(ref);  // run/sequence.cpp
    check_outputs_fit(probes, spec.probes, ref.num_outputs);
    for (size_t i = 0; i < res.criteria.heads.size(); ++i)
        if (res.criteria.heads[i].end > ref.num_outputs)
            throw InputError("criteria", "heads[" + std::to_string(i) + "]",
                             "end " + std::to_string(res.criteria.heads[i].end) + " exceeds the model's " +
                                 std::to_string(ref.num_outputs) + " outputs");
    res.passes.push_back(ref);
    if (sink) sink->pass_finished(ref);
    const auto broken = broken_reference(ref, truth(), probes.samples);
    if (broken.empty()) return true;
    res.verdict = Verdict::InvalidReference;
    res.warnings.push_back("the FP32 reference is not finite for " + std::to_string(broken.size()) +
                           " samples; AMP passes were not run against a broken reference");
    return false;
}

void ComparisonRun::amp_passes() {
    PassOptions o = options();
    o.keep_fp32 = spec.keep_fp32;
    bool all_ok = true;
    const auto first_fp8 =
        std::find_if(spec.precisions.begin(), spec.precisions.end(), [](Precision q) { return is_fp8(q); });
    res.passes.reserve(res.passes.size() + spec.precisions.size());  // the reference stays put
    const PassResult& ref = res.passes.front();
    for (auto p : spec.precisions) {
        o.precision = p;
        Fp8GemmCounts counts;
        o.gemm_counts = is_fp8(p) ? &counts : nullptr;
        PassResult amp = pass(o, false);
        add_fp8_warnings(res.warnings, amp, counts, o, first_fp8 != spec.precisions.end() && p == *first_fp8);
        o.gemm_counts = nullptr;
        if (wants_real_gemm(p)) amp.real_gemm = real_gemm_check(ref, amp, o);
        if (sink) sink->pass_finished(amp);
        auto cmp = compare_pass(ref, amp);
        res.passes.push_back(std::move(amp));  // one copy of each pass's scores is kept
        all_ok = all_ok && cmp.verdict == Verdict::Accepted;
        res.comparisons.push_back(cmp);
        if (sink) sink->comparison_finished(cmp);
    }
    res.verdict = all_ok ? Verdict::Accepted : Verdict::Rejected;
}

void ComparisonRun::setup() {
    fix_criteria();
    choose_backend();
    load_inputs();
}

RunResult ComparisonRun::run() {
    setup();
    return execute();
}

RunResult ComparisonRun::execute() {
    if (sink) sink->run_started(res);
    try {
        bool ok = false;
        {
            PassResult ref;  // its copy is res.passes.front()
            ok = reference(ref);
        }
        if (ok) amp_passes();
    } catch (const Cancelled& e) {
        if (sink) sink->run_failed("cancelled", e.what());
        throw;
    } catch (const std::exception& e) {
        if (sink) sink->run_failed("failed", e.what());
        throw;
    }
    res.finished_at = now_iso8601();
    if (sink) sink->run_finished(res);
    return std::move(res);
}
}  // namespace detail

RunResult run_comparison(const RunSpec& spec, RunSink* sink, ProgressObserver* progress) {
    detail::ComparisonRun run(spec, sink, progress);
    return run.run();
}

}  // namespace ampscope
