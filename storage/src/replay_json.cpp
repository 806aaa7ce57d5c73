// SPDX-License-Identifier: MIT
// The replay JSON (replay --json, the header of a recorded replay run) written from and read
// back into a ReplayResult: one definition for the CLI and the GUI.
#include <cmath>
#include <cstdint>
#include <optional>
#include <nlohmann/json.hpp>

#include "ampscope/engine/train.h"
#include "ampscope/engine/json_depth.h"
#include "ampscope/engine/errors.h"
#include "ampscope/engine/text.h"
#include "ampscope/engine/vocabulary.h"
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

nlohmann::json stage_json(const ReplayStage& s) {
    return {{"step", s.step}, {"stage", to_string(s.stage)}, {"side", to_string(s.side)}, {"module", s.module},
            {"op", s.op},     {"autograd_node", s.node}};
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

/// Reads a replay JSON's fields, each checked for its type: a field of the wrong type is an
/// InputError naming the file and the field's path (absent fields of older replays take their
/// defaults).
class Reader {
public:
    explicit Reader(std::string source) : source_(std::move(source)) {}

    /// The value of `key` (null when absent).
    const nlohmann::json& at(const nlohmann::json& j, const std::string& key) const {
        static const nlohmann::json null;
        const auto it = j.find(key);
        return it == j.end() ? null : *it;
    }
    [[noreturn]] void wrong(const std::string& field, const char* expected, const nlohmann::json& v) const {
        throw InputError(source_, field, std::string("expected ") + expected + ", found " + describe(v));
    }
    std::string str(const nlohmann::json& j, const std::string& path, const char* key) const {
        const auto& v = at(j, key);
        if (v.is_null()) return "";
        if (!v.is_string()) wrong(path + key, "a string", v);
        return v.get<std::string>();
    }
    /// A name of the vocabulary ("" when absent), turned into its value by `parse`.
    template <class Parse>
    auto name(const nlohmann::json& j, const std::string& path, const char* key, Parse parse) const {
        const std::string s = str(j, path, key);
        try {
            return parse(s, path + key);
        } catch (const InputError& e) {
            throw InputError(source_, e.field(), e.expected());
        }
    }
    bool flag(const nlohmann::json& j, const std::string& path, const char* key, bool fallback) const {
        const auto& v = at(j, key);
        if (v.is_null()) return fallback;
        if (!v.is_boolean()) wrong(path + key, "true or false", v);
        return v.get<bool>();
    }
    int64_t integer(const nlohmann::json& j, const std::string& path, const char* key, int64_t fallback) const {
        const auto& v = at(j, key);
        if (v.is_null()) return fallback;
        if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
            wrong(path + key, "an integer", v);
        return v.get<int64_t>();
    }
    int small(const nlohmann::json& j, const std::string& path, const char* key, int fallback) const {
        const auto v = integer(j, path, key, fallback);
        if (v < INT32_MIN || v > INT32_MAX) wrong(path + key, "an integer within 32 bits", at(j, key));
        return int(v);
    }
    /// A number, or "nan", "inf", "-inf" (num()); 0 when absent.
    double number(const nlohmann::json& j, const std::string& path, const char* key) const {
        const auto& v = at(j, key);
        if (v.is_null()) return 0;
        if (v.is_number()) return v.get<double>();
        if (v.is_string() && (v == "nan" || v == "inf" || v == "-inf")) return jmap::read_num(v);
        wrong(path + key, "a number (or \"nan\", \"inf\", \"-inf\")", v);
    }
    std::vector<std::string> strings(const nlohmann::json& j, const std::string& path, const char* key) const {
        std::vector<std::string> out;
        const auto& v = list(j, path, key);
        for (size_t i = 0; i < v.size(); ++i) {
            if (!v[i].is_string()) wrong(path + key + "[" + std::to_string(i) + "]", "a string", v[i]);
            out.push_back(v[i].get<std::string>());
        }
        return out;
    }
    const nlohmann::json& object(const nlohmann::json& j, const std::string& path, const char* key) const {
        static const nlohmann::json empty = nlohmann::json::object();
        const auto& v = at(j, key);
        if (v.is_null()) return empty;
        if (!v.is_object()) wrong(path + key, "an object", v);
        return v;
    }
    const nlohmann::json& list(const nlohmann::json& j, const std::string& path, const char* key) const {
        static const nlohmann::json empty = nlohmann::json::array();
        const auto& v = at(j, key);
        if (v.is_null()) return empty;
        if (!v.is_array()) wrong(path + key, "an array", v);
        return v;
    }
    /// The element `i` of array `a`, which must be an object.
    const nlohmann::json& element(const nlohmann::json& a, size_t i, const std::string& path) const {
        if (!a[i].is_object()) wrong(path + "[" + std::to_string(i) + "]", "an object", a[i]);
        return a[i];
    }

private:
    static std::string describe(const nlohmann::json& v) {
        if (v.is_string()) return "the string \"" + clip_echo(v.get<std::string>(), 40) + "\"";
        if (v.is_number() || v.is_boolean()) return v.dump();
        return v.is_object() ? "an object" : v.is_array() ? "an array" : "null";
    }

public:
    const std::string& source() const { return source_; }

private:
    std::string source_;
};

ReplayStep step_of(const Reader& rd, const nlohmann::json& j, const std::string& at) {
    ReplayStep st;
    st.step = rd.small(j, at, "step", 0);
    st.loss_ref = rd.number(j, at, "loss_ref");
    st.loss_amp = rd.number(j, at, "loss_amp");
    st.scale = rd.number(j, at, "scale");
    st.found_inf = rd.flag(j, at, "found_inf", false);
    st.skipped = rd.flag(j, at, "skipped", false);
    st.scale_after = rd.number(j, at, "scale_after");
    st.growth_tracker = rd.small(j, at, "growth_tracker", -1);
    const auto& params = rd.list(j, at, "params");
    for (size_t i = 0; i < params.size(); ++i) {
        const std::string pa = at + "params[" + std::to_string(i) + "].";
        const auto& p = rd.element(params, i, at + "params");
        st.params.push_back({rd.str(p, pa, "name"), rd.number(p, pa, "grad_rel_diff"),
                             rd.number(p, pa, "update_rel_diff"), rd.flag(p, pa, "grad_finite", true),
                             rd.flag(p, pa, "weights_finite", true), rd.str(p, pa, "sha256_ref"),
                             rd.str(p, pa, "sha256_amp")});
    }
    const auto& acts = rd.list(j, at, "activations");
    for (size_t i = 0; i < acts.size(); ++i) {
        const std::string la = at + "activations[" + std::to_string(i) + "].";
        const auto& l = rd.element(acts, i, at + "activations");
        st.activations.push_back({rd.str(l, la, "module"), rd.str(l, la, "op"), rd.number(l, la, "ref_absmax"),
                                  rd.number(l, la, "amp_absmax"), rd.number(l, la, "ref_rms"),
                                  rd.number(l, la, "amp_rms"), rd.integer(l, la, "amp_nonfinite", 0),
                                  rd.integer(l, la, "amp_fp16_overflow", 0)});
    }
    return st;
}

void spec_of(const Reader& rd, const nlohmann::json& j, ReplayResult& r) {
    r.spec.model = rd.str(j, "", "model");
    const auto& ck = rd.object(j, "", "checkpoint");
    r.spec.checkpoint = rd.str(ck, "checkpoint.", "path");
    r.checkpoint_format = rd.str(ck, "checkpoint.", "format");
    r.checkpoint_sha256 = rd.str(ck, "checkpoint.", "sha256");
    const auto& b = rd.object(j, "", "batch");
    r.spec.batch = rd.str(b, "batch.", "path");
    r.batch_sha256 = rd.str(b, "batch.", "sha256");
    const auto precision = rd.str(j, "", "precision");
    const auto p = parse_precision(precision.empty() ? "fp16" : precision);
    if (!p || !replays(*p))  // an FP32 reference and an AMP side, in what `replay` runs
        rd.wrong("precision", precisions_listed(kReplayPrecisions).c_str(), rd.at(j, "precision"));
    r.spec.precision = *p;
    const auto& rem = rd.object(j, "", "remedies");
    r.spec.keep_fp32 = rd.strings(rem, "remedies.", "keep_fp32");
    r.spec.keep_bf16 = rd.strings(rem, "remedies.", "keep_bf16");  // absent in replays recorded before it
    if (!rd.at(rem, "init_scale").is_null()) r.spec.init_scale = rd.number(rem, "remedies.", "init_scale");
    if (!rd.at(rem, "growth_interval").is_null()) {
        const auto g = rd.integer(rem, "remedies.", "growth_interval", 0);
        if (g < 1 || g > INT32_MAX)
            rd.wrong("remedies.growth_interval", "an integer from 1", rd.at(rem, "growth_interval"));
        r.spec.growth_interval = int(g);
    }
    r.spec.clip_grad_norm = rd.number(rem, "remedies.", "clip_grad_norm");
    const auto& in = rd.object(j, "", "inputs");  // absent in replays recorded before it
    r.spec.loss = rd.name(in, "inputs.", "loss", parse_loss_kind);
    r.spec.steps = rd.small(in, "inputs.", "steps", 1);
    r.spec.optimizer_state = rd.str(in, "inputs.", "optimizer_state");
    r.spec.scaler_state = rd.str(in, "inputs.", "scaler_state");
    r.spec.strip_prefix = rd.str(in, "inputs.", "strip_prefix");
    r.spec.non_strict = rd.flag(in, "inputs.", "non_strict", false);
    r.spec.output = rd.str(in, "inputs.", "output");
    r.spec.device = rd.str(in, "inputs.", "device");
    if (!rd.str(in, "inputs.", "optimizer").empty())  // "": the state's own kind
        r.spec.optimizer_kind = rd.name(in, "inputs.", "optimizer", parse_optimizer_kind);
    r.spec.param_groups = rd.str(in, "inputs.", "param_groups");
    r.spec.no_scaler = rd.flag(in, "inputs.", "no_scaler", false);
    r.spec.clip_given = rd.flag(in, "inputs.", "clip_given", false);
    r.spec.fp8_all_gemms = rd.flag(in, "inputs.", "fp8_all_gemms", false);  // absent: replays recorded before it
    r.spec.rowwise_gw_hp = rd.flag(in, "inputs.", "rowwise_gw_hp", false);
    if (!rd.str(in, "inputs.", "mx_scaling").empty())  // absent: replays recorded before it, FLOOR scales
        r.spec.mx_scaling = rd.name(in, "inputs.", "mx_scaling", parse_mx_scaling);
    else
        r.spec.mx_scaling = MxScaling::Floor;
    if (const auto& inc = rd.object(in, "inputs.", "incident"); !inc.empty()) {
        const std::string at = "inputs.incident.";
        r.spec.incident = ReplayIncident{rd.str(inc, at, "bundle"),
                                         rd.str(inc, at, "what"),
                                         rd.str(inc, at, "detail"),
                                         rd.str(inc, at, "framework"),
                                         rd.integer(inc, at, "step", 0),
                                         rd.integer(inc, at, "rank", 0),
                                         rd.integer(inc, at, "world_size", 1),
                                         {},
                                         rd.integer(inc, at, "accumulation_steps", 1)};
        const auto& origins = rd.list(inc, at, "origin_ranks");
        for (size_t i = 0; i < origins.size(); ++i) {
            if (!origins[i].is_number_integer())
                rd.wrong(at + "origin_ranks[" + std::to_string(i) + "]", "an integer", origins[i]);
            r.spec.incident->origin_ranks.push_back(origins[i].get<int64_t>());
        }
    }
    r.spec.original_run_id = rd.str(j, "", "original_run_id");
}

/// What the replay was given besides model, checkpoint and batch (a remedy reruns with them).
nlohmann::json inputs_json(const ReplaySpec& s) {
    return {{"loss", to_string(s.loss)},
            {"steps", s.steps},
            {"optimizer_state", s.optimizer_state},
            {"scaler_state", s.scaler_state},
            {"strip_prefix", s.strip_prefix},
            {"non_strict", s.non_strict},
            {"output", s.output},
            {"device", s.device},
            {"optimizer", s.optimizer_kind ? to_string(*s.optimizer_kind) : ""},
            {"param_groups", s.param_groups},
            {"no_scaler", s.no_scaler},
            {"clip_given", s.clip_given},
            {"mx_scaling", to_string(s.mx_scaling)},
            {"fp8_all_gemms", s.fp8_all_gemms},
            {"rowwise_gw_hp", s.rowwise_gw_hp},
            {"incident", s.incident ? nlohmann::json{{"bundle", s.incident->bundle},
                                                     {"what", s.incident->what},
                                                     {"detail", s.incident->detail},
                                                     {"framework", s.incident->framework},
                                                     {"step", s.incident->step},
                                                     {"rank", s.incident->rank},
                                                     {"world_size", s.incident->world_size},
                                                     {"origin_ranks", s.incident->origin_ranks},
                                                     {"accumulation_steps", s.incident->accumulation_steps}}
                                    : nlohmann::json()}};
}

/// The optimizer as the replay read it: kind, how that was told, how its indices met the
/// model's parameters, and every group's hyper-parameters and flags (a misread state shows).
nlohmann::json optimizer_json(const ReplayOptimizer& o) {
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& g : o.groups)
        groups.push_back({{"params", g.params},
                          {"lr", num(g.lr)},
                          {"weight_decay", num(g.weight_decay)},
                          {"eps", num(g.eps)},
                          {"betas", {num(g.beta1), num(g.beta2)}},
                          {"momentum", num(g.momentum)},
                          {"dampening", num(g.dampening)},
                          {"amsgrad", g.amsgrad},
                          {"maximize", g.maximize},
                          {"nesterov", g.nesterov},
                          {"fused", g.fused},
                          {"foreach", g.foreach},
                          {"capturable", g.capturable},
                          {"implementation", g.implementation}});
    return {{"kind", o.kind}, {"kind_source", o.kind_source}, {"mapping", o.mapping}, {"groups", groups}};
}

}  // namespace

