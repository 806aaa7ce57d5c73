// SPDX-License-Identifier: MIT
// Reads a torch.export.save archive (.pt2) into a Program: the serialized ExportedProgram JSON
// (schema 8.x) parsed with nlohmann-json, every ATen op resolved against this LibTorch's
// dispatcher, weights and constants read from their raw-bytes records with every size checked.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ScalarOps.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>

#include "ampscope/engine/errors.h"
#include "model/export_program.h"
#include "probes/pt_archive.h"

namespace ampscope::detail::pt2 {
namespace {

using nlohmann::json;

/// The serialized dtype codes (torch/_export/serde/schema.py ScalarType), not c10's numbers.
std::optional<at::ScalarType> dtype_of_code(int64_t code) {
    switch (code) {
        case 1: return at::kByte;
        case 2: return at::kChar;
        case 3: return at::kShort;
        case 4: return at::kInt;
        case 5: return at::kLong;
        case 6: return at::kHalf;
        case 7: return at::kFloat;
        case 8: return at::kDouble;
        case 9: return at::kComplexHalf;
        case 10: return at::kComplexFloat;
        case 11: return at::kComplexDouble;
        case 12: return at::kBool;
        case 13: return at::kBFloat16;
        case 28: return at::kUInt16;
        case 29: return at::kFloat8_e4m3fn;
        case 30: return at::kFloat8_e5m2;
        case 31: return at::kFloat8_e4m3fnuz;
        case 32: return at::kFloat8_e5m2fnuz;
        default: return std::nullopt;
    }
}

struct Reader {
    const std::string& file;
    Program& p;

    [[noreturn]] void fail(const std::string& field, const std::string& what) const { throw InputError(file, field, what); }

    at::ScalarType dtype(const json& code, const std::string& where) const {
        const auto d = code.is_number_integer() ? dtype_of_code(code.get<int64_t>()) : std::nullopt;
        if (!d) fail(where, "dtype code " + code.dump() + " is unknown to this build (torch 2.11 serialization codes expected)");
        return *d;
    }

    c10::IValue memory_format(int64_t v, const std::string& where) const {
        switch (v) {
            case 1: return int64_t(c10::MemoryFormat::Contiguous);
            case 2: return int64_t(c10::MemoryFormat::ChannelsLast);
            case 3: return int64_t(c10::MemoryFormat::ChannelsLast3d);
            case 4: return int64_t(c10::MemoryFormat::Preserve);
            default: fail(where, "memory format code " + std::to_string(v) + " is unknown to this build");
        }
    }

    c10::IValue layout(int64_t v, const std::string& where) const {
        if (v == 7) return int64_t(c10::kStrided);
        fail(where, "layout code " + std::to_string(v) + " is not a strided layout; only dense tensors are supported");
    }

    static std::string value_name(const json& j) {
        if (j.contains("as_name")) return j["as_name"].get<std::string>();
        return j.value("name", std::string());
    }

