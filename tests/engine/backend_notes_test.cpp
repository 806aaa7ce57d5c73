// SPDX-License-Identifier: MIT
// What a build says about itself on a GPU: where op statistics are computed (backend note,
// run warning) and what bench measured (timer, memory). Written for the builds this machine
// cannot run (ROCm, CUDA without nvcc): the texts are decided by plain functions.
#include <gtest/gtest.h>

#include "inspect/gpu/device_notes.h"

using namespace ampscope::detail;

namespace {
bool has(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}
}  // namespace

TEST(DeviceNotes, StatisticsStayOnTheDeviceOnlyWithAKernelForIt) {
    EXPECT_TRUE(statistics_on_device("cpu", ""));
    EXPECT_TRUE(statistics_on_device("cuda", "cuda"));
    EXPECT_TRUE(statistics_on_device("hip", "hip"));
    EXPECT_FALSE(statistics_on_device("cuda", ""));  // CUDA LibTorch, no nvcc
    EXPECT_FALSE(statistics_on_device("hip", ""));   // ROCm LibTorch, no hipcc
    EXPECT_FALSE(statistics_on_device("hip", "cuda"));
}

TEST(DeviceNotes, RunWarnsWhenEveryOpOutputGoesToTheHost) {
    for (const char* kind : {"cuda", "hip"}) {
        SCOPED_TRACE(kind);
        const auto w = host_statistics_warning(kind, "", true);
        EXPECT_TRUE(has(w, "copied to the host")) << w;
        EXPECT_TRUE(has(w, "running without inspection avoids it")) << w;
        EXPECT_TRUE(has(w, std::string(kind) == "hip" ? "HIP" : "CUDA")) << w;
        EXPECT_EQ(host_statistics_warning(kind, "", false), "");  // nothing observed, nothing copied
        EXPECT_EQ(host_statistics_warning(kind, kind, true), "");
    }
    EXPECT_EQ(host_statistics_warning("cpu", "", true), "");
    EXPECT_TRUE(has(host_statistics_warning("hip", "", true), "hipcc"));
    EXPECT_TRUE(has(host_statistics_warning("cuda", "", true), "nvcc"));
}

TEST(DeviceNotes, BackendNoteSaysWhereStatisticsAreComputed) {
    EXPECT_TRUE(has(device_statistics_note("cuda", "cuda"), "on the device by the CUDA statistics kernel"));
    EXPECT_TRUE(has(device_statistics_note("hip", "hip"), "on the device by the HIP statistics kernel"));
    EXPECT_TRUE(has(device_statistics_note("hip", ""), "copied to the host"));
    EXPECT_FALSE(has(device_statistics_note("hip", ""), "on the device by"));
}

TEST(BenchLabels, NameWhatWasMeasured) {
    const auto cuda = bench_labels("cuda", true);
    EXPECT_TRUE(has(cuda.timer, "CUDA events"));
    EXPECT_TRUE(has(cuda.memory, "CUDA caching allocator"));
    // ROCm builds read neither device events nor the allocator: steady clock, host memory.
    const auto hip = bench_labels("hip", false);
    EXPECT_FALSE(has(hip.timer, "CUDA")) << hip.timer;
    EXPECT_FALSE(has(hip.timer, "events around")) << hip.timer;
    EXPECT_TRUE(has(hip.timer, "steady clock")) << hip.timer;
    EXPECT_FALSE(has(hip.memory, "allocator")) << hip.memory;
    EXPECT_TRUE(has(hip.memory, "host")) << hip.memory;
    EXPECT_TRUE(has(hip.memory, "device memory is not measured")) << hip.memory;
    const auto hip_events = bench_labels("hip", true);
    EXPECT_TRUE(has(hip_events.timer, "HIP events"));
    EXPECT_FALSE(has(hip_events.timer, "CUDA"));
    const auto cpu = bench_labels("cpu", false);
    EXPECT_TRUE(has(cpu.timer, "steady clock"));
    EXPECT_TRUE(has(cpu.memory, "VmHWM"));
}
