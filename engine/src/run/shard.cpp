// SPDX-License-Identifier: MIT
// A rank's shard of a distributed run: its batches, its probes, its pass as bytes (CBOR through
// nlohmann), and rank 0's merge of the shards (the observer's own merge rules across batches).
#include "run/shard.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/fp8.h"
#include "precision/fp8_pass.h"

namespace ampscope::detail {

using nlohmann::json;

ShardRange shard_range(int64_t samples, int64_t batch, int rank, int world) {
    const int64_t b = std::max<int64_t>(batch, 1);
    const int64_t batches = (samples + b - 1) / b;
    // Earlier ranks take the larger shares (1 batch for 2 ranks: rank 0 runs it).
    const int64_t first_batch = (batches * rank + world - 1) / world;
    const int64_t end_batch = (batches * (rank + 1) + world - 1) / world;
    ShardRange r;
    r.first = std::min(samples, first_batch * b);
    r.count = std::min(samples, end_batch * b) - r.first;
    return r;
}

ProbeSet shard_probes(const ProbeSet& all, const ShardRange& r) {
    ProbeSet s;
    s.info = all.info;
    for (const auto& t : all.inputs) s.inputs.push_back(t.slice(0, r.first, r.first + r.count));
    s.samples.assign(all.samples.begin() + r.first, all.samples.begin() + r.first + r.count);
    const int64_t lw = std::max(all.label_width, 1);
    if (!all.labels.empty())
        s.labels.assign(all.labels.begin() + r.first * lw, all.labels.begin() + (r.first + r.count) * lw);
    s.label_width = all.label_width;
    const int64_t tw = std::max(all.target_width, 1);
    if (!all.targets.empty())
        s.targets.assign(all.targets.begin() + r.first * tw, all.targets.begin() + (r.first + r.count) * tw);
    s.target_width = all.target_width;
    return s;
}

namespace {

json stats_json(const TensorStats& s) {
    return json::array({s.count, s.nan, s.posinf, s.neginf, s.zeros, s.min, s.max, s.absmax, s.min_nonzero_abs, s.mean,
                        s.rms, s.fp16_overflow, s.fp16_subnormal, s.fp16_underflow, s.bf16_overflow, s.bf16_subnormal,
                        s.bf16_underflow});
}

TensorStats stats_from(const json& j) {
    TensorStats s;
    size_t i = 0;
    for (int64_t* v : {&s.count, &s.nan, &s.posinf, &s.neginf, &s.zeros}) *v = j.at(i++).get<int64_t>();
    for (double* v : {&s.min, &s.max, &s.absmax, &s.min_nonzero_abs, &s.mean, &s.rms}) *v = j.at(i++).get<double>();
    for (int64_t* v : {&s.fp16_overflow, &s.fp16_subnormal, &s.fp16_underflow, &s.bf16_overflow, &s.bf16_subnormal,
                       &s.bf16_underflow})
        *v = j.at(i++).get<int64_t>();
    return s;
}

json quant_json(const QuantStats& q) {
    return json::array({int(q.scheme), int(q.element), q.numel, q.nonfinite, q.nonzero, q.underflow, q.subnormal,
                        q.saturated, q.nonfinite_out, q.amax, q.scales, q.scale_min, q.scale_max, q.tensor_scale,
                        q.sqnr_db, q.signal, q.noise});
}

QuantStats quant_from(const json& j) {
    QuantStats q;
    q.scheme = Fp8Scheme(j.at(0).get<int>());
    q.element = Fp8Element(j.at(1).get<int>());
    size_t i = 2;
    for (int64_t* v : {&q.numel, &q.nonfinite, &q.nonzero, &q.underflow, &q.subnormal, &q.saturated, &q.nonfinite_out})
        *v = j.at(i++).get<int64_t>();
    q.amax = j.at(i++).get<double>();
    q.scales = j.at(i++).get<int64_t>();
    for (double* v : {&q.scale_min, &q.scale_max, &q.tensor_scale, &q.sqnr_db, &q.signal, &q.noise})
        *v = j.at(i++).get<double>();
    return q;
}

json layer_json(const LayerStat& l) {
    return {{"i", l.index},          {"m", l.module}, {"op", l.op},       {"dt", l.dtype}, {"sh", l.shape},
            {"if", l.inputs_finite}, {"o", l.origin}, {"ac", l.autocast}, {"fl", l.flops}, {"st", stats_json(l.stats)}};
}

LayerStat layer_from(const json& j) {
    LayerStat l;
    l.index = j.at("i").get<int>();
    l.module = j.at("m").get<std::string>();
    l.op = j.at("op").get<std::string>();
    l.dtype = j.at("dt").get<std::string>();
    l.shape = j.at("sh").get<std::vector<int64_t>>();
    l.inputs_finite = j.at("if").get<bool>();
    l.origin = j.at("o").get<bool>();
    l.autocast = j.at("ac").get<bool>();
    l.flops = j.at("fl").get<double>();
    l.stats = stats_from(j.at("st"));
    return l;
}

json origin_json(const Origin& o) {
    return {{"stage", o.stage}, {"m", o.module}, {"op", o.op}, {"i", o.index}, {"s", o.samples}, {"gf", o.grad_fn}};
}

Origin origin_from(const json& j) {
    return Origin{j.at("stage").get<std::string>(),
                  j.at("m").get<std::string>(),
                  j.at("op").get<std::string>(),
                  j.at("i").get<int>(),
                  j.at("s").get<std::vector<std::string>>(),
                  j.at("gf").get<std::string>()};
}

json pass_json(const PassResult& p) {
    json j = {{"k", p.num_outputs}, {"shape", p.output_shape}, {"nf", p.nonfinite_samples}, {"sec", p.seconds}};
    const auto* bytes = reinterpret_cast<const uint8_t*>(p.outputs.data());
    j["out"] = json::binary(std::vector<uint8_t>(bytes, bytes + p.outputs.size() * sizeof(float)));
    if (p.origin) j["origin"] = origin_json(*p.origin);
    j["layers"] = json::array();
    for (const auto& l : p.layers) j["layers"].push_back(layer_json(l));
    j["fp8"] = json::array();
    for (const auto& o : p.fp8_operands) j["fp8"].push_back({o.module, o.op, o.operand, quant_json(o.stats)});
    return j;
}

PassResult pass_from(const json& j) {
    PassResult p;
    p.num_outputs = j.at("k").get<int>();
    p.output_shape = j.at("shape").get<std::vector<int64_t>>();
    p.nonfinite_samples = j.at("nf").get<std::vector<std::string>>();
    p.seconds = j.at("sec").get<double>();
    const auto& out = j.at("out").get_binary();
    if (out.size() % sizeof(float) != 0) throw std::runtime_error("scores are not whole float32 values");
    p.outputs.resize(out.size() / sizeof(float));
    std::copy(out.begin(), out.end(), reinterpret_cast<uint8_t*>(p.outputs.data()));
    if (j.contains("origin")) p.origin = origin_from(j.at("origin"));
    for (const auto& l : j.at("layers")) p.layers.push_back(layer_from(l));
    for (const auto& o : j.at("fp8"))
        p.fp8_operands.push_back(
            {o.at(0).get<std::string>(), o.at(1).get<std::string>(), o.at(2).get<std::string>(), quant_from(o.at(3))});
    return p;
}

}  // namespace

std::string encode_shard(const ShardPass& s) {
    const json j = {{"mutated", s.inputs_mutated}, {"changed", s.state_changed}, {"pass", pass_json(s.pass)}};
    const auto bytes = json::to_cbor(j);
    return std::string(bytes.begin(), bytes.end());
}

ShardPass decode_shard(const std::string& bytes, int from) {
    try {
        const json j = json::from_cbor(bytes);
        ShardPass s;
        s.inputs_mutated = j.at("mutated").get<bool>();
        s.state_changed = j.at("changed").get<std::vector<std::string>>();
        s.pass = pass_from(j.at("pass"));
        return s;
    } catch (const std::exception& e) {
        throw BackendError("rank " + std::to_string(from) +
                           " sent a pass that does not decode (is it the same ampscope version?): " + e.what());
    }
}

namespace {

void merge_layers(std::vector<LayerStat>& into, std::vector<LayerStat>&& from) {
    for (auto& l : from) {
        if (size_t(l.index) >= into.size()) {  // the observer appends an index first seen in a later batch
            into.push_back(std::move(l));
            continue;
        }
        auto& m = into[size_t(l.index)];
        m.stats.merge(l.stats);
        m.inputs_finite = m.inputs_finite && l.inputs_finite;
        m.origin = m.origin || l.origin;
        m.flops += l.flops;
    }
}

void merge_fp8(std::vector<Fp8Operand>& into, std::vector<Fp8Operand>&& from) {
    for (auto& o : from) merge_operand(into, std::move(o));
}

/// The earliest origin of the shards, with the samples of every shard whose origin is that op.
std::optional<Origin> merge_origin(const std::vector<PassResult>& parts) {
    std::optional<Origin> first;
    for (const auto& p : parts) {
        if (!p.origin || p.origin->stage != "forward") continue;
        if (!first || p.origin->index < first->index)
            first = p.origin;
        else if (p.origin->index == first->index)
            first->samples.insert(first->samples.end(), p.origin->samples.begin(), p.origin->samples.end());
    }
    return first;
}

}  // namespace

PassResult merge_shards(std::vector<PassResult> parts) {
    PassResult r;
    for (const auto& p : parts) {
        if (p.num_outputs == 0) continue;  // a rank with no samples
        if (r.num_outputs == 0) {
            r.num_outputs = p.num_outputs;
            r.output_shape = p.output_shape;
        } else if (p.num_outputs != r.num_outputs) {
            throw ModelError("the model's output has " + std::to_string(p.num_outputs) +
                             " scores per sample on one rank but " + std::to_string(r.num_outputs) +
                             " on another; its size per sample must not depend on the batch");
        }
    }
    r.origin = merge_origin(parts);
    for (auto& p : parts) {
        r.outputs.insert(r.outputs.end(), p.outputs.begin(), p.outputs.end());
        r.nonfinite_samples.insert(r.nonfinite_samples.end(), p.nonfinite_samples.begin(), p.nonfinite_samples.end());
        merge_layers(r.layers, std::move(p.layers));
        merge_fp8(r.fp8_operands, std::move(p.fp8_operands));
        r.seconds = std::max(r.seconds, p.seconds);
    }
    if (r.origin && size_t(r.origin->index) < r.layers.size()) {  // named as the merged layers name that op
        r.origin->module = r.layers[size_t(r.origin->index)].module;
        r.origin->op = r.layers[size_t(r.origin->index)].op;
    }
    return r;
}

}  // namespace ampscope::detail