    /// One serialized argument (a single-key object) to an Arg.
    Arg arg(const json& a, const c10::Argument* schema, const std::string& where) {
        if (!a.is_object() || a.size() != 1) fail(where, "an argument that is not a single-key object");
        const auto first_ = a.begin();
        const std::string kind = first_.key();
        const json& v = first_.value();
        Arg r;
        if (kind == "as_none") return r;
        if (kind == "as_tensor") { r.kind = Arg::Kind::Tensor; r.name = v.at("name"); return r; }
        if (kind == "as_optional_tensor") {
            if (v.contains("as_tensor")) { r.kind = Arg::Kind::Tensor; r.name = v["as_tensor"].at("name"); }
            return r;
        }
        if (kind == "as_tensors" || kind == "as_optional_tensors") {
            r.kind = kind == "as_tensors" ? Arg::Kind::Tensors : Arg::Kind::OptionalTensors;
            for (const auto& t : v) r.names.push_back(t.contains("as_tensor") ? t["as_tensor"].at("name").get<std::string>()
                                                                                : t.value("name", std::string()));
            return r;
        }
        if (kind == "as_int") {
            const bool want_float = schema && schema->type()->kind() == c10::TypeKind::FloatType;
            r.constant = want_float ? c10::IValue(double(v.get<int64_t>())) : c10::IValue(v.get<int64_t>());
            return r;
        }
        if (kind == "as_float") { r.constant = v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>(); return r; }
        if (kind == "as_bool") { r.constant = v.get<bool>(); return r; }
        if (kind == "as_string") { r.constant = v.get<std::string>(); return r; }
        if (kind == "as_ints") { r.constant = v.get<std::vector<int64_t>>(); return r; }
        if (kind == "as_floats") { r.constant = v.get<std::vector<double>>(); return r; }
        if (kind == "as_bools") {
            c10::List<bool> l;
            for (const auto& b : v) l.push_back(b.get<bool>());
            r.constant = l;
            return r;
        }
        if (kind == "as_strings") { r.constant = v.get<std::vector<std::string>>(); return r; }
        if (kind == "as_scalar_type") { r.constant = int64_t(dtype(v, where)); return r; }
        if (kind == "as_memory_format") { r.constant = memory_format(v.get<int64_t>(), where); return r; }
        if (kind == "as_layout") { r.constant = layout(v.get<int64_t>(), where); return r; }
        if (kind == "as_device") { r.kind = Arg::Kind::Device; return r; }
        if (kind == "as_sym_int" || kind == "as_sym_bool" || kind == "as_sym_float") {
            if (v.contains("as_name")) { r.kind = Arg::Kind::SymInt; r.name = v["as_name"]; return r; }
            if (v.contains("as_int")) r.constant = v["as_int"].get<int64_t>();
            else if (v.contains("as_bool")) r.constant = v["as_bool"].get<bool>();
            else if (v.contains("as_float")) r.constant = v["as_float"].get<double>();
            return r;
        }
        if (kind == "as_sym_ints") {
            r.kind = Arg::Kind::SymInts;
            for (const auto& e : v) {
                r.names.push_back(e.contains("as_name") ? e["as_name"].get<std::string>() : "");
                r.literals.push_back(e.contains("as_int") ? e["as_int"].get<int64_t>() : 0);
            }
            return r;
        }
        if (kind == "as_graph") {
            r.kind = Arg::Kind::Graph;
            r.graph = int(p.graphs.size());
            p.graphs.emplace_back();
            Graph g = graph(v.at("graph"), where + " subgraph " + v.value("name", std::string()));
            p.graphs[size_t(r.graph)] = std::move(g);
            return r;
        }
        fail(where, "argument kind '" + kind + "' is not supported by ampscope's interpreter");
    }

    std::vector<Out> outs(const json& list) const {
        std::vector<Out> r;
        for (const auto& o : list) {
            Out out;
            if (o.contains("as_tensor")) { out.kind = Out::Kind::Tensor; out.name = o["as_tensor"].at("name"); }
            else if (o.contains("as_tensors")) {
                out.kind = Out::Kind::Tensors;
                for (const auto& t : o["as_tensors"]) out.names.push_back(t.at("name"));
            } else if (o.contains("as_sym_int") || o.contains("as_sym_bool") || o.contains("as_sym_float")) {
                out.kind = Out::Kind::SymInt;
                const auto& s = o.contains("as_sym_int") ? o["as_sym_int"] : o.contains("as_sym_bool") ? o["as_sym_bool"] : o["as_sym_float"];
                out.name = value_name(s);
            }
            r.push_back(std::move(out));
        }
        return r;
    }

    /// nn_module_stack: "key,path,type;key,path,type" (outermost first).
    static void module_stack(const json& meta, Node& n) {
        if (!meta.is_object() || !meta.contains("nn_module_stack")) return;
        const std::string s = meta["nn_module_stack"].get<std::string>();
        size_t b = 0;
        while (b <= s.size()) {
            size_t e = s.find(';', b);
            if (e == std::string::npos) e = s.size();
            const std::string entry = s.substr(b, e - b);
            const auto c1 = entry.find(','), c2 = entry.rfind(',');
            if (c1 != std::string::npos && c2 > c1) n.module_chain.push_back(entry.substr(c1 + 1, c2 - c1 - 1));
            b = e + 1;
        }
        if (!n.module_chain.empty()) n.module = n.module_chain.back();
    }

