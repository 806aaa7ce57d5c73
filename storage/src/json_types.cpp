// SPDX-License-Identifier: MIT
#include "json_types.h"

#include "ampscope/engine/errors.h"
#include "ampscope/engine/train.h"

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
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

void to_json(ordered_json& j, const ProbeInfo& p) {
    ordered_json tags = ordered_json::object();
    for (const auto& [k, v] : p.tags) tags[k] = v;
    j = {{"source", p.source},
         {"sha256", p.sha256},
         {"count", p.count},
         {"tags", tags},
         {"input_shapes", p.input_shapes},
         {"has_labels", p.has_labels},
         {"has_targets", p.has_targets}};
    if (p.label_width > 0) j["label_width"] = p.label_width;  // token labels [N, T]
}

void from_json(const json& j, ProbeInfo& p) {
    p.source = j.at("source");
    p.sha256 = j.at("sha256");
    p.count = j.at("count");
    p.tags = j.at("tags").get<std::map<std::string, int>>();
    p.input_shapes = j.at("input_shapes").get<std::vector<std::vector<int64_t>>>();
    p.has_labels = j.at("has_labels");
    p.has_targets = j.at("has_targets");
    p.label_width = j.value("label_width", 0);
}

void to_json(ordered_json& j, const TrainSpec& s) {
    j = {{"model", s.model},
         {"data", s.data},
         {"steps", s.steps},
         {"batch_size", s.batch_size},
         {"loss", to_string(s.loss)},
         {"optimizer", to_string(s.optimizer)},
         {"lr", s.lr},
         {"momentum", s.momentum},
         {"weight_decay", s.weight_decay},
         {"precision", to_string(s.precision)},
         {"autocast", s.autocast},
         {"scaler", ordered_json(s.scaler)},
         {"clip_grad_norm", s.clip_grad_norm},
         {"accumulate", s.accumulate},
         {"lr_schedule", to_string(s.lr_schedule)},
         {"lr_per_iteration", s.lr_per_iteration},
         {"checkpoint_every", s.checkpoint_every},
         {"checkpoint_dir", s.checkpoint_dir},
         {"resume", s.resume},
         {"keep_fp32", s.keep_fp32},
         {"seed", s.seed},
         {"device", s.device},
         {"guards", s.guards}};
    if (s.precision == Precision::Fp8Delayed) {  // the recipe's settings, as a run's spec holds them
        j["fp8_delayed"] = {{"amax_history", s.fp8_amax_history}, {"margin", s.fp8_margin}};
        if (s.fp8_weight_cache) j["fp8_delayed"]["weight_cache"] = true;  // absent: each micro-batch casts
    }
    if (!s.keep_bf16.empty()) j["keep_bf16"] = s.keep_bf16;  // FP8 recipes: modules kept out of FP8
    if (s.precision == Precision::Mxfp8) j["mx_scaling"] = to_string(s.mx_scaling);
    if (s.fp8_all_gemms) j["fp8_all_gemms"] = true;  // the model's own products quantized too (absent: linears)
    if (s.rowwise_gw_hp) j["rowwise_gw_hp"] = true;  // torchao's rowwise_with_gw_hp (absent: rowwise)
}

