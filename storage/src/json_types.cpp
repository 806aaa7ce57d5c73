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

}  // namespace ampscope