    void op_node(const json& jn, Node& n, const std::string& where) {
        // torch.ops.NS.OP.OVERLOAD
        const std::string t = n.target.substr(10);
        const auto d1 = t.find('.'), d2 = t.rfind('.');
        if (d1 == std::string::npos || d2 == d1) fail(where, "target '" + n.target + "' is not an operator name");
        const std::string ns = t.substr(0, d1), op = t.substr(d1 + 1, d2 - d1 - 1), ov = t.substr(d2 + 1);
        auto h = c10::Dispatcher::singleton().findSchema({ns + "::" + op, ov == "default" ? "" : ov});
        if (!h)
            fail(where, "operator " + ns + "::" + op + "." + ov + " is not registered in this LibTorch" +
                            (ns == "aten" || ns == "prims" ? std::string(" (a newer PyTorch wrote it?)")
                                                           : "; it is a custom op: its library must be loaded into ampscope (it cannot run without it)"));
        n.op = *h;
        const auto& schema = h->schema();
        std::map<std::string, const json*> given;
        size_t positional = 0;
        std::vector<const json*> by_position;
        for (const auto& in : jn.at("inputs")) {
            const std::string name = in.value("name", std::string());
            if (!name.empty()) given[name] = &in.at("arg");
            else by_position.push_back(&in.at("arg"));
        }
        for (size_t i = 0; i < schema.arguments().size(); ++i) {
            const auto& sa = schema.arguments()[i];
            const json* a = nullptr;
            if (auto it = given.find(sa.name()); it != given.end()) a = it->second;
            else if (positional < by_position.size()) a = by_position[positional++];
            if (!a) {
                if (!sa.default_value()) fail(where, "argument '" + sa.name() + "' of " + schema.name() + " is missing");
                n.args.emplace_back(std::nullopt);
                continue;
            }
            n.args.emplace_back(arg(*a, &sa, where + " argument '" + sa.name() + "'"));
            auto& made = *n.args.back();
            // a number where the schema takes a Tensor (x.add_(1)): a wrapped number, as Python passes it
            if (made.kind == Arg::Kind::Constant && sa.type()->kind() == c10::TypeKind::TensorType &&
                (made.constant.isInt() || made.constant.isDouble() || made.constant.isBool())) {
                auto t = made.constant.isInt() ? at::scalar_to_tensor(made.constant.toInt())
                         : made.constant.isDouble() ? at::scalar_to_tensor(made.constant.toDouble())
                                                    : at::scalar_to_tensor(made.constant.toBool());
                t.unsafeGetTensorImpl()->set_wrapped_number(true);
                made.constant = t;
            }
            if ((sa.name() == "training" || sa.name() == "train") && sa.type()->kind() == c10::TypeKind::BoolType &&
                n.args.back()->kind == Arg::Kind::Constant)
                n.train_flag = int(i);
        }
    }

    Node node(const json& jn) {
        Node n;
        n.target = jn.at("target").get<std::string>();
        n.name = jn.value("name", std::string());
        const std::string where = "node '" + n.name + "' (" + n.target + ")";
        module_stack(jn.value("metadata", json::object()), n);
        n.outputs = outs(jn.at("outputs"));
        if (n.target == "torch.ops.higher_order.wrap_with_autocast" || n.target == "torch.ops.higher_order.wrap_with_set_grad_enabled") {
            n.kind = n.target.find("autocast") != std::string::npos ? Node::Kind::Autocast : Node::Kind::GradEnabled;
            for (const auto& in : jn.at("inputs")) n.args.emplace_back(arg(in.at("arg"), nullptr, where));
        } else if (n.target.rfind("torch.ops.higher_order.", 0) == 0) {
            fail(where, "higher-order op '" + n.target.substr(23) + "' is not supported (ampscope runs wrap_with_autocast and "
                        "wrap_with_set_grad_enabled; export without data-dependent control flow such as torch.cond / while_loop)");
        } else if (n.target.rfind("torch.ops.", 0) == 0) {
            op_node(jn, n, where);
        } else if (n.target.rfind("_operator.", 0) == 0 || n.target.rfind("torch.sym_", 0) == 0 || n.target.rfind("math.", 0) == 0) {
            n.kind = Node::Kind::SymOp;
            for (const auto& in : jn.at("inputs")) n.args.emplace_back(arg(in.at("arg"), nullptr, where));
        } else {
            fail(where, "target '" + n.target + "' is not an operator this interpreter knows");
        }
        return n;
    }