void from_json(const json& j, TrainSpec& s) {
    s.model = j.at("model");
    s.data = j.at("data");
    s.steps = j.at("steps");
    s.batch_size = j.at("batch_size");
    s.loss = parse_loss_kind(j.at("loss").get<std::string>(), "spec.loss");
    s.optimizer = parse_optimizer_kind(j.at("optimizer").get<std::string>(), "spec.optimizer");
    s.lr = j.at("lr");
    s.momentum = j.at("momentum");
    s.weight_decay = j.at("weight_decay");
    s.precision = storage::jtypes::training_precision(j.at("precision"), "spec.precision");
    s.autocast = j.at("autocast");
    s.scaler = j.at("scaler").get<ScalerOptions>();
    s.clip_grad_norm = j.at("clip_grad_norm");
    s.accumulate = j.at("accumulate");
    s.lr_schedule = parse_lr_schedule(j.at("lr_schedule").get<std::string>(), "spec.lr_schedule");
    s.lr_per_iteration = j.at("lr_per_iteration");
    s.checkpoint_every = j.at("checkpoint_every");
    s.checkpoint_dir = j.at("checkpoint_dir");
    s.resume = j.at("resume");
    s.keep_fp32 = j.at("keep_fp32").get<std::vector<std::string>>();
    s.seed = j.at("seed");
    s.device = j.at("device");
    s.guards = j.at("guards");
    if (const auto d = j.find("fp8_delayed"); d != j.end()) {
        std::tie(s.fp8_amax_history, s.fp8_margin) = storage::jtypes::fp8_delayed_settings(*d);
        if (const auto c = d->find("weight_cache"); c != d->end()) {
            if (!c->is_boolean())
                throw InputError("", "spec.fp8_delayed.weight_cache", "'" + c->dump() + "'; expected true or false");
            s.fp8_weight_cache = c->get<bool>();
        }
    }
    s.keep_bf16 = j.value("keep_bf16", std::vector<std::string>());  // trainings recorded before it: none
    // mxfp8 trainings recorded before the setting ran with FLOOR scales
    s.mx_scaling = parse_mx_scaling(j.value("mx_scaling", std::string("floor")), "spec.mx_scaling");
    if (const auto a = j.find("fp8_all_gemms"); a != j.end()) {
        if (!a->is_boolean()) throw InputError("", "spec.fp8_all_gemms", "'" + a->dump() + "'; expected true or false");
        s.fp8_all_gemms = a->get<bool>();
    }
    if (const auto a = j.find("rowwise_gw_hp"); a != j.end()) {
        if (!a->is_boolean()) throw InputError("", "spec.rowwise_gw_hp", "'" + a->dump() + "'; expected true or false");
        s.rowwise_gw_hp = a->get<bool>();
    }
}

void to_json(ordered_json& j, const Origin& o) {
    j = ordered_json::object();
    if (!o.grad_fn.empty()) j["grad_fn"] = o.grad_fn;
    j["index"] = o.index;
    j["module"] = o.module;
    j["op"] = o.op;
    j["samples"] = o.samples;
    j["stage"] = o.stage;
}

void from_json(const json& j, Origin& o) {
    o.stage = j.at("stage");
    o.module = j.at("module");
    o.op = j.at("op");
    o.index = j.at("index");
    o.samples = j.at("samples").get<std::vector<std::string>>();
    o.grad_fn = j.value("grad_fn", std::string());
}

namespace storage::jtypes {

Precision training_precision(const json& v, const char* field) {
    const auto p = parse_precision(v.get<std::string>());
    if (!p || !trains(*p))
        throw json::type_error::create(302,
                                       "precision \"" + v.get<std::string>() + "\" in " + field + "; a training runs " +
                                           training_precisions_listed(),
                                       &v);
    return *p;
}

std::pair<int, int> fp8_delayed_settings(const json& d) {
    auto setting = [&](const char* key, int64_t lo, int64_t hi) {
        const json& v = d.at(key);
        const std::string field = std::string("spec.fp8_delayed.") + key;
        if (!v.is_number_integer())
            throw InputError(
                "", field,
                "'" + v.dump() + "'; expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
        // lo >= 0: an unsigned value (as large as 2^64 - 1) compares as unsigned
        const bool ok = v.is_number_unsigned() ? v.get<uint64_t>() >= uint64_t(lo) && v.get<uint64_t>() <= uint64_t(hi)
                                               : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
        if (!ok)
            throw InputError("", field,
                             "'" + v.dump() + "'; expected " + std::to_string(lo) + " to " + std::to_string(hi));
        return int(v.get<int64_t>());
    };
    return {setting("amax_history", 1, kMaxAmaxHistory), setting("margin", 0, kMaxFp8Margin)};
}

}  // namespace storage::jtypes

}  // namespace ampscope
