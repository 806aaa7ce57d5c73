// SPDX-License-Identifier: MIT
#include "json_map.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ampscope/engine/errors.h"
#include "json_types.h"

namespace ampscope::storage::jmap {

ordered_json num(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return v;
}

double read_num(const json& j) {
    if (!j.is_string()) return j.get<double>();
    const auto s = j.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf" || s == "-inf") return s == "inf" ? INFINITY : -INFINITY;
    throw json::type_error::create(302, "expected a number, found the string \"" + s + "\"", &j);
}

// ---- Criteria -------------------------------------------------------------------------------

ordered_json criteria(const Criteria& c) {
    ordered_json j;
    j["atol"] = c.atol;
    j["rtol"] = c.rtol;
    j["heads"] = ordered_json::array();
    for (const auto& h : c.heads)
        j["heads"].push_back(
            {{"name", h.name}, {"begin", h.begin}, {"end", h.end}, {"atol", h.atol}, {"rtol", h.rtol}});
    j["tie_tolerance"] = c.tie_tolerance;
    j["tie_rule"] = to_string(c.tie_rule);
    j["max_flips"] = c.max_flips;
    j["quality_metric"] = to_string(c.quality_metric);
    j["quality_threshold"] = c.quality_threshold;
    j["allow_nonfinite"] = c.allow_nonfinite;
    j["quality_metric_set"] = c.quality_metric_set;
    j["quality_threshold_set"] = c.quality_threshold_set;
    if (!c.output.empty()) j["output"] = c.output;
    j["max_flip_rate"] = c.max_flip_rate;
    j["max_mean_kld"] = c.max_mean_kld;
    j["min_same_top"] = c.min_same_top;
    if (!c.mask_input.empty()) j["mask_input"] = c.mask_input;
    if (c.sequence_axis >= 0) j["sequence_axis"] = c.sequence_axis;
    if (!c.fixed_at.empty()) j["fixed_at"] = c.fixed_at;
    return j;
}

namespace {

template <class T>
T get(const json& j, const char* key, const std::string& file) {
    try {
        return j.at(key).get<T>();
    } catch (const json::exception&) {
        std::string want = std::is_same_v<T, bool>          ? "true or false"
                           : std::is_same_v<T, std::string> ? "a string"
                           : std::is_integral_v<T>          ? "an integer"
                                                            : "a number";
        throw InputError(file, key, "expected " + want + ", found " + std::string(j.at(key).type_name()));
    }
}

/// A finite number, >= 0 for tolerances. `field` names it in messages.
double get_number(const json& j, const char* key, const std::string& file, const std::string& field, bool nonnegative) {
    const auto& v = j.at(key);
    const std::string want = nonnegative ? "a finite number >= 0" : "a finite number";
    if (!v.is_number()) throw InputError(file, field, "expected " + want + ", found " + std::string(v.type_name()));
    const double x = v.get<double>();
    if (!std::isfinite(x) || (nonnegative && x < 0))
        throw InputError(file, field, "expected " + want + ", found " + v.dump());
    return x;
}

double get_tolerance(const json& j, const char* key, const std::string& file, const std::string& field) {
    return get_number(j, key, file, field, true);
}

/// An integer within [lo, hi]; no silent wrap of values beyond int.
int get_int(const json& j, const char* key, const std::string& file, const std::string& field, int64_t lo, int64_t hi) {
    const auto& v = j.at(key);
    const std::string range = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
    if (!v.is_number_integer()) throw InputError(file, field, "expected " + range + ", found " + v.dump());
    if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(hi) : (v.get<int64_t>() < lo || v.get<int64_t>() > hi))
        throw InputError(file, field, "expected " + range + ", found " + v.dump());
    return int(v.get<int64_t>());
}

std::vector<HeadTolerance> parse_heads(const json& heads, const std::string& file, const Criteria& c) {
    if (!heads.is_array()) throw InputError(file, "heads", "expected an array of {name, begin, end, atol, rtol}");
    std::vector<HeadTolerance> out;
    for (size_t i = 0; i < heads.size(); ++i) {
        const auto& h = heads[i];
        const std::string f = "heads[" + std::to_string(i) + "]";
        if (!h.is_object() || !h.contains("begin") || !h.contains("end"))
            throw InputError(file, f, "expected an object with integer begin and end");
        for (auto it = h.begin(); it != h.end(); ++it)
            if (it.key() != "name" && it.key() != "begin" && it.key() != "end" && it.key() != "atol" &&
                it.key() != "rtol")
                throw InputError(file, f + "." + it.key(), "unknown key; expected name, begin, end, atol, rtol");
        HeadTolerance t;
        if (h.contains("name") && !h["name"].is_string())
            throw InputError(file, f + ".name", "expected a string, found " + std::string(h["name"].type_name()));
        t.name = h.value("name", f);
        constexpr int64_t kMax = std::numeric_limits<int>::max();
        t.begin = get_int(h, "begin", file, f + ".begin", 0, kMax - 1);
        t.end = get_int(h, "end", file, f + ".end", 1, kMax);
        if (t.end <= t.begin)
            throw InputError(file, f + ".end",
                             "expected end > begin (" + std::to_string(t.begin) + "), found " + std::to_string(t.end));
        t.atol = h.contains("atol") ? get_tolerance(h, "atol", file, f + ".atol") : c.atol;
        t.rtol = h.contains("rtol") ? get_tolerance(h, "rtol", file, f + ".rtol") : c.rtol;
        out.push_back(t);
    }
    return out;
}

void check_keys(const json& j, const std::string& file) {
    static const std::vector<std::string> keys = {"atol",
                                                  "rtol",
                                                  "heads",
                                                  "tie_tolerance",
                                                  "tie_rule",
                                                  "max_flips",
                                                  "quality_metric",
                                                  "quality_threshold",
                                                  "allow_nonfinite",
                                                  "fixed_at",
                                                  "quality_metric_set",
                                                  "quality_threshold_set",
                                                  "output",
                                                  "max_flip_rate",
                                                  "max_mean_kld",
                                                  "min_same_top",
                                                  "mask_input",
                                                  "sequence_axis"};
    for (auto it = j.begin(); it != j.end(); ++it)
        if (std::find(keys.begin(), keys.end(), it.key()) == keys.end())
            throw InputError(
                file, it.key(),
                "unknown key; expected one of atol, rtol, heads, tie_tolerance, tie_rule, "
                "max_flips, quality_metric, quality_threshold, allow_nonfinite, output, max_flip_rate, max_mean_kld, "
                "min_same_top, mask_input, sequence_axis");
}

/// The keys of criteria that name an enum value.
void read_choices(const json& j, const std::string& file, Criteria& c) {
    if (j.contains("tie_rule")) {
        auto r = parse_tie_rule(get<std::string>(j, "tie_rule", file));
        if (!r) throw InputError(file, "tie_rule", "expected \"lowest-index\" or \"abstain\"");
        c.tie_rule = *r;
    }
    if (j.contains("quality_metric")) {
        auto m = parse_quality_metric(get<std::string>(j, "quality_metric", file));
        if (!m)
            throw InputError(file, "quality_metric",
                             "expected \"accuracy\", \"mse\", \"max_abs_error\", \"perplexity\" or \"token_accuracy\"");
        c.quality_metric = *m;
        c.quality_metric_set = true;
    }
    // Whether the user chose metric and threshold (stored with the run; a file naming them chose them).
    if (j.contains("quality_metric_set")) c.quality_metric_set = get<bool>(j, "quality_metric_set", file);
    if (j.contains("quality_threshold_set")) c.quality_threshold_set = get<bool>(j, "quality_threshold_set", file);
}

/// The keys of sequence outputs (language models).
void read_sequence(const json& j, const std::string& file, Criteria& c) {
    auto fraction = [&](const char* key, double& out) {
        if (!j.contains(key)) return;
        out = get_number(j, key, file, key, true);
        if (out > 1) throw InputError(file, key, "expected a fraction from 0 to 1, found " + j[key].dump());
    };
    fraction("max_flip_rate", c.max_flip_rate);
    fraction("min_same_top", c.min_same_top);
    if (j.contains("max_mean_kld")) c.max_mean_kld = get_number(j, "max_mean_kld", file, "max_mean_kld", true);
    if (j.contains("mask_input") && !j["mask_input"].is_string())
        throw InputError(file, "mask_input", "expected a string (an input name)");
    if (j.contains("mask_input")) c.mask_input = j["mask_input"].get<std::string>();
    if (j.contains("sequence_axis")) c.sequence_axis = get_int(j, "sequence_axis", file, "sequence_axis", 1, 64);
}

}  // namespace

