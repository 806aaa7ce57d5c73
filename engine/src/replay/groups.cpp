// SPDX-License-Identifier: MIT
// Which model parameter each of the optimizer's indices is. torch.optim's state_dict() numbers
// the parameters over its param groups in order (load_state_dict maps them by position), so the
// i-th index is the model's i-th parameter only for an optimizer built from model.parameters()
// in one group. A Hugging Face Trainer splits them into decay / no-decay groups; Lightning users
// return whatever groups they like. Mapped by the groups' own param_names (an optimizer built
// from named_parameters(), PyTorch >= 2.6), a groups file, the Trainer's rule for a Trainer
// folder, or the model's order for a single group; never guessed.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <regex>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/files.h"
#include "ampscope/engine/json_depth.h"
#include "replay/checkpoint.h"

namespace ampscope::detail::ckpt {
namespace {

using Names = std::vector<std::vector<std::string>>;  // per group, the parameter names in order

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

/// transformers' Trainer.get_decay_parameter_names: no weight decay for parameters inside an
/// nn.LayerNorm or whose lower-cased name matches bias, layernorm, rmsnorm, a `norm` component
/// or `_norm` at a component's end.
bool trainer_decays(const std::string& name, const std::map<std::string, std::string>& types) {
    static const std::regex patterns(R"(bias|layernorm|rmsnorm|(?:^|\.)norm(?:$|\.)|_norm(?:$|\.))");
    if (std::regex_search(lower(name), patterns)) return false;
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
        const auto it = types.find(name.substr(0, dot));
        if (it != types.end() && it->second == "torch.nn.modules.normalization.LayerNorm") return false;
    }
    return true;
}

Names trainer_groups(const std::vector<std::string>& names, const std::map<std::string, std::string>& types) {
    Names g(2);
    for (const auto& n : names) g[trainer_decays(n, types) ? 0 : 1].push_back(n);
    return g;
}

/// --param-groups FILE: [["name", ...], ...] or {"param_groups": [["name", ...] | {"param_names": [...]}, ...]}.
Names read_groups_file(const std::string& path) {
    const std::string expected =
        "a list per param group of parameter names, in the optimizer's order: [[\"fc1.weight\", ...], ...]";
    require_regular_file(path, "param_groups_file", "a JSON file: " + expected);
    nlohmann::json j;
    try {
        std::ifstream in(path);
        j = nlohmann::json::parse(in, json_depth_limit(path, "", expected));
    } catch (const InputError&) {
        throw;
    } catch (const std::exception& e) {
        throw InputError(path, "", std::string("is not valid JSON: ") + e.what());
    }
    if (j.is_object() && j.contains("param_groups")) j = j["param_groups"];
    if (!j.is_array()) throw InputError(path, "", "expected " + expected);
    Names out;
    for (size_t i = 0; i < j.size(); ++i) {
        auto g = j[i].is_object() && j[i].contains("param_names") ? j[i]["param_names"] : j[i];
        const auto field = "[" + std::to_string(i) + "]";
        if (!g.is_array()) throw InputError(path, field, "expected a list of parameter names");
        out.emplace_back();
        for (const auto& n : g) {
            if (!n.is_string()) throw InputError(path, field, "expected parameter names (strings)");
            out.back().push_back(n.get<std::string>());
        }
    }
    return out;
}

/// The model index of each name, group by group; InputError naming `src` for a name the model
/// does not have, a parameter listed twice, or group sizes that differ from the optimizer's.
std::vector<std::vector<int64_t>> indices_of(const Names& groups, const OptimizerState& o,
                                             const std::map<std::string, int64_t>& by_name, const std::string& strip,
                                             const std::string& src, const std::string& what) {
    if (groups.size() != o.groups.size())
        throw InputError(src, "param_groups",
                         what + " " + std::to_string(groups.size()) + " groups; the optimizer state has " +
                             std::to_string(o.groups.size()));
    std::vector<std::vector<int64_t>> out;
    std::map<int64_t, std::string> seen;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
        const auto field = "param_groups[" + std::to_string(gi) + "]";
        if (groups[gi].size() != o.groups[gi].params.size())
            throw InputError(src, field,
                             what + " " + std::to_string(groups[gi].size()) +
                                 " parameters in this group; the optimizer state's group holds " +
                                 std::to_string(o.groups[gi].params.size()));
        out.emplace_back();
        for (auto n : groups[gi]) {
            if (!strip.empty() && n.rfind(strip, 0) == 0) n = n.substr(strip.size());
            const auto it = by_name.find(n);
            if (it == by_name.end())
                throw InputError(src, field, "names '" + n + "', which is not a trainable parameter of the model");
            if (auto [s, fresh] = seen.emplace(it->second, n); !fresh)
                throw InputError(src, field,
                                 "lists parameter '" + n + "' a second time (first as '" + s->second + "')");
            out.back().push_back(it->second);
        }
    }
    return out;
}

void check_sequential(const OptimizerState& o, const std::string& file) {
    int64_t next = 0;
    for (size_t gi = 0; gi < o.groups.size(); ++gi)
        for (const int64_t i : o.groups[gi].params) {
            if (i != next)
                throw InputError(
                    file, "param_groups[" + std::to_string(gi) + "].params",
                    "index " + std::to_string(i) + " where " + std::to_string(next) +
                        " was expected; torch.optim's state_dict() numbers the parameters over the groups in order");
            ++next;
        }
}

