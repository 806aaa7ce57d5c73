// SPDX-License-Identifier: MIT
// Measuring around the passes: benchmark (speed and memory after validation) and operator
// coverage (which ops run, which autocast keeps in FP32, which lack a kernel).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>
#if !defined(AMPSCOPE_ROCM_TORCH) && __has_include(<ATen/cuda/CUDAContext.h>) && __has_include(<cuda_runtime_api.h>)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#define AMPSCOPE_HAVE_CUDA_PROPS 1
#endif

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <optional>

#include "ampscope/engine/errors.h"
#include "inspect/gpu/device_notes.h"
#include "precision/gradscaler.h"
#include "inspect/observer.h"
#include "precision/precision.h"
#include "run/pass.h"

namespace ampscope {

using detail::AutocastGuard;
using detail::dtype_of;
using detail::first_line;
using detail::parse_device;

RunInputs identify_inputs(const std::string& model_src, const std::string& probes_src, const std::string& device,
                          uint64_t seed) {
    RunInputs r;
    r.backend = backend_report(device);
    auto model = detail::load_model(model_src, seed);
    auto probes = detail::load_probes(probes_src, *model, seed);
    r.model = model->info;
    r.probes = probes.info;
    return r;
}

namespace detail {

BenchLabels bench_labels(const std::string& kind, bool device_counters) {
    const std::string rss = "peak resident set of the process (VmHWM, reset before each precision)";
    if (kind == "cpu") return {"steady clock around each iteration", rss};
    const std::string api = kind == "hip" ? "HIP" : "CUDA";
    if (device_counters)
        return {api + " events around each iteration",
                "peak of the " + api + " caching allocator (reset before each precision)"};
    return {"steady clock around each iteration, the device synchronised after each (this build reads no " + api +
                " events)",
            "host memory only: " + rss + "; device memory is not measured by this build"};
}

}  // namespace detail

namespace {

#ifdef AMPSCOPE_HAVE_CUDA_PROPS
constexpr bool kDeviceCounters = true;  ///< CUDA events and the caching allocator's statistics
#else
constexpr bool kDeviceCounters = false;
#endif

/// Peak resident set since the last reset (Linux: VmHWM, reset through clear_refs).
int64_t reset_and_read_hwm(bool reset) {
    if (reset) {
        std::ofstream("/proc/self/clear_refs") << "5";
        return 0;
    }
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmHWM:", 0) == 0) return int64_t(std::stoll(line.substr(6))) * 1024;
    return 0;
}

/// The model and probe set of a measurement, the model on `device` in the spec's mode.
std::pair<std::unique_ptr<detail::Model>, detail::ProbeSet> load_on(const std::string& model_src,
                                                                    const std::string& probes_src, uint64_t seed,
                                                                    const at::Device& device, Mode mode,
                                                                    const std::string& output) {
    auto model = detail::load_model(model_src, seed, output);
    auto probes = detail::load_probes(probes_src, *model, seed);
    model->to_device(device);
    model->set_train(mode == Mode::Train);
    return {std::move(model), std::move(probes)};
}

/// Times `iteration` after spec.warmup untimed ones, spec.repeats times: median, p10, p90 and
/// the peak memory (see bench_labels for what is measured where).
BenchFigure time_precision(const std::function<void()>& iteration, const BenchSpec& spec, const at::Device& device,
                           Precision p) {
    const bool cuda = device.is_cuda();
    for (int i = 0; i < spec.warmup; ++i) iteration();
    if (cuda) torch::cuda::synchronize();
    reset_and_read_hwm(true);
#ifdef AMPSCOPE_HAVE_CUDA_PROPS
    if (cuda) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
    std::vector<double> ms;
    for (int i = 0; i < spec.repeats; ++i) {
#ifdef AMPSCOPE_HAVE_CUDA_PROPS
        if (cuda) {
            at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
            start.record();
            iteration();
            stop.record();
            stop.synchronize();
            ms.push_back(double(start.elapsed_time(stop)));
            continue;
        }
#endif
        const auto t0 = std::chrono::steady_clock::now();
        iteration();
        if (cuda) torch::cuda::synchronize();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    BenchFigure f;
    f.precision = p;
    f.median_ms = ms[ms.size() / 2];
    f.p10_ms = ms[ms.size() / 10];
    f.p90_ms = ms[std::min(ms.size() - 1, ms.size() * 9 / 10)];
    f.peak_bytes = reset_and_read_hwm(false);
#ifdef AMPSCOPE_HAVE_CUDA_PROPS
    if (cuda)
        f.peak_bytes = int64_t(c10::cuda::CUDACachingAllocator::getDeviceStats(device.index())
                                   .allocated_bytes[size_t(c10::CachingAllocator::StatType::AGGREGATE)]
                                   .peak);
#endif
    return f;
}

/// The labels (or else targets) of the first b probe samples, on the device (training steps).
std::pair<at::Tensor, at::Tensor> batch_truth(const detail::ProbeSet& probes, int64_t b, const at::Device& device) {
    at::Tensor labels, targets;
    if (!probes.labels.empty())
        labels = at::tensor(std::vector<int64_t>(probes.labels.begin(), probes.labels.begin() + b)).to(device);
    else if (!probes.targets.empty())
        targets =
            at::tensor(std::vector<float>(probes.targets.begin(), probes.targets.begin() + b * probes.target_width))
                .reshape({b, probes.target_width})
                .to(device);
    return {labels, targets};
}

void check_bench_spec(const BenchSpec& spec) {
    if (spec.repeats < 3) throw InputError("", "repeats", "expected an integer >= 3");
    if (spec.warmup < 0) throw InputError("", "warmup", "expected an integer >= 0");
    if (spec.batch_size < 1) throw InputError("", "batch_size", "expected an integer >= 1");
}

/// Speed-up and memory ratio of every precision against the FP32 figures (the first).
void relative_to_fp32(std::vector<BenchFigure>& figures) {
    for (auto& f : figures) {
        f.speedup = figures[0].median_ms / f.median_ms;
        f.memory_ratio = figures[0].peak_bytes > 0 ? double(f.peak_bytes) / double(figures[0].peak_bytes) : 1.0;
    }
}

}  // namespace

BenchResult run_benchmark(const BenchSpec& spec) {
    using namespace detail;
    check_bench_spec(spec);
    BenchResult res;
    res.backend = backend_report(spec.device);
    const at::Device device = parse_device(res.backend.device);
    auto loaded = load_on(spec.model, spec.probes, spec.seed, device, spec.mode, spec.output);  // lambdas capture these
    auto& model = loaded.first;
    auto& probes = loaded.second;
    res.model = model->info;
    res.probes = probes.info;
    check_fp32_regions(*model, spec.keep_fp32);  // the policy timed is the one validated
    res.keep_fp32 = spec.keep_fp32;
    std::vector<at::Tensor> in;
    const int64_t n = probes.inputs[0].size(0);
    const int64_t b = std::min<int64_t>(spec.batch_size, n);
    res.batch = int(b);
    model->check_batches(b, b, spec.probes);  // the one batch timed, against the program's batch range
    res.train = spec.train;
    for (const auto& t : probes.inputs) {
        // the same batch for every precision: the first b samples, repeated to fill b if needed
        in.push_back(t.slice(0, 0, b).contiguous().to(device));
    }
    const bool cuda = device.is_cuda();
    const auto measured = bench_labels(res.backend.kind, cuda && kDeviceCounters);  // what is measured below
    res.timer = measured.timer;
    res.memory = measured.memory;
    if (spec.train && probes.labels.empty() && probes.targets.empty())
        throw InputError(spec.probes, "labels", "timing training steps needs labels or targets in the probe set");
    std::vector<Precision> all = {Precision::Fp32};
    for (auto p : spec.precisions)
        if (p != Precision::Fp32) all.push_back(p);
    std::optional<at::NoGradGuard> ng;
    if (!spec.train) ng.emplace();
    const auto truth = batch_truth(probes, b, device);  // labels, or else targets
    for (auto p : all) {
        torch::manual_seed(spec.seed);
        // no observer, no statistics, no guards in the timed loop; FP32 regions in AMP passes only
        PassScope pass_scope(device.type(), p == Precision::Fp32 ? std::vector<std::string>{} : spec.keep_fp32, false);
        // training: a fresh copy of the model per precision, SGD, GradScaler for fp16
        std::unique_ptr<Model> tm;
        std::unique_ptr<torch::optim::SGD> opt;
        std::unique_ptr<GradScaler> scaler;
        std::vector<at::Tensor> params;
        if (spec.train) {
            tm = load_model(spec.model, spec.seed, spec.output);
            tm->to_device(device);
            tm->set_train(true);
            params = tm->parameters();
            opt = std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(1e-3));
            ScalerOptions so;
            so.enabled = p == Precision::Fp16;
            scaler = std::make_unique<GradScaler>(res.backend.device, so);
        }
        auto iteration = [&] {
            if (!spec.train) {
                AutocastGuard g(device.type(), p);
                model->forward(in);
                return;
            }
            opt->zero_grad();
            at::Tensor loss;
            {
                AutocastGuard g(device.type(), p);
                auto out = tm->forward(in);
                loss = truth.first.defined()
                           ? torch::nn::functional::cross_entropy(out, truth.first)
                           : torch::nn::functional::mse_loss(out.reshape(truth.second.sizes()), truth.second);
            }
            scaler->impl().scale_loss(loss).backward();
            scaler->impl().step(*opt, params);
            scaler->impl().update();
        };
        res.figures.push_back(time_precision(iteration, spec, device, p));
    }
    relative_to_fp32(res.figures);
    return res;
}

OpsReport op_coverage(const RunSpec& spec) {
    using namespace detail;
    OpsReport rep;
    if (spec.precisions.empty() || spec.precisions[0] == Precision::Fp32)
        throw InputError("", "precision", "expected fp16 or bf16");
    rep.precision = spec.precisions[0];
    rep.model = spec.model;
    rep.backend = backend_report(spec.device);
    const at::Device device = parse_device(rep.backend.device);
    auto loaded =
        load_on(spec.model, spec.probes, spec.seed, device, spec.mode, spec.criteria.output);  // lambdas capture these
    auto& model = loaded.first;
    auto& probes = loaded.second;
    std::vector<at::Tensor> in;
    for (const auto& t : probes.inputs) in.push_back(t.slice(0, 0, 1).to(device));
    PassScope pass_scope(device.type(), {}, /*observing=*/true);
    at::NoGradGuard no_grad;
    auto capture = [&](Precision p) {
        OpObserver obs(1);
        obs.set_capture(true);
        obs.begin_batch(0, 1);
        {
            AutocastGuard guard(device.type(), p);
            model->forward(in);
        }
        obs.end_batch();
        return obs.captured();
    };
    const auto ref = capture(Precision::Fp32);
    const auto amp = capture(rep.precision);
    const auto dtype = dtype_of(rep.precision);
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < ref.size(); ++i) {
        const auto& c = ref[i];
        auto [it, fresh] = index.emplace(c.op, rep.ops.size());
        if (fresh) {
            OpCoverage oc;
            oc.op = c.op;
            for (const auto& v : c.inputs)
                if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_floating_point())
                    oc.input_dtypes.push_back(c10::toString(v.toTensor().scalar_type()));
            // kernel check: the same call with floating inputs in the target dtype, autocast off
            const auto dot = c.op.find('.');
            const c10::OperatorName name(c.op.substr(0, dot), dot == std::string::npos ? "" : c.op.substr(dot + 1));
            auto handle = c10::Dispatcher::singleton().findOp(name);
            if (!handle) {
                oc.kernel_ok = false;
                oc.error = "not a dispatcher op";
            } else {
                std::vector<c10::IValue> stack;
                for (const auto& v : c.inputs) {
                    if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_floating_point())
                        stack.emplace_back(v.toTensor().to(device).to(dtype));
                    else if (v.isTensor() && v.toTensor().defined())
                        stack.emplace_back(v.toTensor().to(device));
                    else
                        stack.push_back(v);
                }
                try {
                    AutocastGuard off(device.type(), Precision::Fp32);
                    handle->callBoxed(&stack);
                } catch (const std::exception& e) {
                    oc.kernel_ok = false;
                    const auto* ce = dynamic_cast<const c10::Error*>(&e);
                    oc.error = first_line(ce ? ce->what_without_backtrace() : e.what());
                }
            }
            rep.ops.push_back(std::move(oc));
        }
        auto& oc = rep.ops[it->second];
        oc.calls++;
        if (std::find(oc.modules.begin(), oc.modules.end(), c.module) == oc.modules.end())
            oc.modules.push_back(c.module);
        if (i < amp.size() && amp[i].op == c.op && oc.amp_output_dtype.empty()) {
            oc.amp_output_dtype = amp[i].output_dtype;
            oc.autocast_fp32 = amp[i].output_dtype == "Float";
        }
    }
    return rep;
}

}  // namespace ampscope
