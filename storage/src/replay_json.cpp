// SPDX-License-Identifier: MIT
// The replay JSON (replay --json, the header of a recorded replay run) written from and read
// back into a ReplayResult: one definition for the CLI and the GUI.
#include <cmath>
#include <nlohmann/json.hpp>

#include "ampscope/engine/json_depth.h"
#include "ampscope/engine/errors.h"
#include "ampscope/storage/replay_record.h"
#include "json_map.h"

namespace ampscope::storage {

namespace {

/// NaN/Inf as the strings jmap::num writes in every run JSON (this file builds nlohmann::json,
/// which jmap's ordered_json does not convert to inside initializer lists).
nlohmann::json num(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return v;
}

/// A number num() wrote; 0 where the key is absent.
double num_of(const nlohmann::json& j) {
    return j.is_null() ? 0 : jmap::read_num(j);
}

nlohmann::json stage_json(const ReplayStage& s) {
    return {{"step", s.step}, {"stage", s.stage}, {"side", s.side}, {"module", s.module}, {"op", s.op}, {"autograd_node", s.node}};
}

nlohmann::json step_json(const ReplayStep& st) {
    nlohmann::json params = nlohmann::json::array();
    for (const auto& p : st.params)
        params.push_back({{"name", p.name},
                          {"grad_rel_diff", num(p.grad_rel)},
                          {"update_rel_diff", num(p.update_rel)},
                          {"grad_finite", p.grad_finite},
                          {"weights_finite", p.update_finite},
                          {"sha256_ref", p.sha256_ref},
                          {"sha256_amp", p.sha256_amp}});
    nlohmann::json acts = nlohmann::json::array();
    for (const auto& l : st.activations)
        acts.push_back({{"module", l.module},
                        {"op", l.op},
                        {"ref_absmax", num(l.ref_absmax)},
                        {"amp_absmax", num(l.amp_absmax)},
                        {"ref_rms", num(l.ref_rms)},
                        {"amp_rms", num(l.amp_rms)},
                        {"amp_nonfinite", l.amp_nonfinite},
                        {"amp_fp16_overflow", l.amp_fp16_overflow}});
    return {{"step", st.step},
            {"loss_ref", num(st.loss_ref)},
            {"loss_amp", num(st.loss_amp)},
            {"scale", num(st.scale)},
            {"found_inf", st.found_inf},
            {"skipped", st.skipped},
            {"scale_after", num(st.scale_after)},
            {"growth_tracker", st.growth_tracker},
            {"params", params},
            {"activations", acts}};
}

template <class T>
T value_or(const nlohmann::json& j, const char* key, T fallback) {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? fallback : it->get<T>();
}

ReplayStep step_of(const nlohmann::json& j) {
    ReplayStep st;
    st.step = value_or(j, "step", 0);
    st.loss_ref = num_of(j.value("loss_ref", nlohmann::json()));
    st.loss_amp = num_of(j.value("loss_amp", nlohmann::json()));
    st.scale = num_of(j.value("scale", nlohmann::json()));
    st.found_inf = value_or(j, "found_inf", false);
    st.skipped = value_or(j, "skipped", false);
    st.scale_after = num_of(j.value("scale_after", nlohmann::json()));
    st.growth_tracker = value_or(j, "growth_tracker", -1);
    for (const auto& p : j.value("params", nlohmann::json::array()))
        st.params.push_back({value_or<std::string>(p, "name", ""), num_of(p.value("grad_rel_diff", nlohmann::json())),
                             num_of(p.value("update_rel_diff", nlohmann::json())), value_or(p, "grad_finite", true),
                             value_or(p, "weights_finite", true), value_or<std::string>(p, "sha256_ref", ""),
                             value_or<std::string>(p, "sha256_amp", "")});
    for (const auto& l : j.value("activations", nlohmann::json::array()))
        st.activations.push_back({value_or<std::string>(l, "module", ""), value_or<std::string>(l, "op", ""),
                                  num_of(l.value("ref_absmax", nlohmann::json())), num_of(l.value("amp_absmax", nlohmann::json())),
                                  num_of(l.value("ref_rms", nlohmann::json())), num_of(l.value("amp_rms", nlohmann::json())),
                                  value_or<int64_t>(l, "amp_nonfinite", 0), value_or<int64_t>(l, "amp_fp16_overflow", 0)});
    return st;
}

void spec_of(const nlohmann::json& j, ReplayResult& r) {
    r.spec.model = value_or<std::string>(j, "model", "");
    const auto ck = j.value("checkpoint", nlohmann::json::object());
    r.spec.checkpoint = value_or<std::string>(ck, "path", "");
    r.checkpoint_format = value_or<std::string>(ck, "format", "");
    r.checkpoint_sha256 = value_or<std::string>(ck, "sha256", "");
    const auto b = j.value("batch", nlohmann::json::object());
    r.spec.batch = value_or<std::string>(b, "path", "");
    r.batch_sha256 = value_or<std::string>(b, "sha256", "");
    r.spec.precision = parse_precision(value_or<std::string>(j, "precision", "fp16")).value_or(Precision::Fp16);
    const auto rem = j.value("remedies", nlohmann::json::object());
    r.spec.keep_fp32 = value_or(rem, "keep_fp32", std::vector<std::string>{});
    if (rem.contains("init_scale") && !rem["init_scale"].is_null()) r.spec.init_scale = num_of(rem["init_scale"]);
    if (rem.contains("growth_interval") && !rem["growth_interval"].is_null()) r.spec.growth_interval = rem["growth_interval"].get<int>();
    r.spec.clip_grad_norm = num_of(rem.value("clip_grad_norm", nlohmann::json(0.0)));
    const auto in = j.value("inputs", nlohmann::json::object());  // absent in replays recorded before it
    r.spec.loss = value_or<std::string>(in, "loss", "");
    r.spec.steps = value_or(in, "steps", 1);
    r.spec.optimizer_state = value_or<std::string>(in, "optimizer_state", "");
    r.spec.scaler_state = value_or<std::string>(in, "scaler_state", "");
    r.spec.strip_prefix = value_or<std::string>(in, "strip_prefix", "");
    r.spec.non_strict = value_or(in, "non_strict", false);
    r.spec.output = value_or<std::string>(in, "output", "");
    r.spec.device = value_or<std::string>(in, "device", "");
    r.spec.original_run_id = value_or<std::string>(j, "original_run_id", "");
}

/// What the replay was given besides model, checkpoint and batch (a remedy reruns with them).
nlohmann::json inputs_json(const ReplaySpec& s) {
    return {{"loss", s.loss},
            {"steps", s.steps},
            {"optimizer_state", s.optimizer_state},
            {"scaler_state", s.scaler_state},
            {"strip_prefix", s.strip_prefix},
            {"non_strict", s.non_strict},
            {"output", s.output},
            {"device", s.device}};
}

}  // namespace

std::string replay_to_json(const ReplayResult& r) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& st : r.steps) steps.push_back(step_json(st));
    nlohmann::json keep = r.spec.keep_fp32;
    nlohmann::json j = {{"run_id", r.run_id},
                        {"kind", "replay"},
                        {"started_at", r.started_at},
                        {"finished_at", r.finished_at},
                        {"device", r.device},    // where it ran: "cpu", "cuda:0"
                        {"backend", r.backend},  // "cpu" | "cuda" | "hip" (a ROCm device is called cuda too)
                        {"model", r.spec.model},
                        {"checkpoint", {{"path", r.spec.checkpoint}, {"format", r.checkpoint_format}, {"sha256", r.checkpoint_sha256}}},
                        {"batch", {{"path", r.spec.batch}, {"sha256", r.batch_sha256}}},
                        {"precision", to_string(r.spec.precision)},
                        {"optimizer", r.optimizer},
                        {"scaler_enabled", r.scaler_enabled},
                        {"remedies",
                         {{"keep_fp32", keep},
                          {"init_scale", r.spec.init_scale ? num(*r.spec.init_scale) : nlohmann::json()},
                          {"growth_interval", r.spec.growth_interval ? nlohmann::json(*r.spec.growth_interval) : nlohmann::json()},
                          {"clip_grad_norm", r.spec.clip_grad_norm}}},
                        {"inputs", inputs_json(r.spec)},
                        {"original_run_id", r.spec.original_run_id.empty() ? nlohmann::json() : nlohmann::json(r.spec.original_run_id)},
                        {"keys", {{"missing", r.missing}, {"unexpected", r.unexpected}, {"mismatched", r.mismatched}}},
                        {"first_nonfinite", r.first_nonfinite ? stage_json(*r.first_nonfinite) : nlohmann::json()},
                        {"steps", steps},
                        {"warnings", r.warnings}};
    return j.dump(2);
}

