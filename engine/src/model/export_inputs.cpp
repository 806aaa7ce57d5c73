// SPDX-License-Identifier: MIT
// A torch.export program's user inputs against the probe tensors given for them, before any pass:
// the input count, each input's dtype class (floating, integer, bool), its static dimensions, the
// ranges of its symbolic dimensions (range_constraints: Dim(min=..., max=...)), and token ids
// against the rows of every aten.embedding they reach through view-like ops from the placeholder, in
// the root graph and in the subgraphs of wrap_with_autocast / wrap_with_set_grad_enabled.
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "ampscope/engine/errors.h"
#include "model/export_program.h"

namespace ampscope::detail::pt2 {
namespace {

using nlohmann::json;

/// The symbol a serialized size names: "s0", or "Symbol('s23', positive=True, integer=True)";
/// "" for an expression of several symbols (not range-checked).
std::string symbol_of(const std::string& expr) {
    static const std::regex sym(R"(^Symbol\('([A-Za-z_][A-Za-z0-9_]*)'.*\)$)"), bare(R"(^[A-Za-z_][A-Za-z0-9_]*$)");
    std::smatch m;
    if (std::regex_match(expr, m, sym)) return m[1];
    return std::regex_match(expr, bare) ? expr : "";
}

std::string shape_str(at::IntArrayRef s) {
    std::ostringstream o;
    o << "[";
    for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
    return o.str() + "]";
}

/// A dtype as Python torch spells it (float32, int64, bool, ...).
std::string dtype_name(at::ScalarType t) {
    switch (t) {
        case at::kFloat: return "float32";
        case at::kDouble: return "float64";
        case at::kHalf: return "float16";
        case at::kBFloat16: return "bfloat16";
        case at::kLong: return "int64";
        case at::kInt: return "int32";
        case at::kShort: return "int16";
        case at::kChar: return "int8";
        case at::kByte: return "uint8";
        case at::kBool: return "bool";
        default: return c10::toString(t);
    }
}

enum class DtypeClass { Floating, Integer, Bool, Other };

DtypeClass class_of(at::ScalarType t) {
    if (t == at::kBool) return DtypeClass::Bool;
    if (at::isFloatingType(t)) return DtypeClass::Floating;
    if (at::isIntegralType(t, /*includeBool=*/false)) return DtypeClass::Integer;
    return DtypeClass::Other;
}

std::string class_name(DtypeClass c) {
    switch (c) {
        case DtypeClass::Floating: return "a floating-point Tensor";
        case DtypeClass::Integer: return "an integer Tensor (e.g. token ids)";
        case DtypeClass::Bool: return "a bool Tensor (e.g. a mask)";
        case DtypeClass::Other: break;
    }
    return "a Tensor of another kind";
}

/// An aten.embedding whose indices come from a user input.
struct Embedding {
    size_t input = 0;
    std::string module, weight;
    int64_t rows = 0;
};

/// Ops that move index values without changing them: ids keep their meaning through them.
bool passes_values(const std::string& target) {
    static const std::set<std::string> ops = {
        "view",   "reshape", "_unsafe_view", "unsqueeze", "squeeze", "flatten",  "contiguous",
        "clone",  "expand",  "slice",        "select",    "to",      "_to_copy", "alias",
        "detach", "permute", "transpose",    "t",         "repeat",  "narrow",   "lift_fresh_copy"};
    const std::string prefix = "torch.ops.aten.";
    if (target.rfind(prefix, 0) != 0) return false;
    const std::string rest = target.substr(prefix.size());
    return ops.count(rest.substr(0, rest.find('.'))) > 0;
}

/// "torch.ops.aten.add.Tensor" -> "aten.add".
std::string short_op(const std::string& target) {
    const std::string prefix = "torch.ops.";
    std::string s = target.rfind(prefix, 0) == 0 ? target.substr(prefix.size()) : target;
    const auto dot = s.find('.');
    return dot == std::string::npos ? s : s.substr(0, s.find('.', dot + 1));
}

/// What a graph value carries for the token-id check: a user input's values (unchanged, or
/// computed from them by the op `via`), or a weight.
struct Source {
    int input = -1;      ///< user input index; -1 none
    bool exact = true;   ///< the input's values unchanged (view-like ops only)
    std::string via;     ///< the first op that computed from them (exact == false)
    std::string weight;  ///< parameter / buffer / constant FQN
};
using SourceEnv = std::map<std::string, Source>;

/// The embeddings the user inputs reach, in the root graph and in the wrap_with_autocast /
/// wrap_with_set_grad_enabled subgraphs the interpreter runs (operands bound to the subgraph's
/// inputs, its outputs to the node's): `checked` indexed by an input's values, `computed` by values
/// the program computes from an input (not knowable before the pass).
class IdFlow {
public:
    explicit IdFlow(const Program& p) : p_(p) {
        SourceEnv env;
        for (size_t i = 0; i < p.user_inputs.size(); ++i) env[p.user_inputs[i].name].input = int(i);
        for (const auto& in : p.inputs)
            if (in.kind != InputSpec::Kind::User) env[in.arg].weight = in.target;
        walk(0, std::move(env), 0);
    }
    std::vector<Embedding> checked;
    std::vector<std::pair<Embedding, std::string>> computed;  ///< with the op that computed the indices

private:
    const Source* find(const SourceEnv& env, const std::optional<Arg>& a) const {
        if (!a || a->kind != Arg::Kind::Tensor) return nullptr;
        const auto it = env.find(a->name);
        return it == env.end() ? nullptr : &it->second;
    }

