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
#include "model/export_json.h"
#include "model/export_program.h"
#include "torchsave/pt_archive.h"

namespace ampscope::detail::pt2 {
namespace {

using nlohmann::json;

constexpr int kMaxGraphDepth = 16;  ///< subgraphs inside subgraphs (autocast regions nest one or two)
constexpr int64_t kMaxInputElements = int64_t(1) << 31;  ///< a static user input's elements (padding allocates them)

struct Reader {
    const std::string& file;
    Program& p;
    int depth = 0;  ///< subgraph nesting while reading

    /// A serialized union: an object with exactly one key (its kind).
    std::pair<std::string, const json*> single(const json& j, const std::string& where) const {
        if (!j.is_object() || j.size() != 1)
            fail(where, "a single-key object (its kind), not " + std::string(j.type_name()));
        return {j.begin().key(), &j.begin().value()};
    }

    std::string name_of(const json& j, const std::string& where) const {
        if (!j.is_string() || j.get_ref<const std::string&>().empty()) fail(where, "a non-empty value name (string)");
        return j.get<std::string>();
    }

    [[noreturn]] void fail(const std::string& field, const std::string& what) const {
        throw InputError(file, field, what);
    }

    at::ScalarType dtype(const json& code, const std::string& where) const { return dtype_named(code, file, where); }

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

    /// One serialized argument (a single-key object) to an Arg.
    /// The plain constants: a value the schema's argument receives as it is written.
    std::optional<c10::IValue> constant(const std::string& kind, const json& v, const c10::Argument* schema,
                                        const std::string& where) {
        const bool want_float = schema && schema->type()->kind() == c10::TypeKind::FloatType;
        if (kind == "as_int") return want_float ? c10::IValue(double(v.get<int64_t>())) : c10::IValue(v.get<int64_t>());
        if (kind == "as_float") return c10::IValue(v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>());
        if (kind == "as_bool") return c10::IValue(v.get<bool>());
        if (kind == "as_string") return c10::IValue(v.get<std::string>());
        if (kind == "as_ints") return c10::IValue(v.get<std::vector<int64_t>>());
        if (kind == "as_floats") return c10::IValue(v.get<std::vector<double>>());
        if (kind == "as_strings") return c10::IValue(v.get<std::vector<std::string>>());
        if (kind == "as_scalar_type") return c10::IValue(int64_t(dtype(v, where)));
        if (kind == "as_memory_format") return c10::IValue(memory_format(v.get<int64_t>(), where));
        if (kind == "as_layout") return c10::IValue(layout(v.get<int64_t>(), where));
        if (kind == "as_bools") {
            c10::List<bool> l;
            for (const auto& b : v) l.push_back(b.get<bool>());
            return c10::IValue(l);
        }
        return std::nullopt;
    }

    /// A symbolic scalar: a name bound at run time, or the literal it was specialised to.
    Arg sym_scalar(const json& v, const std::string& where) {
        Arg r;
        if (v.contains("as_name")) {
            r.kind = Arg::Kind::SymInt;
            r.name = name_of(v["as_name"], where);
        } else if (v.contains("as_int")) {
            r.constant = v["as_int"].get<int64_t>();
        } else if (v.contains("as_bool")) {
            r.constant = v["as_bool"].get<bool>();
        } else if (v.contains("as_float")) {
            r.constant = v["as_float"].get<double>();
        }
        return r;
    }

    Arg sym_ints(const json& v, const std::string& where) {
        Arg r;
        r.kind = Arg::Kind::SymInts;
        for (const auto& e : v) {
            const bool named = e.is_object() && e.contains("as_name");
            if (!named && !(e.is_object() && e.contains("as_int") && e["as_int"].is_number_integer()))
                fail(where, "an as_sym_ints element that is {\"as_name\": ...} or {\"as_int\": N}, not " + e.dump());
            r.names.push_back(named ? name_of(e["as_name"], where) : "");
            r.literals.push_back(named ? 0 : e["as_int"].get<int64_t>());
        }
        return r;
    }

    Arg subgraph(const json& v, const std::string& where) {
        if (depth >= kMaxGraphDepth)
            fail(where, "subgraphs nested deeper than " + std::to_string(kMaxGraphDepth) + " levels");
        Arg r;
        r.kind = Arg::Kind::Graph;
        r.graph = int(p.graphs.size());
        p.graphs.emplace_back();
        ++depth;
        Graph g = graph(v.at("graph"), where + " subgraph " + v.value("name", std::string()));
        --depth;
        p.graphs[size_t(r.graph)] = std::move(g);
        return r;
    }