/// The moments' shapes against the parameters they were mapped to; false (or InputError when
/// `raise`) on the first that differs.
bool shapes_fit(const OptimizerState& o, const std::vector<std::vector<int64_t>>& map,
                const std::vector<at::Tensor>& params, const std::vector<std::string>& names, const std::string& file,
                bool raise) {
    for (size_t gi = 0; gi < o.groups.size(); ++gi)
        for (size_t j = 0; j < map[gi].size(); ++j) {
            const auto it = o.state.find(o.groups[gi].params[j]);
            if (it == o.state.end()) continue;
            const auto& p = params[size_t(map[gi][j])];
            for (const auto* t :
                 {&it->second.exp_avg, &it->second.exp_avg_sq, &it->second.max_exp_avg_sq, &it->second.momentum_buffer})
                if (t->defined() && t->sizes() != p.sizes()) {
                    if (!raise) return false;
                    throw InputError(file, "state." + std::to_string(it->first),
                                     "has shape " + c10::str(t->sizes()) + "; parameter " + names[size_t(map[gi][j])] +
                                         " is " + c10::str(p.sizes()));
                }
        }
    return true;
}

std::vector<std::vector<int64_t>> choose_map(OptimizerState& o, const std::vector<at::Tensor>& params,
                                             const std::vector<std::string>& names, const MapContext& ctx,
                                             const std::map<std::string, int64_t>& by_name) {
    if (!ctx.groups_file.empty()) {
        o.mapping = "groups-file";
        return indices_of(read_groups_file(ctx.groups_file), o, by_name, "", ctx.groups_file, "the file lists");
    }
    if (!o.groups[0].param_names.empty() || (o.groups.size() > 1 && !o.groups[1].param_names.empty())) {
        Names n;
        for (const auto& g : o.groups) n.push_back(g.param_names);
        o.mapping = "param_names";
        return indices_of(n, o, by_name, ctx.strip_prefix, ctx.file, "param_names list");
    }
    check_sequential(o, ctx.file);
    const size_t held = o.group_order().size();
    if (ctx.format == "hf-trainer" && o.groups.size() == 2) {
        const auto rule = trainer_groups(names, ctx.module_types);
        const bool sizes = rule[0].size() == o.groups[0].params.size() && rule[1].size() == o.groups[1].params.size();
        if (sizes) {
            auto map = indices_of(rule, o, by_name, "", ctx.file, "the Trainer's rule gives");
            if (shapes_fit(o, map, params, names, ctx.file, false)) {
                o.mapping = "trainer-rule";
                return map;
            }
        }
        throw InputError(ctx.file, "param_groups",
                         "are not the Trainer's decay / no-decay groups (the rule puts " +
                             std::to_string(rule[0].size()) + " and " + std::to_string(rule[1].size()) +
                             " parameters in them, the file holds " + std::to_string(o.groups[0].params.size()) +
                             " and " + std::to_string(o.groups[1].params.size()) +
                             ", or the moments' shapes differ): give a param-groups file (a JSON list per group of "
                             "parameter names)",
                         {{"param_groups_file", ""}});
    }
    if (o.groups.size() > 1)
        throw InputError(
            ctx.file, "param_groups",
            "are " + std::to_string(o.groups.size()) +
                " groups without param_names: which parameter each index is cannot be read from the file. Give "
                "a param-groups file (a JSON list per group of the parameter names, in the optimizer's order), or "
                "build "
                "the optimizer from model.named_parameters() (PyTorch >= 2.6 then saves param_names)",
            {{"param_groups_file", ""}});
    if (held != params.size())
        throw InputError(ctx.file, "param_groups",
                         "hold " + std::to_string(held) + " parameters; the model has " +
                             std::to_string(params.size()) +
                             " trainable ones (an optimizer over some of them: give a param-groups file)",
                         {{"param_groups_file", ""}});
    o.mapping = "model-order";
    std::vector<int64_t> all(params.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = int64_t(i);
    return {all};
}

}  // namespace

void map_optimizer(OptimizerState& o, const std::vector<at::Tensor>& params, const std::vector<std::string>& names,
                   const MapContext& ctx, std::vector<std::string>& warnings) {
    std::map<std::string, int64_t> by_name;
    for (size_t i = 0; i < names.size(); ++i) by_name.emplace(names[i], int64_t(i));
    for (const auto& [alias, i] : ctx.aliases) by_name.emplace(alias, i);
    const auto map = choose_map(o, params, names, ctx, by_name);
    shapes_fit(o, map, params, names, ctx.file, true);
    std::map<int64_t, ParamState> state;
    std::vector<bool> held(params.size());
    for (size_t gi = 0; gi < o.groups.size(); ++gi) {
        auto& g = o.groups[gi];
        for (size_t j = 0; j < g.params.size(); ++j) {
            const int64_t m = map[gi][j];
            held[size_t(m)] = true;
            const auto it = o.state.find(g.params[j]);
            if (it == o.state.end()) continue;
            ParamState ps = it->second;
            const auto& p = params[size_t(m)];
            for (auto* t :
                 {&ps.exp_avg, &ps.exp_avg_sq, &ps.max_exp_avg_sq, &ps.momentum_buffer})  // as load_state_dict casts
                if (t->defined() && p.is_floating_point()) *t = t->to(p.scalar_type());
            state[m] = ps;
        }
        g.params = map[gi];
    }
    o.state = std::move(state);
    std::vector<std::string> out;
    for (size_t i = 0; i < held.size(); ++i)
        if (!held[i]) out.push_back(names[i]);
    if (!out.empty()) {
        std::string s;
        for (size_t i = 0; i < out.size() && i < 20; ++i) s += (i ? ", " : "") + out[i];
        warnings.push_back(ctx.file + ": " + std::to_string(out.size()) + " parameters are in no param group (" + s +
                           (out.size() > 20 ? ", ..." : "") +
                           "): the job's optimizer did not step them, nor does the replay");
    }
}

}  // namespace ampscope::detail::ckpt