ReplayRecord replay_record_of(const ReplayResult& r) {
    const auto& s = r.spec;
    return {r.run_id,
            s.model,
            s.checkpoint,
            r.checkpoint_sha256,
            s.batch,
            r.batch_sha256,
            r.device,
            "fp32," + to_string(s.precision),
            r.started_at,
            r.finished_at,
            r.first_nonfinite ? "nonfinite" : "finite",
            replay_to_json(r)};
}

ReplayResult replay_from_json(const std::string& text, const std::string& source) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text, json_depth_limit(source, "", "a replay JSON"));
        if (!j.is_object() || j.value("kind", "") != "replay") throw InputError(source, "kind", "a replay JSON (kind 'replay')");
        ReplayResult r;
        r.run_id = value_or<std::string>(j, "run_id", "");
        r.started_at = value_or<std::string>(j, "started_at", "");
        r.finished_at = value_or<std::string>(j, "finished_at", "");
        r.device = value_or<std::string>(j, "device", "");  // device and backend: absent in replays recorded before them
        r.backend = value_or<std::string>(j, "backend", "");
        spec_of(j, r);
        r.optimizer = value_or<std::string>(j, "optimizer", "");
        r.scaler_enabled = value_or(j, "scaler_enabled", true);
        const auto keys = j.value("keys", nlohmann::json::object());
        r.missing = value_or(keys, "missing", std::vector<std::string>{});
        r.unexpected = value_or(keys, "unexpected", std::vector<std::string>{});
        r.mismatched = value_or(keys, "mismatched", std::vector<std::string>{});
        if (auto f = j.find("first_nonfinite"); f != j.end() && f->is_object())
            r.first_nonfinite = ReplayStage{value_or(*f, "step", 0),
                                            value_or<std::string>(*f, "stage", ""),
                                            value_or<std::string>(*f, "side", ""),
                                            value_or<std::string>(*f, "module", ""),
                                            value_or<std::string>(*f, "op", ""),
                                            value_or<std::string>(*f, "autograd_node", "")};
        for (const auto& st : j.value("steps", nlohmann::json::array())) r.steps.push_back(step_of(st));
        r.warnings = value_or(j, "warnings", std::vector<std::string>{});
        return r;
    } catch (const nlohmann::json::exception& e) {
        throw InputError(source, "", std::string("a replay JSON: ") + e.what());
    }
}

}  // namespace ampscope::storage
