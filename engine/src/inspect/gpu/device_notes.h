// SPDX-License-Identifier: MIT
#pragma once
// What a build can and cannot do on a GPU, said in the backend report, the run's warnings
// and bench's labels (no LibTorch, no CUDA or HIP headers: engine tests check the texts).

#include <string>

namespace ampscope::detail {

/// The platform this binary's device statistics kernel was built for: "cuda" (nvcc), "hip"
/// (hipcc, linked with a ROCm LibTorch) or "" (none: op statistics are computed on the host).
const char* device_statistics_platform();

/// Whether per-op statistics of a device of `kind` ("cpu" | "cuda" | "hip") stay on the
/// device, with a kernel built for `built` (device_statistics_platform()).
bool statistics_on_device(const std::string& kind, const std::string& built);

/// The backend note on where op statistics of a `kind` device are computed.
std::string device_statistics_note(const std::string& kind, const std::string& built);

/// The run's warning when inspection on a GPU copies every op output to the host (no kernel
/// for that device in this build); empty when there is nothing to warn about.
std::string host_statistics_warning(const std::string& kind, const std::string& built, bool inspect);

/// How bench times and measures memory on a `kind` device: with the device's events and its
/// caching allocator's statistics (`device_counters`), or with the steady clock and the host
/// process's peak resident set (ROCm builds, which read neither).
struct BenchLabels {
    std::string timer, memory;
};
BenchLabels bench_labels(const std::string& kind, bool device_counters);

}  // namespace ampscope::detail
