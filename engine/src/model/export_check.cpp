// SPDX-License-Identifier: MIT
// The consistency checks of a read torch.export program (export_program.h: check_program), so
// the interpreter can trust what it runs: a malformed file is refused at load time (exit 2).
#include <algorithm>
#include <set>

#include "ampscope/engine/errors.h"
#include "model/export_program.h"

namespace ampscope::detail::pt2 {
namespace {

/// The graphs checked as the interpreter will walk them, so that it can trust what it reads:
/// every value defined once before it is used (a subgraph sees only its own inputs), the root
/// graph's inputs and outputs matching the signature, higher-order and symbolic nodes with the
/// arity and argument kinds export_model.cpp's hop() and sym() take.
struct Checker {
    const std::string& file;
    const Program& p;

    [[noreturn]] void fail(const std::string& field, const std::string& what) const {
        throw InputError(file, field, what);
    }

    static std::string where(int gi, const Node& n) {
        return (gi == 0 ? std::string("graph") : "subgraph " + std::to_string(gi)) + " node '" + n.name + "' (" +
               n.target + ")";
    }

    void use(const std::set<std::string>& defined, const std::string& name, const std::string& at) const {
        if (!name.empty() && !defined.count(name))
            fail(at, "reads '" + name + "', which no earlier node or graph input defines");
    }

    void uses(const std::set<std::string>& defined, const Arg& a, const std::string& at) const {
        if (a.kind == Arg::Kind::Tensors && std::count(a.names.begin(), a.names.end(), std::string()))
            fail(at, "a tensor list with an unnamed element (names of tensors expected)");
        use(defined, a.name, at);
        for (const auto& nm : a.names) use(defined, nm, at);
    }

    static bool is_constant(const Arg& a, bool (c10::IValue::*is)() const) {
        return a.kind == Arg::Kind::Constant && (a.constant.*is)();
    }

    /// (device_type, dtype, enabled, cache_enabled, graph, *operands) / (enabled, graph, *operands)
    void hop(const Node& n, const std::string& at) const {
        const bool autocast = n.kind == Node::Kind::Autocast;
        const size_t g = autocast ? 4 : 1;
        const char* shape =
            autocast ? "(device_type: str, dtype: scalar type or None, enabled: bool, cache_enabled: bool or None, "
                       "subgraph, operands...)"
                     : "(enabled: bool, subgraph, operands...)";
        auto bad = [&] { fail(at, std::string("arguments ") + shape + " expected"); };
        if (n.args.size() <= g) bad();
        for (const auto& a : n.args)
            if (!a) bad();
        if (autocast) {
            if (!is_constant(*n.args[0], &c10::IValue::isString)) bad();
            try {
                (void)c10::Device(n.args[0]->constant.toStringRef());
            } catch (const std::exception&) {
                fail(at, "device type '" + n.args[0]->constant.toStringRef() + "' is not a device");
            }
            const auto& dt = n.args[1]->constant;
            if (n.args[1]->kind != Arg::Kind::Constant ||
                !(dt.isNone() || (dt.isInt() && dt.toInt() >= 0 && dt.toInt() < int64_t(c10::ScalarType::NumOptions))))
                bad();
            if (!is_constant(*n.args[2], &c10::IValue::isBool)) bad();
            if (n.args[3]->kind != Arg::Kind::Constant ||
                !(n.args[3]->constant.isNone() || n.args[3]->constant.isBool()))
                bad();
        } else if (!is_constant(*n.args[0], &c10::IValue::isBool))
            bad();
        if (n.args[g]->kind != Arg::Kind::Graph) bad();
        for (size_t i = g + 1; i < n.args.size(); ++i)
            if (n.args[i]->kind == Arg::Kind::Graph) bad();
        const auto& sub = p.graphs.at(size_t(n.args[g]->graph));
        if (sub.inputs.size() != n.args.size() - g - 1)
            fail(at, "passes " + std::to_string(n.args.size() - g - 1) + " operands to a subgraph of " +
                         std::to_string(sub.inputs.size()) + " inputs");
    }

    /// The symbolic operations export_sym.cpp computes, and their arity.
    void sym(const Node& n, const std::string& at) const {
        const int arity = sym_arity(n.target);
        if (arity < 0) fail(at, "symbolic operation '" + n.target + "' is not supported by ampscope's interpreter");
        if (n.args.size() != size_t(arity))
            fail(at, std::to_string(arity) + " arguments expected, not " + std::to_string(n.args.size()));
        for (const auto& a : n.args) {
            const bool ok = a && (a->kind == Arg::Kind::SymInt ||
                                  (a->kind == Arg::Kind::Constant &&
                                   (a->constant.isInt() || a->constant.isBool() || a->constant.isDouble())));
            if (!ok) fail(at, "symbolic ints, bools, floats or literals as arguments expected");
        }
        if (n.outputs.size() != 1 || n.outputs[0].kind != Out::Kind::SymInt) fail(at, "one symbolic output expected");
    }

