// SPDX-License-Identifier: MIT
// The CUDA statistics kernel against the CPU kernel and ATen on salted tensors. Compiled in
// every CUDA-enabled build; runs where a GPU is present (tools/gpu-check.sh), skips elsewhere.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <torch/cuda.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>

#include "inspect/observer.h"
#include "run/pass.h"
#include "stats_gpu.h"

using namespace ampscope;

TEST(GpuStats, MatchesTheCpuKernel) {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    for (auto dt : {at::kFloat, at::kHalf, at::kBFloat16}) {
        auto t = at::randn({4, 100003}) * 100;
        const float inf = std::numeric_limits<float>::infinity();
        t[0][5] = std::nanf("");
        t[1][7] = inf;
        t[3][9] = -inf;
        t[2][11] = 1e-7f;
        t[2][13] = 3e-9f;
        t = t.to(dt);
        std::vector<int64_t> rows_cpu;
        const auto want = ampscope::detail::tensor_stats(t, &rows_cpu);
        auto d = t.cuda();
        auto slot = at::empty({int64_t(sizeof(gpu::DeviceStats))}, at::TensorOptions().dtype(at::kByte));
        const auto init = gpu::empty_stats();
        std::memcpy(slot.data_ptr(), &init, sizeof init);
        auto dslot = slot.cuda();
        auto drows = at::zeros({4}, at::TensorOptions().dtype(at::kLong).device(at::kCUDA));
        const auto kind = dt == at::kFloat  ? gpu::DType::Float32
                          : dt == at::kHalf ? gpu::DType::Float16
                                            : gpu::DType::BFloat16;
        ASSERT_EQ(0,
                  gpu::launch_stats(d.data_ptr(), kind, d.numel(), 4, static_cast<gpu::DeviceStats*>(dslot.data_ptr()),
                                    reinterpret_cast<unsigned long long*>(drows.data_ptr()),
                                    at::cuda::getCurrentCUDAStream().stream()));
        auto back = dslot.cpu();  // the one read-back
        gpu::DeviceStats got;
        std::memcpy(&got, back.data_ptr(), sizeof got);
        EXPECT_EQ(int64_t(got.count), want.count);
        EXPECT_EQ(int64_t(got.nan), want.nan);
        EXPECT_EQ(int64_t(got.posinf), want.posinf);
        EXPECT_EQ(int64_t(got.neginf), want.neginf);
        EXPECT_EQ(int64_t(got.zeros), want.zeros);
        EXPECT_EQ(int64_t(got.h_over), want.fp16_overflow);
        EXPECT_EQ(int64_t(got.h_sub), want.fp16_subnormal);
        EXPECT_EQ(int64_t(got.h_under), want.fp16_underflow);
        EXPECT_EQ(int64_t(got.b_sub), want.bf16_subnormal);
        float amax;
        std::memcpy(&amax, &got.amax_bits, 4);
        EXPECT_EQ(double(amax), want.absmax);
        const int64_t finite = want.count - want.nonfinite();
        EXPECT_NEAR(got.sum / double(finite), want.mean, 1e-6 * want.rms);
        auto rows = drows.cpu();
        for (int r = 0; r < 4; ++r) EXPECT_EQ(rows[r].item<int64_t>(), rows_cpu[size_t(r)]);
    }
}

