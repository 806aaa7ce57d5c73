// SPDX-License-Identifier: MIT
#include "json_types.h"

#include <string>
#include <vector>

namespace ampscope {

using nlohmann::json;
using nlohmann::ordered_json;

void to_json(ordered_json& j, const ModelInfo& m) {
    j = {{"source", m.source},   {"kind", m.kind},
         {"sha256", m.sha256},   {"weights_sha256", m.weights_sha256},
         {"mode", m.mode},       {"parameters", m.parameters},
         {"modules", m.modules}, {"format", m.format}};
}

void from_json(const json& j, ModelInfo& m) {
    m.source = j.at("source");
    m.kind = j.at("kind");
    m.sha256 = j.at("sha256");
    m.weights_sha256 = j.at("weights_sha256");
    m.mode = j.at("mode");
    m.parameters = j.at("parameters");
    m.modules = j.at("modules").get<std::vector<std::string>>();
    m.format = j.value("format", "");
}

void to_json(ordered_json& j, const ScalerOptions& s) {
    j = {{"enabled", s.enabled},
         {"init_scale", s.init_scale},
         {"growth_factor", s.growth_factor},
         {"backoff_factor", s.backoff_factor},
         {"growth_interval", s.growth_interval}};
}

void from_json(const json& j, ScalerOptions& s) {
    const ScalerOptions d;
    s.enabled = j.value("enabled", d.enabled);
    s.init_scale = j.value("init_scale", d.init_scale);
    s.growth_factor = j.value("growth_factor", d.growth_factor);
    s.backoff_factor = j.value("backoff_factor", d.backoff_factor);
    s.growth_interval = j.value("growth_interval", d.growth_interval);
}

void to_json(ordered_json& j, const BackendReport& b) {
    j = {{"device", b.device},
         {"kind", b.kind},
         {"torch", b.torch_version},
         {"name", b.name},
         {"cuda", b.cuda_version},
         {"cudnn", b.cudnn_version},
         {"hip", b.hip_version},
         {"compute_capability", b.compute_capability},
         {"cuda_available", b.cuda_available},
         {"cuda_device_count", b.cuda_device_count},
         {"bf16_supported", b.bf16_supported},
         {"fp16_supported", b.fp16_supported},
         {"num_threads", b.num_threads},
         {"notes", b.notes}};
}

namespace {
/// The value of `key`, else of the key a run header stored it under before (schema v1 to v6).
template <class T>
void read_key(const json& j, const char* key, const char* before, T& out) {
    out = j.at(j.contains(key) || !j.contains(before) ? key : before).get<T>();
}
}  // namespace

void from_json(const json& j, BackendReport& b) {
    b.device = j.at("device");
    b.kind = j.at("kind");
    b.torch_version = j.at("torch");
    b.name = j.at("name");
    b.cuda_version = j.at("cuda");
    b.cudnn_version = j.at("cudnn");
    b.hip_version = j.at("hip");
    read_key(j, "compute_capability", "cc", b.compute_capability);
    b.cuda_available = j.at("cuda_available");
    read_key(j, "cuda_device_count", "cuda_devices", b.cuda_device_count);
    read_key(j, "bf16_supported", "bf16", b.bf16_supported);
    read_key(j, "fp16_supported", "fp16", b.fp16_supported);
    read_key(j, "num_threads", "threads", b.num_threads);
    b.notes = j.at("notes").get<std::vector<std::string>>();
}

}  // namespace ampscope