    void embedding(const Node& n, const SourceEnv& env) {
        const Source *w = find(env, n.args[0]), *idx = find(env, n.args[1]);
        if (!w || w->weight.empty() || !idx || idx->input < 0) return;
        for (const auto* m : {&p_.parameters, &p_.buffers, &p_.constants})
            if (const auto t = m->find(w->weight); t != m->end() && t->second.dim() == 2) {
                const Embedding e{size_t(idx->input), n.module, w->weight, t->second.size(0)};
                if (idx->exact)
                    checked.push_back(e);
                else
                    computed.emplace_back(e, idx->via);
                return;
            }
    }

    /// Any other op: a view-like op passes its first argument's source on; any other op makes
    /// its outputs values computed from the first input among its arguments.
    void op(const Node& n, SourceEnv& env) const {
        std::optional<Source> out;
        if (const Source* s = n.args.empty() ? nullptr : find(env, n.args[0]); s && passes_values(n.target)) out = *s;
        for (size_t i = 0; !out && i < n.args.size(); ++i) {
            if (!n.args[i]) continue;
            std::vector<std::string> names = n.args[i]->names;
            if (n.args[i]->kind == Arg::Kind::Tensor) names = {n.args[i]->name};
            for (const auto& nm : names)
                if (const auto it = env.find(nm); !out && it != env.end() && it->second.input >= 0)
                    out = Source{it->second.input, false, it->second.exact ? short_op(n.target) : it->second.via, ""};
        }
        if (!out) return;
        for (const auto& o : n.outputs) {
            if (o.kind == Out::Kind::Tensor) env[o.name] = *out;
            for (const auto& nm : o.names) env[nm] = *out;
        }
    }

    void hop(const Node& n, SourceEnv& env, int depth) {
        const size_t g = n.kind == Node::Kind::Autocast ? 4 : 1;
        const int gi = n.args.at(g)->graph;
        const auto& sub = p_.graphs.at(size_t(gi));
        SourceEnv inner;
        for (size_t i = 0; i < sub.inputs.size() && g + 1 + i < n.args.size(); ++i)
            if (const Source* s = find(env, n.args[g + 1 + i])) inner[sub.inputs[i]] = *s;
        const auto results = walk(gi, std::move(inner), depth + 1);
        std::vector<std::string> names;
        for (const auto& o : n.outputs) {
            if (o.kind == Out::Kind::Tensors) names.insert(names.end(), o.names.begin(), o.names.end());
            if (o.kind == Out::Kind::Tensor) names.push_back(o.name);
        }
        for (size_t k = 0; k < names.size() && k < results.size(); ++k)
            if (!names[k].empty() && (results[k].input >= 0 || !results[k].weight.empty())) env[names[k]] = results[k];
    }