    void define(std::set<std::string>& defined, const std::string& name, const std::string& at) const {
        if (!defined.insert(name).second) fail(at, "defines '" + name + "' a second time (each value once expected)");
    }

    void graph(int gi) const {
        const auto& g = p.graphs[size_t(gi)];
        std::set<std::string> defined;
        for (const auto& in : g.inputs)
            define(defined, in, gi == 0 ? "graph inputs" : "subgraph " + std::to_string(gi) + " inputs");
        for (const auto& n : g.nodes) {
            const std::string at = where(gi, n);
            for (const auto& a : n.args) {
                if (!a) continue;
                if (a->kind == Arg::Kind::Graph && n.kind != Node::Kind::Autocast && n.kind != Node::Kind::GradEnabled)
                    fail(at,
                         "a subgraph passed to an operator (only wrap_with_autocast / wrap_with_set_grad_enabled take "
                         "one)");
                uses(defined, *a, at);
            }
            if (n.kind == Node::Kind::Autocast || n.kind == Node::Kind::GradEnabled) hop(n, at);
            if (n.kind == Node::Kind::SymOp) sym(n, at);
            for (const auto& o : n.outputs) {
                if (o.kind == Out::Kind::Tensor || o.kind == Out::Kind::SymInt) define(defined, o.name, at);
                for (const auto& nm : o.names) define(defined, nm, at);
            }
        }
        const std::string at = gi == 0 ? "graph outputs" : "subgraph " + std::to_string(gi) + " outputs";
        for (const auto& o : g.outputs) {
            use(defined, o.name, at);
            for (const auto& nm : o.names) use(defined, nm, at);
        }
    }

    void signature() const {
        const auto& root = p.graphs.at(0);
        if (root.inputs.size() != p.inputs.size())
            fail("graph inputs", std::to_string(root.inputs.size()) + " graph inputs for " +
                                     std::to_string(p.inputs.size()) +
                                     " signature input_specs (one per spec, in order, expected)");
        for (size_t i = 0; i < root.inputs.size(); ++i)
            if (root.inputs[i] != p.inputs[i].arg)
                fail("graph inputs", "input " + std::to_string(i) + " is '" + root.inputs[i] +
                                         "' but the signature names '" + p.inputs[i].arg + "'");
        if (root.outputs.size() != p.outputs.size())
            fail("graph outputs", std::to_string(root.outputs.size()) + " graph outputs for " +
                                      std::to_string(p.outputs.size()) +
                                      " signature output_specs (one per spec expected)");
    }

    void all() const {
        signature();
        for (size_t gi = 0; gi < p.graphs.size(); ++gi) graph(int(gi));
    }
};

}  // namespace

void check_program(const Program& p) {
    Checker{p.file, p}.all();
}

void flag_decomposed(Program& p) {
    static const std::set<std::string> decomposed{
        "torch.ops.aten.convolution.default", "torch.ops.aten._softmax.default",
        "torch.ops.aten.native_layer_norm.default", "torch.ops.aten._native_batch_norm_legit_no_training.default"};
    for (const auto& g : p.graphs)
        for (const auto& nd : g.nodes) p.decomposed = p.decomposed || decomposed.count(nd.target);
    if (p.decomposed)
        p.warnings.push_back(
            "the program is decomposed (core ATen: convolution/_softmax/native_layer_norm): autocast's op lists do "
            "not name some of these ops as eager's, so AMP passes may differ from eager autocast; export without "
            "run_decompositions() for an eager-faithful policy");
}

/// aten._assert_tensor_metadata, recorded by export before .to()/.float(), asserts the
/// export-time dtype: autocast changes dtypes, so the interpreter checks only shape and device
/// in AMP passes and FP32 regions (export_model.cpp), and says so.
void note_dtype_assertions(Program& p) {
    for (const auto& g : p.graphs)
        for (const auto& nd : g.nodes) {
            if (nd.target != "torch.ops.aten._assert_tensor_metadata.default" || !nd.op) continue;
            const auto& args = nd.op->schema().arguments();
            for (size_t i = 0; i < args.size() && i < nd.args.size(); ++i)
                if (args[i].name() == "dtype" && nd.args[i] && !nd.args[i]->constant.isNone()) {
                    p.warnings.push_back(
                        "the program asserts export-time dtypes (aten::_assert_tensor_metadata, recorded before "
                        ".to()/.float()): "
                        "AMP passes and FP32 regions change dtypes as eager autocast does, so there only the asserted "
                        "shape and "
                        "device are checked");
                    return;
                }
        }
}

}  // namespace ampscope::detail::pt2