TEST(GpuStats, ObserverOnTheDeviceEqualsHostCopies) {
    // The same FP16 pass on the GPU, statistics kept on the device and read back once, and
    // statistics of each op output copied to the host: same layers, same origin.
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    using namespace ampscope::detail;
    auto model = load_model("demo:transformer", 0);
    auto probes = load_probes("demo", *model, 0);
    model->to_device(at::Device(at::kCUDA));
    PassOptions o;
    o.precision = Precision::Fp16;
    o.inspect = true;
    o.batch_size = 16;  // several batches: slots per batch, one read-back per pass
    set_device_statistics(true);
    const auto dev = run_pass(*model, probes, at::Device(at::kCUDA), o, nullptr, false);
    set_device_statistics(false);
    const auto host = run_pass(*model, probes, at::Device(at::kCUDA), o, nullptr, false);
    set_device_statistics(true);
    ASSERT_EQ(dev.layers.size(), host.layers.size());
    ASSERT_FALSE(dev.layers.empty());
    for (size_t i = 0; i < dev.layers.size(); ++i) {
        const auto &a = dev.layers[i], &b = host.layers[i];
        SCOPED_TRACE(b.module + " " + b.op);
        EXPECT_EQ(a.op, b.op);
        EXPECT_EQ(a.module, b.module);
        EXPECT_EQ(a.stats.count, b.stats.count);
        EXPECT_EQ(a.stats.nonfinite(), b.stats.nonfinite());
        EXPECT_EQ(a.stats.zeros, b.stats.zeros);
        EXPECT_EQ(a.stats.fp16_overflow, b.stats.fp16_overflow);
        EXPECT_EQ(a.stats.fp16_subnormal, b.stats.fp16_subnormal);
        EXPECT_EQ(a.stats.absmax, b.stats.absmax);
        EXPECT_EQ(a.stats.min, b.stats.min);
        EXPECT_EQ(a.stats.max, b.stats.max);
        EXPECT_NEAR(a.stats.rms, b.stats.rms, 1e-5 * b.stats.rms + 1e-30);
        EXPECT_EQ(a.origin, b.origin);
        EXPECT_EQ(a.inputs_finite, b.inputs_finite);
    }
    ASSERT_EQ(dev.origin.has_value(), host.origin.has_value());
    if (host.origin) {
        EXPECT_EQ(dev.origin->module, host.origin->module);
        EXPECT_EQ(dev.origin->op, host.origin->op);
        EXPECT_EQ(dev.origin->samples, host.origin->samples);
    }
}

TEST(GpuStats, DeviceInfoNamesTheDevice) {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    char name[256], arch[64];
    ASSERT_EQ(0, gpu::device_info(0, name, sizeof name, arch, sizeof arch));
    const auto* prop = at::cuda::getDeviceProperties(0);
    EXPECT_STREQ(name, prop->name);
    EXPECT_EQ(std::string(arch), "sm_" + std::to_string(prop->major) + std::to_string(prop->minor));
}

TEST(GpuStats, KernelBandwidthAgainstADeviceCopy) {
    // The kernel reads each value once: its bandwidth against a device-to-device copy (which
    // reads and writes each value). Printed for tools/gpu-check.sh; fails below a tenth.
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    auto x = at::randn({64 << 20}, at::TensorOptions().device(at::kCUDA));  // 256 MiB
    auto y = at::empty_like(x);
    auto slot = at::zeros({int64_t(sizeof(gpu::DeviceStats))}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA));
    auto stream = at::cuda::getCurrentCUDAStream();
    auto run_kernel = [&] {
        ASSERT_EQ(0, gpu::launch_stats(x.data_ptr(), gpu::DType::Float32, x.numel(), 0,
                                       static_cast<gpu::DeviceStats*>(slot.data_ptr()), nullptr, stream.stream()));
    };
    auto time_ms = [&](const std::function<void()>& f) {
        f();
        at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
        start.record(stream);
        for (int i = 0; i < 10; ++i) f();
        stop.record(stream);
        stop.synchronize();
        return double(start.elapsed_time(stop)) / 10;
    };
    const double bytes = double(x.numel()) * 4;
    const double kernel = bytes / time_ms(run_kernel) / 1e6, copy = 2 * bytes / time_ms([&] { y.copy_(x); }) / 1e6;
    std::printf("[ bandwidth ] statistics kernel %.0f GB/s, device copy %.0f GB/s (%.0f%%)\n", kernel, copy,
                100 * kernel / copy);
    EXPECT_GT(kernel, 0.1 * copy);
}