Criteria read_criteria(const json& j, const std::string& file, Criteria c) {
    if (!j.is_object()) throw InputError(file, "", "expected a JSON object of criteria");
    check_keys(j, file);
    if (j.contains("atol")) c.atol = get_tolerance(j, "atol", file, "atol");
    if (j.contains("rtol")) c.rtol = get_tolerance(j, "rtol", file, "rtol");
    if (j.contains("tie_tolerance")) c.tie_tolerance = get_tolerance(j, "tie_tolerance", file, "tie_tolerance");
    if (j.contains("max_flips"))
        c.max_flips = get_int(j, "max_flips", file, "max_flips", 0, std::numeric_limits<int>::max());
    if (j.contains("quality_threshold")) {
        c.quality_threshold = get_number(j, "quality_threshold", file, "quality_threshold", false);
        c.quality_threshold_set = true;
    }
    if (j.contains("allow_nonfinite")) c.allow_nonfinite = get<bool>(j, "allow_nonfinite", file);
    if (j.contains("fixed_at") && !j["fixed_at"].is_string())
        throw InputError(file, "fixed_at", "expected a string (ISO-8601 time)");
    if (j.contains("fixed_at")) c.fixed_at = j["fixed_at"].get<std::string>();
    if (j.contains("output") && !j["output"].is_string())
        throw InputError(file, "output", "expected a string (an output name or index)");
    if (j.contains("output")) c.output = j["output"].get<std::string>();
    read_choices(j, file, c);
    read_sequence(j, file, c);
    if (j.contains("heads")) c.heads = parse_heads(j["heads"], file, c);
    return c;
}

// ---- Origin, model identity -----------------------------------------------------------------

ordered_json origin(const std::optional<Origin>& o) {
    return o ? ordered_json(*o) : ordered_json(nullptr);
}

std::optional<Origin> read_origin(const json& j) {
    if (j.is_null()) return std::nullopt;
    return j.get<Origin>();
}

ordered_json model_identity(const ModelInfo& m) {
    return {{"source", m.source}, {"sha256", m.sha256}, {"weights_sha256", m.weights_sha256}};
}

ModelInfo read_model_identity(const json& j) {
    ModelInfo m;
    m.source = j.value("source", "");
    m.sha256 = j.value("sha256", "");
    m.weights_sha256 = j.value("weights_sha256", "");
    return m;
}

}  // namespace ampscope::storage::jmap