    Arg tensors(const std::string& kind, const json& v) {
        Arg r;
        r.kind = kind == "as_tensors" ? Arg::Kind::Tensors : Arg::Kind::OptionalTensors;
        for (const auto& t : v)
            r.names.push_back(t.contains("as_tensor") ? t["as_tensor"].at("name").get<std::string>()
                                                      : t.value("name", std::string()));
        return r;
    }

    Arg arg(const json& a, const c10::Argument* schema, const std::string& where) {
        if (!a.is_object() || a.size() != 1) fail(where, "an argument that is not a single-key object");
        const std::string kind = a.begin().key();
        const json& v = a.begin().value();
        Arg r;
        if (kind == "as_none") return r;
        if (auto c = constant(kind, v, schema, where)) {
            r.constant = std::move(*c);
            return r;
        }
        if (kind == "as_tensor" || (kind == "as_optional_tensor" && v.contains("as_tensor"))) {
            r.kind = Arg::Kind::Tensor;
            r.name = name_of(kind == "as_tensor" ? v.at("name") : v["as_tensor"].at("name"), where);
            return r;
        }
        if (kind == "as_optional_tensor") return r;
        if (kind == "as_tensors" || kind == "as_optional_tensors") return tensors(kind, v);
        if (kind == "as_device") {
            r.kind = Arg::Kind::Device;
            return r;
        }
        if (kind == "as_sym_int" || kind == "as_sym_bool" || kind == "as_sym_float") return sym_scalar(v, where);
        if (kind == "as_sym_ints") return sym_ints(v, where);
        if (kind == "as_graph") return subgraph(v, where);
        fail(where, "argument kind '" + kind + "' is not supported by ampscope's interpreter");
    }

    std::vector<Out> outs(const json& list, const std::string& where) const {
        std::vector<Out> r;
        for (const auto& o : list) {
            Out out;
            if (!o.is_object()) fail(where, "an output that is an object, not " + std::string(o.type_name()));
            if (o.contains("as_tensor")) {
                out.kind = Out::Kind::Tensor;
                out.name = name_of(o["as_tensor"].at("name"), where);
            } else if (o.contains("as_tensors")) {
                out.kind = Out::Kind::Tensors;
                for (const auto& t : o["as_tensors"]) out.names.push_back(name_of(t.at("name"), where));
            } else if (o.contains("as_sym_int") || o.contains("as_sym_bool") || o.contains("as_sym_float")) {
                out.kind = Out::Kind::SymInt;
                const auto& s = o.contains("as_sym_int")    ? o["as_sym_int"]
                                : o.contains("as_sym_bool") ? o["as_sym_bool"]
                                                            : o["as_sym_float"];
                out.name = name_of(s.is_object() && s.contains("as_name") ? s["as_name"] : s.at("name"), where);
            }
            r.push_back(std::move(out));
        }
        return r;
    }