    std::vector<Source> walk(int gi, SourceEnv env, int depth) {
        if (depth > 64) return {};  // check_program refuses cycles; a bound all the same
        const auto& g = p_.graphs.at(size_t(gi));
        for (const auto& n : g.nodes) {
            if (n.kind == Node::Kind::Autocast || n.kind == Node::Kind::GradEnabled)
                hop(n, env, depth);
            else if (n.kind == Node::Kind::Op && n.target == "torch.ops.aten.embedding.default" && n.args.size() > 1)
                embedding(n, env);
            else if (n.kind == Node::Kind::Op)
                op(n, env);
        }
        std::vector<Source> out;
        for (const auto& o : g.outputs) {
            std::vector<std::string> names = o.names;
            if (o.kind == Out::Kind::Tensor) names = {o.name};
            for (const auto& nm : names) out.push_back(env.count(nm) ? env.at(nm) : Source{});
        }
        return out;
    }

    const Program& p_;
};

/// The first token id outside [0, rows) of `ids`, as an InputError.
void check_ids(const at::Tensor& ids, const Embedding& e, const std::string& field,
               const std::vector<std::string>& sample_ids, const std::string& file) {
    const auto flat = ids.reshape({ids.size(0), -1}).to(at::kLong);
    const auto bad = flat.lt(0).logical_or(flat.ge(e.rows)).reshape({-1}).nonzero();
    if (bad.numel() == 0) return;
    const int64_t k = bad[0][0].item<int64_t>(), per = flat.size(1);
    const int64_t sample = k / per, position = k % per, id = flat.reshape({-1})[k].item<int64_t>();
    const std::string sid = size_t(sample) < sample_ids.size() ? sample_ids[size_t(sample)] : std::to_string(sample);
    throw InputError(file, field,
                     "sample '" + sid + "' position " + std::to_string(position) + ": token id " + std::to_string(id) +
                         " is out of range for the embedding '" + (e.module.empty() ? e.weight : e.module) + "' (" +
                         std::to_string(e.rows) + " rows, weight " + e.weight + "); expected 0 <= id < " +
                         std::to_string(e.rows) + " (" + std::to_string(bad.size(0)) + " ids out of range in all)");
}

/// Whether PyTorch's own check of a program's inputs (torch._export.utils.
/// _check_input_constraints_for_graph, what ep.module() runs) admits the size `v`: a maximum always,
/// a minimum only above 2 (export's 0/1 specialisation: sizes 0 and 1 pass at run time).
bool admits(const SymRange& r, int64_t v) {
    return (r.min <= 2 || v >= r.min) && (r.max < 0 || v <= r.max);
}

std::string range_str(const std::string& symbol, const SymRange& r) {
    return symbol + " in [" + std::to_string(r.min) + ", " + (r.max >= 0 ? std::to_string(r.max) : "inf") +
           "] (range_constraints)";
}

std::string field_of(const Program& p, size_t i) {
    return (p.user_inputs.size() > 1 ? "inputs[" + std::to_string(i) + "]" : std::string("inputs")) + " (" +
           p.user_inputs[i].name + ")";
}

/// One input's symbolic dimension against its range and against the other inputs naming it. The
/// batch (dimension 0) only against a minimum: every batch has at most the probe set's N rows, so
/// N below the minimum is refused here; the batches themselves are checked by check_batches.
void check_symbol(const Program& p, const UserInput& u, size_t d, int64_t v, const std::string& field,
                  const std::string& file, std::map<std::string, std::pair<int64_t, std::string>>& seen) {
    const std::string& s = u.symbols.at(d);
    const auto r = p.ranges.find(s);
    if (r != p.ranges.end() && !admits(d == 0 ? SymRange{r->second.min, -1} : r->second, v))
        throw InputError(file, field,
                         "dimension " + std::to_string(d) + " is " + std::to_string(v) + "; the program's input '" +
                             u.name + "' was exported for " + range_str(s, r->second) +
                             (d == 0 ? ": the probe set has fewer samples than any batch the program takes" : ""));
    if (d == 0) return;  // the batch: every input has N rows (checked when the probes were read)
    const auto [it, fresh] = seen.emplace(s, std::make_pair(v, field));
    if (!fresh && it->second.first != v)
        throw InputError(file, field,
                         "dimension " + std::to_string(d) + " is " + std::to_string(v) + ", but " + it->second.second +
                             " gives " + std::to_string(it->second.first) + " for the same symbolic dimension " + s +
                             " of the program");
}

}  // namespace

void read_input_ranges(const json& j, Program& p) {
    const auto& tv = j.at("graph_module").at("graph").at("tensor_values");
    for (auto& u : p.user_inputs) {
        u.symbols.clear();
        for (const auto& d : tv.at(u.name).at("sizes")) {
            const bool expr = d.is_object() && d.contains("as_expr") && d["as_expr"].is_object();
            const auto& e = expr ? d["as_expr"].value("expr_str", json()) : json();
            u.symbols.push_back(e.is_string() ? symbol_of(e.get<std::string>()) : "");
        }
    }
    const auto rc = j.value("range_constraints", json::object());
    if (!rc.is_object()) return;
    for (auto it = rc.begin(); it != rc.end(); ++it) {
        if (!it.value().is_object()) continue;
        const auto lo = it.value().value("min_val", json()), hi = it.value().value("max_val", json());
        SymRange r;
        if (lo.is_number_integer()) r.min = lo.get<int64_t>();
        if (hi.is_number_integer() && hi.get<int64_t>() >= 0) r.max = hi.get<int64_t>();
        p.ranges[it.key()] = r;
    }
}

void check_user_inputs(const Program& p, const std::vector<at::Tensor>& inputs,
                       const std::vector<std::string>& sample_ids, const std::string& file) {
    if (inputs.size() != p.user_inputs.size())
        throw InputError(file, "inputs",
                         "gives " + std::to_string(inputs.size()) + " input tensor(s); the program " + p.file +
                             " takes " + std::to_string(p.user_inputs.size()));
    std::map<std::string, std::pair<int64_t, std::string>> seen;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const auto& u = p.user_inputs[i];
        const auto& t = inputs[i];
        const std::string field = field_of(p, i);
        const std::string found = dtype_name(t.scalar_type()) + " " + shape_str(t.sizes());
        if (class_of(t.scalar_type()) != class_of(u.dtype))
            throw InputError(file, field,
                             "is " + found + "; the program's input '" + u.name + "' is " + dtype_name(u.dtype) +
                                 ": expected " + class_name(class_of(u.dtype)));
        if (size_t(t.dim()) != u.sizes.size())
            throw InputError(
                file, field,
                "is " + found + "; the program's input '" + u.name + "' has rank " + std::to_string(u.sizes.size()));
        for (size_t d = 0; d < u.sizes.size(); ++d) {
            if (u.sizes[d] >= 0 && d > 0 && t.size(int64_t(d)) != u.sizes[d])
                throw InputError(file, field,
                                 "is " + found + "; dimension " + std::to_string(d) + " of the program's input '" +
                                     u.name + "' is static: expected " + std::to_string(u.sizes[d]));
            if (u.sizes[d] < 0 && d < u.symbols.size() && !u.symbols[d].empty())
                check_symbol(p, u, d, t.size(int64_t(d)), field, file, seen);
        }
    }
    for (const auto& e : IdFlow(p).checked) {
        const auto& t = inputs.at(e.input);
        const std::string field = field_of(p, e.input);
        if (class_of(t.scalar_type()) != DtypeClass::Integer)
            throw InputError(file, field,
                             "feeds the embedding '" + e.module + "' and is " + dtype_name(t.scalar_type()) +
                                 ": expected integer token ids");
        check_ids(t, e, field, sample_ids, file);
    }
}