    Graph graph(const json& jg, const std::string& where) {
        Graph g;
        for (const auto& in : jg.at("inputs")) {
            const auto first_ = in.begin();
        const std::string kind = first_.key();
        const json& v = first_.value();
            if (kind != "as_tensor" && kind != "as_sym_int")
                fail(where + " inputs", "graph input of kind '" + kind + "' is not supported (tensor inputs expected)");
            g.inputs.push_back(kind == "as_tensor" ? v.at("name").get<std::string>() : value_name(v));
        }
        g.outputs = outs(jg.at("outputs"));
        for (const auto& jn : jg.at("nodes")) g.nodes.push_back(node(jn));
        return g;
    }

    /// Bytes of a tensor described by tensor_meta, read from its record, with every size checked.
    at::Tensor tensor(caffe2::serialize::PyTorchStreamReader& zip, const std::string& record, const json& meta, const std::string& fqn) {
        const auto st = dtype(meta.at("dtype"), fqn);
        std::vector<int64_t> sizes, strides;
        for (const auto& s : meta.at("sizes")) {
            if (!s.contains("as_int")) fail(fqn, "a weight with a symbolic size");
            sizes.push_back(s["as_int"].get<int64_t>());
        }
        for (const auto& s : meta.at("strides")) strides.push_back(s.at("as_int").get<int64_t>());
        const int64_t offset = meta.contains("storage_offset") ? meta["storage_offset"].value("as_int", int64_t(0)) : 0;
        if (sizes.size() != strides.size() || offset < 0) fail(fqn, "tensor_meta with inconsistent sizes/strides/offset");
        if (!zip.hasRecord(record)) fail(record, "weight record missing from the archive (for '" + fqn + "')");
        const size_t bytes = zip.getRecordSize(record);
        const size_t elem = c10::elementSize(st);
        // the highest element the view reaches, overflow-safe
        __int128 last = offset;
        bool empty = false;
        for (size_t i = 0; i < sizes.size(); ++i) {
            if (sizes[i] < 0 || strides[i] < 0) fail(fqn, "negative size or stride");
            if (sizes[i] == 0) empty = true;
            last += __int128(sizes[i] - 1) * strides[i];
        }
        if (!empty && (last + 1) * __int128(elem) > __int128(bytes))
            fail(fqn, "tensor_meta " + c10::str(at::IntArrayRef(sizes)) + " needs more bytes than record " + record + " holds (" +
                          std::to_string(bytes) + ")");
        auto base = at::empty({int64_t(bytes / elem)}, at::TensorOptions().dtype(st));
        if (bytes / elem) {  // straight into the tensor's storage (one copy)
            if (bytes == size_t(base.nbytes())) zip.getRecord(record, base.data_ptr(), bytes);
            else {  // a record that is not a whole number of elements: read all, keep the elements
                auto [ptr, n] = zip.getRecord(record);
                std::memcpy(base.data_ptr(), ptr.get(), std::min(n, size_t(base.nbytes())));
            }
        }
        return empty ? at::empty(sizes, base.options()) : base.as_strided(sizes, strides, offset).detach();
    }

    void tensors(caffe2::serialize::PyTorchStreamReader& zip, const std::string& config, const std::string& dir,
                 std::map<std::string, at::Tensor>& out) {
        if (!zip.hasRecord(config)) return;
        auto [ptr, n] = zip.getRecord(config);
        json j;
        try {
            j = json::parse(static_cast<const char*>(ptr.get()), static_cast<const char*>(ptr.get()) + n);
        } catch (const std::exception& e) {
            fail(config, std::string("malformed JSON: ") + e.what());
        }
        for (auto it = j.at("config").begin(); it != j.at("config").end(); ++it) {
            const std::string fqn = it.key();
            const json& c = it.value();
            if (c.value("use_pickle", false))
                fail(fqn, "a pickled (tensor-subclass) weight; ampscope reads plain tensors only (export without tensor subclasses)");
            out[fqn] = tensor(zip, dir + c.at("path_name").get<std::string>(), c.at("tensor_meta"), fqn);
        }
    }

