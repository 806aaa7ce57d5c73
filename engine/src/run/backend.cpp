// SPDX-License-Identifier: MIT
// The backend report: which device and backend a run uses (CPU, CUDA, or ROCm's HIP, which is
// still called cuda), its name, versions and notes, and where the statistics run.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>
#if !defined(AMPSCOPE_ROCM_TORCH) && __has_include(<ATen/cuda/CUDAContext.h>) && __has_include(<cuda_runtime_api.h>)
#include <ATen/cuda/CUDAContext.h>
#define AMPSCOPE_HAVE_CUDA_PROPS 1
#endif
#if defined(AMPSCOPE_HAVE_GPU_STATS) && defined(AMPSCOPE_GPU_STATS_HIP)
#include "stats_gpu.h"
#endif

#include <fstream>
#include <string>

#include "ampscope/engine/errors.h"
#include "inspect/gpu/device_notes.h"
#include "run/pass.h"

namespace ampscope {
namespace detail {
namespace {

std::string cpu_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) {
            auto p = line.find(':');
            return p == std::string::npos ? line : line.substr(p + 2);
        }
    return "cpu";
}

}  // namespace
}  // namespace detail

namespace detail {

bool statistics_on_device(const std::string& kind, const std::string& built) {
    return kind == "cpu" || kind == built;
}

std::string device_statistics_note(const std::string& kind, const std::string& built) {
    if (kind == "cpu") return "op statistics: the fused CPU kernel, on the host";
    const std::string api = kind == "hip" ? "HIP" : "CUDA";
    if (statistics_on_device(kind, built))
        return "op statistics: accumulated on the device by the " + api + " statistics kernel, read back once per pass";
    return "op statistics: this build has no " + api + " statistics kernel (" +
           (kind == "hip" ? "built without hipcc for a ROCm LibTorch" : "built without nvcc") +
           "): with inspection on, every op output is copied to the host (one synchronisation per op); "
           "running without inspection avoids it, a build with " +
           (kind == "hip" ? "hipcc" : "the CUDA toolkit") + " keeps them on the device";
}

std::string host_statistics_warning(const std::string& kind, const std::string& built, bool inspect) {
    if (!inspect || statistics_on_device(kind, built)) return {};
    return "per-op statistics on the host: " +
           device_statistics_note(kind, built).substr(std::strlen("op statistics: "));
}

namespace {

/// Name, architecture, bf16 support and library notes of a GPU (CUDA or ROCm/HIP).
void describe_gpu(BackendReport& b, const at::Device& d) {
    b.device = "cuda:" + std::to_string(int(d.index()));
    const auto& hooks = at::detail::getCUDAHooks();
    b.kind = hooks.hasROCM() ? "hip" : "cuda";  // ROCm still calls the device cuda
#ifdef AMPSCOPE_HAVE_CUDA_PROPS
    const auto* prop = at::cuda::getDeviceProperties(d.index());
    b.name = prop->name;
    b.compute_capability = std::to_string(prop->major) + "." + std::to_string(prop->minor);
    b.bf16_supported = b.kind == "hip" || prop->major >= 8;
#else
    b.name = b.kind == "hip" ? "HIP device" : "cuda device";
    b.bf16_supported = hooks.supportsBFloat16ConvolutionWithCuDNNv8() || b.kind == "hip";
#endif
    if (b.kind == "hip") {
        char name[256] = {}, arch[256] = {};
#if defined(AMPSCOPE_HAVE_GPU_STATS) && defined(AMPSCOPE_GPU_STATS_HIP)
        if (gpu::device_info(int(d.index()), name, sizeof name, arch, sizeof arch) != 0) name[0] = arch[0] = '\0';
#endif
        if (arch[0] != '\0') {
            b.name = name;
            b.compute_capability = arch;  // gcnArchName, e.g. gfx90a:sramecc+:xnack-
            b.notes.push_back(std::string("HIP device architecture ") + arch + " (gcnArchName)");
        } else {
            b.notes.push_back(
                "HIP device name and architecture not read: this build has no HIP code (built without hipcc)");
        }
    }
    b.notes.push_back(device_statistics_note(b.kind, device_statistics_platform()));
}

}  // namespace
}  // namespace detail

BackendReport backend_report(const std::string& device) {
    using namespace detail;
    BackendReport b;
    b.torch_version = TORCH_VERSION;
    b.num_threads = at::get_num_threads();
    b.cuda_available = torch::cuda::is_available();
    b.cuda_device_count = b.cuda_available ? int(torch::cuda::device_count()) : 0;
    std::string dev = device.empty() ? (b.cuda_available ? "cuda:0" : "cpu") : device;
    const at::Device d = parse_device(dev);
    if (d.is_cpu()) {
        b.device = "cpu";
        b.kind = "cpu";
        b.name = cpu_name();
        b.bf16_supported = true;
        b.fp16_supported = true;  // CPU autocast float16 exists since torch 2.3
        b.notes.push_back("CPU autocast: fp16 and bf16 run; speed depends on AVX512-FP16/AMX support");
    } else {
        describe_gpu(b, d);
    }
    if (at::detail::getCUDAHooks().hasCUDA() || at::hasCUDA()) {
        const long v = at::detail::getCUDAHooks().versionCUDART();
        if (at::detail::getCUDAHooks().hasROCM())
            b.hip_version = std::to_string(v);
        else
            b.cuda_version = std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
        if (at::detail::getCUDAHooks().hasCuDNN())
            b.cudnn_version = std::to_string(at::detail::getCUDAHooks().versionCuDNN());
    }
    return b;
}

}  // namespace ampscope