namespace {

/// The batches `batch_size` cuts n samples into: the first (all but the last have its size) and
/// the last when smaller (0 when every batch is full).
std::pair<int64_t, int64_t> batches_of(int64_t n, int64_t batch_size) {
    const int64_t first = std::min(n, batch_size), last = n > batch_size ? n % batch_size : 0;
    return {first, last};
}

/// The batch-size values nearest to `wanted` (one below, one above) whose batches every range
/// admits, as "batch size A or B"; "" when none does.
std::string batch_sizes_that_work(int64_t n, int64_t wanted, const std::function<bool(int64_t)>& fits) {
    int64_t below = 0, above = 0;
    for (int64_t b = std::min(wanted, n + 1) - 1; b >= 1 && !below; --b)
        if (fits(b)) below = b;
    for (int64_t b = wanted + 1; b <= n && !above; ++b)
        if (fits(b)) above = b;
    std::string s = below ? std::to_string(below) : "";
    if (above)
        s += (below ? " or " : "") + std::to_string(above) +
             (above == n ? " (or more: one batch of " + std::to_string(n) + ")" : "");
    return s.empty() ? "" : "batch size " + s;
}

}  // namespace

std::vector<std::string> unchecked_embeddings(const Program& p) {
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (const auto& [e, via] : IdFlow(p).computed) {
        const std::string name = e.module.empty() ? e.weight : e.module;
        if (!seen.insert(name + "\n" + e.weight).second) continue;
        out.push_back(
            "token ids are not checked before the pass against the embedding '" + name + "' (" +
            std::to_string(e.rows) + " rows, weight " + e.weight + "): its indices are computed from the input '" +
            p.user_inputs[e.input].name + "' in the program (" + via +
            "), so an id out of range there is found only by PyTorch's 'index out of range' " + "inside a pass");
    }
    return out;
}