    void signature(const json& sig, const json& root) {
        for (const auto& s : sig.at("input_specs")) {
            const auto first_ = s.begin();
        const std::string kind = first_.key();
        const json& v = first_.value();
            InputSpec in;
            if (kind == "parameter") { in.kind = InputSpec::Kind::Parameter; in.arg = v.at("arg").at("name"); in.target = v.at("parameter_name"); }
            else if (kind == "buffer") { in.kind = InputSpec::Kind::Buffer; in.arg = v.at("arg").at("name"); in.target = v.at("buffer_name"); }
            else if (kind == "tensor_constant") { in.kind = InputSpec::Kind::Constant; in.arg = v.at("arg").at("name"); in.target = v.at("tensor_constant_name"); }
            else if (kind == "user_input") {
                if (!v.at("arg").contains("as_tensor"))
                    fail("signature", "a non-tensor user input (" + v.at("arg").dump() + "); ampscope feeds tensors only");
                in.arg = v.at("arg").at("as_tensor").at("name");
            } else fail("signature", "an input of kind '" + kind + "' (custom objects and effect tokens are not supported)");
            p.inputs.push_back(in);
        }
        int slot = 0;
        for (const auto& s : sig.at("output_specs")) {
            const auto first_ = s.begin();
        const std::string kind = first_.key();
        const json& v = first_.value();
            OutputSpec o;
            o.slot = slot++;
            if (kind == "user_output") o.kind = OutputSpec::Kind::User;
            else if (kind == "buffer_mutation") { o.kind = OutputSpec::Kind::BufferMutation; o.target = v.at("buffer_name"); }
            else o.kind = OutputSpec::Kind::Other;
            p.outputs.push_back(o);
        }
        const auto& tv = root.at("tensor_values");
        for (const auto& in : p.inputs) {
            if (in.kind != InputSpec::Kind::User) continue;
            UserInput u;
            u.name = in.arg;
            const auto& meta = tv.at(in.arg);
            u.dtype = dtype(meta.at("dtype"), "input '" + in.arg + "'");
            for (const auto& d : meta.at("sizes")) u.sizes.push_back(d.contains("as_int") ? d["as_int"].get<int64_t>() : -1);
            p.user_inputs.push_back(u);
        }
    }
};

/// Leaf names of a pytree spec ("[1, {type, context, children_spec}]"), joined with '.'.
void tree_leaves(const json& spec, const std::string& prefix, std::vector<std::string>& out) {
    const auto& children = spec.value("children_spec", json::array());
    if (spec.value("type", json()).is_null() || children.empty()) {
        out.push_back(prefix.empty() ? "0" : prefix);
        return;
    }
    json keys;
    if (spec.value("type", std::string()) == "builtins.dict") {
        try { keys = json::parse(spec.value("context", std::string("[]"))); } catch (...) { keys = json::array(); }
    }
    for (size_t i = 0; i < children.size(); ++i) {
        std::string k = keys.is_array() && i < keys.size() ? (keys[i].is_string() ? keys[i].get<std::string>() : keys[i].dump())
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
        if (r.rfind("data/aotinductor/", 0) == 0 || r.find(".wrapper.so") != std::string::npos) return ZipKind::AotInductor;
        if (r.rfind("models/", 0) == 0 && r.size() > 12 && r.substr(r.size() - 5) == ".json") return ZipKind::Export;
        if (r == "constants.pkl" || r.rfind("code/", 0) == 0) ts = true;
    }
    return ts ? ZipKind::TorchScript : ZipKind::Other;
}

Program read_program(const std::vector<char>& bytes, const std::string& file) {
    Program p;
    p.file = file;
    Reader rd{file, p};
    auto zip = open_checked_zip(bytes, file);
    std::string model_json;
    for (const auto& r : zip->getAllRecords())
        if (r.rfind("models/", 0) == 0 && r.substr(r.size() - 5) == ".json" && (model_json.empty() || r == "models/model.json"))
            model_json = r;
    if (model_json.empty()) rd.fail("models/", "a zip without a serialized program (models/*.json); expected torch.export.save output");
    const std::string name = model_json.substr(7, model_json.size() - 12);
    auto [ptr, n] = zip->getRecord(model_json);
    json j;
    try {
        j = json::parse(static_cast<const char*>(ptr.get()), static_cast<const char*>(ptr.get()) + n);
        const int major = j.at("schema_version").at("major").get<int>();
        const int minor = j.at("schema_version").at("minor").get<int>();
        p.schema_version = std::to_string(major) + "." + std::to_string(minor);
        if (major != 8)
            rd.fail(model_json, "schema version " + p.schema_version + "; this build reads schema major version 8 (torch 2.11 writes 8.17)");
        for (const auto& v : j.value("verifiers", json::array())) p.ir += (p.ir.empty() ? "" : ",") + v.get<std::string>();
        const auto& gm = j.at("graph_module");
        p.graphs.emplace_back();
        Graph root = rd.graph(gm.at("graph"), "graph");
        p.graphs[0] = std::move(root);
        rd.signature(gm.at("signature"), gm.at("graph"));
        std::set<std::string> seen{""};
        p.modules.push_back("");
        for (const auto& c : gm.value("module_call_graph", json::array()))
            if (seen.insert(c.value("fqn", std::string())).second) p.modules.push_back(c["fqn"]);
        for (const auto& g : p.graphs)
            for (const auto& nd : g.nodes)
                for (const auto& m : nd.module_chain)
                    if (seen.insert(m).second) p.modules.push_back(m);
        const auto& mcg = gm.value("module_call_graph", json::array());
        std::vector<std::string> leaves;
        if (!mcg.empty() && mcg[0].contains("signature") && !mcg[0]["signature"].is_null()) {
            const auto spec = json::parse(mcg[0]["signature"].value("out_spec", std::string("[1, {}]")));
            if (spec.is_array() && spec.size() == 2) tree_leaves(spec[1], "", leaves);
        }
        int users = 0;
        for (const auto& o : p.outputs) users += o.kind == OutputSpec::Kind::User;
        if (int(leaves.size()) != users) {
            leaves.clear();
            for (int i = 0; i < users; ++i) leaves.push_back(std::to_string(i));
        }
        p.output_names = leaves;
    } catch (const InputError&) {
        throw;
    } catch (const std::exception& e) {
        rd.fail(model_json, std::string("not a serialized ExportedProgram this build reads: ") + e.what());
    }
    try {
        rd.tensors(*zip, "data/weights/" + name + "_weights_config.json", "data/weights/", p.parameters);
        rd.tensors(*zip, "data/constants/" + name + "_constants_config.json", "data/constants/", p.constants);
    } catch (const InputError&) {
        throw;
    } catch (const std::exception& e) {
        rd.fail("data/", std::string("weights not readable: ") + e.what());
    }
    // the weights file holds parameters and persistent buffers together: split by the signature
    for (const auto& in : p.inputs) {
        auto& from = p.parameters.count(in.target) ? p.parameters : p.constants;
        if (in.kind == InputSpec::Kind::User) continue;
        if (!from.count(in.target)) rd.fail(in.target, "no weight record for this " + std::string(in.kind == InputSpec::Kind::Parameter ? "parameter" : in.kind == InputSpec::Kind::Buffer ? "buffer" : "constant"));
        if (in.kind == InputSpec::Kind::Parameter) p.parameter_order.push_back(in.target);
        if (in.kind == InputSpec::Kind::Buffer) {
            p.buffers[in.target] = from[in.target];
            p.buffer_order.push_back(in.target);
        }
        if (in.kind == InputSpec::Kind::Constant) p.constants[in.target] = from[in.target];
    }
    for (const auto& b : p.buffer_order) p.parameters.erase(b);
    static const std::set<std::string> decomposed{"torch.ops.aten.convolution.default", "torch.ops.aten._softmax.default",
                                                  "torch.ops.aten.native_layer_norm.default",
                                                  "torch.ops.aten._native_batch_norm_legit_no_training.default"};
    for (const auto& g : p.graphs)
        for (const auto& nd : g.nodes) p.decomposed = p.decomposed || decomposed.count(nd.target);
    if (p.decomposed)
        p.warnings.push_back("the program is decomposed (core ATen: convolution/_softmax/native_layer_norm): autocast's op lists do "
                             "not name some of these ops as eager's, so AMP passes may differ from eager autocast; export without "
                             "run_decompositions() for an eager-faithful policy");
    return p;
}

}  // namespace ampscope::detail::pt2