    /// nn_module_stack: "key,path,type;key,path,type" (outermost first). Export's placeholder
    /// for nodes it made without a module (a dynamic batch's sym_size) is no module: skipped.
    static void module_stack(const json& meta, Node& n) {
        if (!meta.is_object() || !meta.contains("nn_module_stack")) return;
        const std::string s = meta["nn_module_stack"].get<std::string>();
        size_t b = 0;
        while (b <= s.size()) {
            size_t e = s.find(';', b);
            if (e == std::string::npos) e = s.size();
            const std::string entry = s.substr(b, e - b);
            const auto c1 = entry.find(','), c2 = entry.rfind(',');
            const std::string path = c1 != std::string::npos && c2 > c1 ? entry.substr(c1 + 1, c2 - c1 - 1) : "";
            if (c1 != std::string::npos && c2 > c1 && path != "_empty_nn_module_stack_from_metadata_hook") {
                n.module_chain.push_back(path);
                n.module_type = entry.substr(c2 + 1);
                n.chain_types.push_back(n.module_type);
            }
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
            fail(
                where,
                "operator " + ns + "::" + op + "." + ov + " is not registered in this LibTorch" +
                    (ns == "aten" || ns == "prims"
                         ? std::string(" (a newer PyTorch wrote it?)")
                         : "; it is a custom op: its library must be loaded into ampscope (it cannot run without it)"));
        n.op = *h;
        const auto& schema = h->schema();
        std::map<std::string, const json*> given;
        size_t positional = 0;
        std::vector<const json*> by_position;
        for (const auto& in : jn.at("inputs")) {
            const std::string name = in.value("name", std::string());
            if (!name.empty())
                given[name] = &in.at("arg");
            else
                by_position.push_back(&in.at("arg"));
        }
        for (size_t i = 0; i < schema.arguments().size(); ++i) {
            const auto& sa = schema.arguments()[i];
            const json* a = nullptr;
            if (auto it = given.find(sa.name()); it != given.end())
                a = it->second;
            else if (positional < by_position.size())
                a = by_position[positional++];
            if (!a) {
                if (!sa.default_value())
                    fail(where, "argument '" + sa.name() + "' of " + schema.name() + " is missing");
                n.args.emplace_back(std::nullopt);
                continue;
            }
            n.args.emplace_back(arg(*a, &sa, where + " argument '" + sa.name() + "'"));
            auto& made = *n.args.back();
            // a number where the schema takes a Tensor (x.add_(1)): a wrapped number, as Python passes it
            if (made.kind == Arg::Kind::Constant && sa.type()->kind() == c10::TypeKind::TensorType &&
                (made.constant.isInt() || made.constant.isDouble() || made.constant.isBool())) {
                auto t = made.constant.isInt()      ? at::scalar_to_tensor(made.constant.toInt())
                         : made.constant.isDouble() ? at::scalar_to_tensor(made.constant.toDouble())
                                                    : at::scalar_to_tensor(made.constant.toBool());
                t.unsafeGetTensorImpl()->set_wrapped_number(true);
                made.constant = t;
            }
        }
        if (positional < by_position.size())
            fail(where, std::to_string(by_position.size()) + " positional arguments for " + schema.name() +
                            ", which takes at most " + std::to_string(positional));
        for (const auto& kv : given) {
            const std::string& name = kv.first;
            if (std::none_of(schema.arguments().begin(), schema.arguments().end(),
                             [&](const c10::Argument& sa) { return sa.name() == name; }))
                fail(where, "argument '" + name + "' is not in the schema of " + schema.name());
        }
    }

    Node node(const json& jn) {
        Node n;
        n.target = jn.at("target").get<std::string>();
        n.name = jn.value("name", std::string());
        const std::string where = "node '" + n.name + "' (" + n.target + ")";
        module_stack(jn.value("metadata", json::object()), n);
        n.outputs = outs(jn.at("outputs"), where + " outputs");
        if (n.target == "torch.ops.higher_order.wrap_with_autocast" ||
            n.target == "torch.ops.higher_order.wrap_with_set_grad_enabled") {
            n.kind = n.target.find("autocast") != std::string::npos ? Node::Kind::Autocast : Node::Kind::GradEnabled;
            for (const auto& in : jn.at("inputs")) n.args.emplace_back(arg(in.at("arg"), nullptr, where));
        } else if (n.target.rfind("torch.ops.higher_order.", 0) == 0) {
            fail(where, "higher-order op '" + n.target.substr(23) +
                            "' is not supported (ampscope runs wrap_with_autocast and "
                            "wrap_with_set_grad_enabled; export without data-dependent control flow such as torch.cond "
                            "/ while_loop)");
        } else if (n.target.rfind("torch.ops.", 0) == 0) {
            op_node(jn, n, where);
        } else if (n.target.rfind("_operator.", 0) == 0 || n.target.rfind("torch.sym_", 0) == 0 ||
                   n.target.rfind("math.", 0) == 0) {
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
            const auto [kind, vp] = single(in, where + " inputs");
            const json& v = *vp;
            if (kind != "as_tensor" && kind != "as_sym_int")
                fail(where + " inputs", "graph input of kind '" + kind + "' is not supported (tensor inputs expected)");
            g.inputs.push_back(name_of(kind == "as_tensor"     ? v.at("name")
                                       : v.contains("as_name") ? v["as_name"]
                                                               : v.at("name"),
                                       where + " inputs"));
        }
        g.outputs = outs(jg.at("outputs"), where + " outputs");
        for (const auto& jn : jg.at("nodes")) g.nodes.push_back(node(jn));
        return g;
    }

    void input_specs(const json& sig) {
        std::set<std::string> args, targets;
        for (const auto& s : sig.at("input_specs")) {
            const auto [kind, vp] = single(s, "signature input_specs");
            const json& v = *vp;
            InputSpec in;
            const char* fqn_key = kind == "parameter" ? "parameter_name"
                                  : kind == "buffer"  ? "buffer_name"
                                                      : "tensor_constant_name";
            if (kind == "parameter" || kind == "buffer" || kind == "tensor_constant") {
                in.kind = kind == "parameter" ? InputSpec::Kind::Parameter
                          : kind == "buffer"  ? InputSpec::Kind::Buffer
                                              : InputSpec::Kind::Constant;
                in.arg = name_of(v.at("arg").at("name"), "signature input_specs");
                in.target = name_of(v.at(fqn_key), "signature input_specs " + std::string(fqn_key));
                if (!targets.insert(in.target).second)
                    fail("signature input_specs", "'" + in.target + "' named twice (each FQN once expected)");
                if (kind == "buffer" && v.contains("persistent")) {
                    if (!v["persistent"].is_boolean())
                        fail("signature input_specs '" + in.target + "' persistent",
                             "expected true or false, got " + v["persistent"].dump());
                    in.persistent = v["persistent"].get<bool>();
                }
            } else if (kind == "user_input") {
                if (!v.at("arg").contains("as_tensor"))
                    fail("signature",
                         "a non-tensor user input (" + v.at("arg").dump() + "); ampscope feeds tensors only");
                in.arg = name_of(v.at("arg").at("as_tensor").at("name"), "signature input_specs");
            } else
                fail("signature",
                     "an input of kind '" + kind + "' (custom objects and effect tokens are not supported)");
            if (!args.insert(in.arg).second) fail("signature input_specs", "graph input '" + in.arg + "' named twice");
            p.inputs.push_back(in);
        }
    }

    void output_specs(const json& sig) {
        std::set<std::string> buffers;
        for (const auto& in : p.inputs)
            if (in.kind == InputSpec::Kind::Buffer) buffers.insert(in.target);
        int slot = 0;
        for (const auto& s : sig.at("output_specs")) {
            const auto [kind, vp] = single(s, "signature output_specs");
            const json& v = *vp;
            OutputSpec o;
            o.slot = slot++;
            if (kind == "user_output")
                o.kind = OutputSpec::Kind::User;
            else if (kind == "buffer_mutation") {
                o.kind = OutputSpec::Kind::BufferMutation;
                o.target = v.at("buffer_name").get<std::string>();
                if (!buffers.count(o.target))
                    fail("signature output_specs",
                         "buffer mutation of '" + o.target + "', which is not a buffer input of the signature");
            } else
                o.kind = OutputSpec::Kind::Other;
            p.outputs.push_back(o);
        }
    }

    /// Each user input's dtype and sizes from the root graph's tensor_values (-1: symbolic).
    void user_inputs(const json& root) {
        const auto& tv = root.at("tensor_values");
        for (const auto& in : p.inputs) {
            if (in.kind != InputSpec::Kind::User) continue;
            const std::string where = "graph tensor_values '" + in.arg + "'";
            if (!tv.is_object() || !tv.contains(in.arg))
                fail(where, "user input '" + in.arg + "' has no tensor_values entry (dtype and sizes expected)");
            UserInput u;
            u.name = in.arg;
            const auto& meta = tv.at(in.arg);
            u.dtype = dtype(meta.at("dtype"), "input '" + in.arg + "'");
            int64_t elements = 1;
            for (const auto& d : meta.at("sizes")) {
                const int64_t n = d.is_object() && d.contains("as_int") ? d["as_int"].get<int64_t>() : -1;
                if (d.is_object() && d.contains("as_int") && (n < 0 || n > kMaxInputElements))
                    fail(where, "size " + std::to_string(n) + " (0 .. 2^31 expected)");
                if (n > 0) elements = std::min(kMaxInputElements + 1, elements * n);
                u.sizes.push_back(n);
            }
            if (elements > kMaxInputElements || u.sizes.size() > 64)
                fail(where,
                     "a static input of more than 2^31 elements or 64 dimensions (the example batch of the export)");
            p.user_inputs.push_back(u);
        }
    }

    /// The recorded dtype, sizes and requires_grad of each parameter, buffer and constant input.
    void weight_metas(const json& root) {
        const auto& tv = root.at("tensor_values");
        for (const auto& in : p.inputs) {
            if (in.kind == InputSpec::Kind::User || !tv.is_object() || !tv.contains(in.arg)) continue;
            const auto& meta = tv.at(in.arg);
            TensorMeta m;
            m.dtype = dtype(meta.at("dtype"), "graph tensor_values '" + in.arg + "'");
            for (const auto& d : meta.at("sizes"))
                m.sizes.push_back(d.is_object() && d.contains("as_int") ? d["as_int"].get<int64_t>() : -1);
            m.requires_grad = meta.value("requires_grad", false);
            p.metas[in.arg] = m;
        }
    }
};

/// The serialized program's record: models/model.json, else the only models/*.json.
std::string find_model_json(caffe2::serialize::PyTorchStreamReader& zip, const Reader& rd) {
    std::string model_json;
    for (const auto& r : zip.getAllRecords())
        if (r.rfind("models/", 0) == 0 && r.substr(r.size() - 5) == ".json" &&
            (model_json.empty() || r == "models/model.json"))
            model_json = r;
    if (model_json.empty())
        rd.fail("models/", "a zip without a serialized program (models/*.json); expected torch.export.save output");
    return model_json;
}

/// The ExportedProgram JSON: schema version, graphs, signature, module paths, output names.
void read_model_json(const json& j, Reader& rd, const std::string& model_json) {
    Program& p = rd.p;
    const int major = j.at("schema_version").at("major").get<int>();
    const int minor = j.at("schema_version").at("minor").get<int>();
    p.schema_version = std::to_string(major) + "." + std::to_string(minor);
    if (major != 8)
        rd.fail(model_json, "schema version " + p.schema_version +
                                "; this build reads schema major version 8 (torch 2.11 writes 8.17)");
    for (const auto& v : j.value("verifiers", json::array())) p.ir += (p.ir.empty() ? "" : ",") + v.get<std::string>();
    const auto& gm = j.at("graph_module");
    p.graphs.emplace_back();
    Graph root = rd.graph(gm.at("graph"), "graph");
    p.graphs[0] = std::move(root);
    rd.input_specs(gm.at("signature"));
    rd.output_specs(gm.at("signature"));
    rd.user_inputs(gm.at("graph"));
    rd.weight_metas(gm.at("graph"));
    read_input_ranges(j, p);  // export_inputs.cpp
    check_program(p);
    collect_modules(gm, p);
    collect_output_names(gm, rd.file, model_json, p);
}

/// The weights file holds parameters and persistent buffers together: split by the signature.
void assign_weights(Program& p, const Reader& rd) {
    for (const auto& in : p.inputs) {
        auto& from = p.parameters.count(in.target) ? p.parameters : p.constants;
        if (in.kind == InputSpec::Kind::User) continue;
        if (!from.count(in.target))
            rd.fail(in.target,
                    "no weight record for this " + std::string(in.kind == InputSpec::Kind::Parameter ? "parameter"
                                                               : in.kind == InputSpec::Kind::Buffer  ? "buffer"
                                                                                                     : "constant"));
        if (in.kind == InputSpec::Kind::Parameter) p.parameter_order.push_back(in.target);
        if (in.kind == InputSpec::Kind::Buffer) {
            p.buffers[in.target] = from[in.target];
            p.buffer_order.push_back(in.target);
            if (!in.persistent) p.non_persistent.insert(in.target);
        }
        if (in.kind == InputSpec::Kind::Constant) p.constants[in.target] = from[in.target];
    }
    for (const auto& b : p.buffer_order) p.parameters.erase(b);
}

}  // namespace

Program read_program(const std::vector<char>& bytes, const std::string& file,
                     std::shared_ptr<std::vector<char>> owner) {
    Program p;
    p.file = file;
    Reader rd{file, p};
    SharedBytes shared{std::move(owner), {}};
    auto zip = open_checked_zip(bytes, file, shared.owner ? &shared.stored : nullptr);
    const std::string model_json = find_model_json(*zip, rd);
    const std::string name = model_json.substr(7, model_json.size() - 12);
    auto [ptr, n] = zip->getRecord(model_json);
    const json j = parse_json(ptr.get(), n, file, model_json);
    try {
        read_model_json(j, rd, model_json);
    } catch (const InputError&) {
        throw;
    } catch (const std::exception& e) {
        rd.fail(model_json, std::string("not a serialized ExportedProgram this build reads: ") + e.what());
    }
    std::map<std::string, std::string> views;
    try {
        const SharedBytes* share = shared.owner ? &shared : nullptr;
        read_weights(*zip, file, "data/weights/" + name + "_weights_config.json", "data/weights/", p.parameters, &views,
                     share);
        read_weights(*zip, file, "data/constants/" + name + "_constants_config.json", "data/constants/", p.constants,
                     nullptr, share);
    } catch (const InputError&) {
        throw;
    } catch (const std::exception& e) {
        rd.fail("data/", std::string("weights not readable: ") + e.what());
    }
    assign_weights(p, rd);
    tie_parameters(p, views);
    check_weights_against_graph(p, name);  // export_weights.cpp
    flag_decomposed(p);
    note_dtype_assertions(p);
    mark_mode_flags(p);  // export_mode.cpp
    return p;
}

}  // namespace ampscope::detail::pt2