void check_batches(const Program& p, int64_t n, int64_t batch_size, const std::string& file) {
    struct Rule {
        size_t input;
        std::string symbol;
        SymRange range;
    };
    std::vector<Rule> rules;  // user inputs whose dimension 0 is a symbol with a range
    for (size_t i = 0; i < p.user_inputs.size(); ++i) {
        const auto& u = p.user_inputs[i];
        if (u.sizes.empty() || u.sizes[0] >= 0 || u.symbols.empty() || u.symbols[0].empty()) continue;
        if (const auto r = p.ranges.find(u.symbols[0]); r != p.ranges.end()) rules.push_back({i, r->first, r->second});
    }
    const auto fits = [&](int64_t b) {
        const auto [first, last] = batches_of(n, b);
        for (const auto& r : rules)
            if (!admits(r.range, first) || (last > 0 && !admits(r.range, last))) return false;
        return true;
    };
    if (n < 1 || batch_size < 1 || fits(batch_size)) return;
    const auto [first, last] = batches_of(n, batch_size);
    for (const auto& r : rules) {
        const bool first_bad = !admits(r.range, first);
        if (!first_bad && admits(r.range, last)) continue;
        const int64_t v = first_bad ? first : last;
        const std::string works = batch_sizes_that_work(n, batch_size, fits);
        throw InputError(file, field_of(p, r.input),
                         "batch size " + std::to_string(batch_size) + " over its " + std::to_string(n) +
                             " samples runs " + (first_bad ? "a batch of " : "a last batch of ") + std::to_string(v) +
                             "; dimension 0 of the program's input '" + p.user_inputs[r.input].name +
                             "' was exported for " + range_str(r.symbol, r.range) +
                             ", which PyTorch checks when the program runs (a minimum only above 2): " +
                             (works.empty() ? "no batch size fits these samples" : "use " + works));
    }
}

}  // namespace ampscope::detail::pt2
