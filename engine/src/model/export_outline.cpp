// SPDX-License-Identifier: MIT
// What a torch.export archive holds beside its graph: the zip's kind (export, AOTInductor,
// TorchScript), the program's module paths and the names of its user outputs (pytree leaves).
#include <caffe2/serialize/inline_container.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ampscope/engine/errors.h"
#include "model/export_json.h"
#include "model/export_program.h"
#include "torchsave/pt_archive.h"

namespace ampscope::detail::pt2 {
namespace {

using nlohmann::json;

/// Leaf names of a pytree spec ("[1, {type, context, children_spec}]"), joined with '.'.
void tree_leaves(const json& spec, const std::string& prefix, std::vector<std::string>& out) {
    const auto& children = spec.value("children_spec", json::array());
    if (spec.value("type", json()).is_null() || children.empty()) {
        out.push_back(prefix.empty() ? "0" : prefix);
        return;
    }
    json keys;
    if (spec.value("type", std::string()) == "builtins.dict") {
        try {
            keys = json::parse(spec.value("context", std::string("[]")));
        } catch (...) {
            keys = json::array();
        }
    }
    for (size_t i = 0; i < children.size(); ++i) {
        std::string k = keys.is_array() && i < keys.size()
                            ? (keys[i].is_string() ? keys[i].get<std::string>() : keys[i].dump())
                            : std::to_string(i);
        tree_leaves(children[i], prefix.empty() ? k : prefix + "." + k, out);
    }
}

}  // namespace

ZipKind sniff_zip(const std::vector<char>& bytes, const std::string& file) {
    std::shared_ptr<caffe2::serialize::PyTorchStreamReader> zip;
    try {
        zip = open_checked_zip(bytes, file);
    } catch (const InputError&) {
        throw;
    } catch (const std::exception&) {
        return ZipKind::NotZip;
    }
    bool ts = false;
    for (const auto& r : zip->getAllRecords()) {
        if (r.rfind("data/aotinductor/", 0) == 0 || r.find(".wrapper.so") != std::string::npos)
            return ZipKind::AotInductor;
        if (r.rfind("models/", 0) == 0 && r.size() > 12 && r.substr(r.size() - 5) == ".json") return ZipKind::Export;
        if (r == "constants.pkl" || r.rfind("code/", 0) == 0) ts = true;
    }
    return ts ? ZipKind::TorchScript : ZipKind::Other;
}

/// Module paths: root "" first, then the module call graph's, then any a node names.
void collect_modules(const json& gm, Program& p) {
    std::set<std::string> seen{""};
    p.modules.push_back("");
    for (const auto& c : gm.value("module_call_graph", json::array()))
        if (seen.insert(c.value("fqn", std::string())).second) p.modules.push_back(c["fqn"]);
    for (const auto& g : p.graphs)
        for (const auto& nd : g.nodes)
            for (size_t i = 0; i < nd.module_chain.size(); ++i) {
                if (seen.insert(nd.module_chain[i]).second) p.modules.push_back(nd.module_chain[i]);
                p.module_types.emplace(nd.module_chain[i], nd.chain_types[i]);
            }
}

/// Names of the user outputs from the root call's out_spec; "0", "1", … where it does not fit.
void collect_output_names(const json& gm, const std::string& file, const std::string& model_json, Program& p) {
    const auto& mcg = gm.value("module_call_graph", json::array());
    std::vector<std::string> leaves;
    if (!mcg.empty() && mcg[0].contains("signature") && !mcg[0]["signature"].is_null()) {
        const std::string text = mcg[0]["signature"].value("out_spec", std::string("[1, {}]"));
        const auto spec = parse_json(text.data(), text.size(), file, model_json + " out_spec");
        if (spec.is_array() && spec.size() == 2) tree_leaves(spec[1], "", leaves);
    }
    int users = 0;
    for (const auto& o : p.outputs) users += o.kind == OutputSpec::Kind::User;
    if (int(leaves.size()) != users) {
        leaves.clear();
        for (int i = 0; i < users; ++i) leaves.push_back(std::to_string(i));
    }
    p.output_names = leaves;
}

}  // namespace ampscope::detail::pt2