std::string replay_to_json(const ReplayResult& r) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& st : r.steps) steps.push_back(step_json(st));
    nlohmann::json keep = r.spec.keep_fp32;
    nlohmann::json j = {
        {"run_id", r.run_id},
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
        {"optimizer_detail", optimizer_json(r.optimizer_groups)},
        {"rng", r.rng},
        {"remedies",
         {{"keep_fp32", keep},
          {"keep_bf16", r.spec.keep_bf16},
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

namespace {

std::optional<ReplayStage> stage_of(const Reader& rd, const nlohmann::json& j) {
    const auto& f = rd.at(j, "first_nonfinite");
    if (f.is_null()) return std::nullopt;
    if (!f.is_object()) rd.wrong("first_nonfinite", "an object (or null: none)", f);
    const std::string at = "first_nonfinite.";
    return ReplayStage{rd.small(f, at, "step", 0),
                       rd.name(f, at, "stage", parse_replay_stage),
                       rd.name(f, at, "side", parse_replay_side),
                       rd.str(f, at, "module"),
                       rd.str(f, at, "op"),
                       rd.str(f, at, "autograd_node")};
}

/// What replay records: every step asked for (inputs.steps; absent in replays recorded before
/// it), in order from 0, and the first non-finite stage at one of them.
void check_steps(const Reader& rd, const nlohmann::json& j, const ReplayResult& r) {
    const auto& steps = rd.list(j, "", "steps");
    for (size_t i = 0; i < r.steps.size(); ++i)
        if (r.steps[i].step != int64_t(i))
            rd.wrong("steps[" + std::to_string(i) + "].step",
                     ("step " + std::to_string(i) + " (a replay records its steps in order from 0)").c_str(),
                     rd.at(steps[i], "step"));
    const auto& in = rd.object(j, "", "inputs");
    const bool asked = !rd.at(in, "steps").is_null();
    if (asked && r.spec.steps < 1) rd.wrong("inputs.steps", "an integer from 1", rd.at(in, "steps"));
    if (asked && r.steps.size() != size_t(r.spec.steps))
        rd.wrong("steps",
                 (std::to_string(r.spec.steps) + " steps, as inputs.steps says (it has " +
                  std::to_string(r.steps.size()) + ")")
                     .c_str(),
                 steps);
    const int64_t ran = asked ? r.spec.steps : std::max<int64_t>(int64_t(r.steps.size()), 1);
    if (r.first_nonfinite && (r.first_nonfinite->step < 0 || r.first_nonfinite->step >= ran))
        rd.wrong("first_nonfinite.step", ("a step the replay ran: 0 to " + std::to_string(ran - 1)).c_str(),
                 rd.at(rd.at(j, "first_nonfinite"), "step"));
}

ReplayResult replay_of(const Reader& rd, const nlohmann::json& j) {
    if (!j.is_object() || j.value("kind", "") != "replay")
        throw InputError(rd.source(), "kind", "a replay JSON (kind 'replay')");
    ReplayResult r;
    r.run_id = rd.str(j, "", "run_id");
    if (r.run_id.empty()) rd.wrong("run_id", "the replay's run id (a string)", rd.at(j, "run_id"));
    r.started_at = rd.str(j, "", "started_at");
    r.finished_at = rd.str(j, "", "finished_at");
    r.device = rd.str(j, "", "device");  // device and backend: absent in replays recorded before them
    r.backend = rd.str(j, "", "backend");
    spec_of(rd, j, r);
    // a string (the kind), or an object naming it in "kind" (groups and flags beside it)
    r.optimizer = rd.at(j, "optimizer").is_object() ? rd.str(rd.at(j, "optimizer"), "optimizer.", "kind")
                                                    : rd.str(j, "", "optimizer");
    r.scaler_enabled = rd.flag(j, "", "scaler_enabled", true);
    const auto& od = rd.object(j, "", "optimizer_detail");  // absent in replays recorded before it
    r.optimizer_groups.kind = rd.str(od, "optimizer_detail.", "kind");
    r.optimizer_groups.kind_source = rd.str(od, "optimizer_detail.", "kind_source");
    r.optimizer_groups.mapping = rd.str(od, "optimizer_detail.", "mapping");
    const auto& groups = rd.list(od, "optimizer_detail.", "groups");
    for (size_t i = 0; i < groups.size(); ++i) {
        const auto at = "optimizer_detail.groups[" + std::to_string(i) + "].";
        const auto& g = rd.element(groups, i, "optimizer_detail.groups");
        ReplayOptimizerGroup x;
        x.params = rd.strings(g, at, "params");
        x.lr = rd.number(g, at, "lr");
        x.weight_decay = rd.number(g, at, "weight_decay");
        x.eps = rd.number(g, at, "eps");
        x.momentum = rd.number(g, at, "momentum");
        x.dampening = rd.number(g, at, "dampening");
        for (auto [k, f] : {std::pair{"amsgrad", &x.amsgrad},
                            {"maximize", &x.maximize},
                            {"nesterov", &x.nesterov},
                            {"fused", &x.fused},
                            {"foreach", &x.foreach},
                            {"capturable", &x.capturable}})
            *f = rd.flag(g, at, k, false);
        x.implementation = rd.str(g, at, "implementation");
        r.optimizer_groups.groups.push_back(std::move(x));
    }
    r.rng = rd.str(j, "", "rng");
    const auto& keys = rd.object(j, "", "keys");
    r.missing = rd.strings(keys, "keys.", "missing");
    r.unexpected = rd.strings(keys, "keys.", "unexpected");
    r.mismatched = rd.strings(keys, "keys.", "mismatched");
    r.first_nonfinite = stage_of(rd, j);
    const auto& steps = rd.list(j, "", "steps");
    for (size_t i = 0; i < steps.size(); ++i)
        r.steps.push_back(step_of(rd, rd.element(steps, i, "steps"), "steps[" + std::to_string(i) + "]."));
    r.warnings = rd.strings(j, "", "warnings");
    check_steps(rd, j, r);
    return r;
}

}  // namespace

ReplayResult replay_from_json(const std::string& text, const std::string& source) {
    try {
        return replay_of(Reader(source), nlohmann::json::parse(text, json_depth_limit(source, "", "a replay JSON")));
    } catch (const nlohmann::json::exception& e) {
        throw InputError(source, "", std::string("a replay JSON: ") + e.what());
    }
}

}  // namespace ampscope::storage
