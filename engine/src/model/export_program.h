// SPDX-License-Identifier: MIT
#pragma once
// torch.export programs (.pt2, written by torch.export.save): the archive read into a graph of
// nodes whose ATen ops are resolved once against this LibTorch's dispatcher, its weights, and
// its signature. export_interpreter.cpp runs it node by node through c10::Dispatcher with the
// pass's autocast state, so every node runs exactly as eager PyTorch runs it (EXPORT.md).

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <nlohmann/json_fwd.hpp>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ampscope::detail::pt2 {

/// One argument of a node as the program names it: a value from the environment (tensor,
/// symbolic int, list of them), a constant, or a subgraph.
struct Arg {
    enum class Kind { Constant, Tensor, Tensors, OptionalTensors, SymInt, SymInts, Graph, Device };
    Kind kind = Kind::Constant;
    c10::IValue constant;            ///< Kind::Constant (ints, floats, bools, strings, dtype codes …)
    std::string name;                ///< Kind::Tensor / SymInt: the value's name
    std::vector<std::string> names;  ///< Tensors / OptionalTensors ("" for None) / SymInts ("" for a literal)
    std::vector<int64_t> literals;   ///< SymInts: the literal where names[i] is ""
    int graph = -1;                  ///< Kind::Graph: index into Program::graphs
};

/// What a node produces: each output slot names a value (or a list of them, or nothing).
struct Out {
    enum class Kind { None, Tensor, Tensors, SymInt };
    Kind kind = Kind::None;
    std::string name;
    std::vector<std::string> names;
};

struct Node {
    enum class Kind { Op, Autocast, GradEnabled, SymOp };
    Kind kind = Kind::Op;
    std::string target;  ///< as serialized, e.g. torch.ops.aten.linear.default
    std::string name;
    std::optional<c10::OperatorHandle> op;
    /// Arguments in the schema's order (Op): nullopt where the schema's default applies.
    std::vector<std::optional<Arg>> args;
    std::vector<Out> outputs;
    std::string module;                     ///< innermost module path ("" = root)
    std::string module_type;                ///< innermost module's class, e.g. torch.nn.modules.batchnorm.BatchNorm1d
    std::vector<std::string> module_chain;  ///< every enclosing module path, outermost first
    std::vector<std::string> chain_types;   ///< the class of each module_chain entry
    /// Index of the 'training' / 'train' flag that follows the run's mode as eager
    /// model.train()/eval() would change it (export_mode.cpp), or -1.
    int train_flag = -1;
    /// A BatchNorm module's num_batches_tracked += 1 of a program exported in train mode:
    /// eager model.eval() does not count, so an eval pass returns the buffer unchanged.
    bool counts_batches = false;
};

struct Graph {
    std::vector<std::string> inputs;  ///< value names bound on entry
    std::vector<Out> outputs;
    std::vector<Node> nodes;
};

/// Where a graph input comes from (the program's signature, in graph input order).
struct InputSpec {
    enum class Kind { Parameter, Buffer, Constant, User };
    Kind kind = Kind::User;
    std::string arg;     ///< graph input name
    std::string target;  ///< parameter / buffer / constant FQN
    /// Buffer: in the module's state_dict (register_buffer(persistent=False): not, e.g. LLaMA's
    /// rotary_emb.inv_freq). Recorded by the signature's InputToBufferSpec.persistent.
    bool persistent = true;
};

struct OutputSpec {
    enum class Kind { User, BufferMutation, Other };
    Kind kind = Kind::User;
    int slot = 0;        ///< index into the root graph's outputs
    std::string target;  ///< buffer FQN for mutations
};

struct UserInput {
    std::string name;
    at::ScalarType dtype = at::kFloat;
    std::vector<int64_t> sizes;        ///< -1 where the dimension is symbolic
    std::vector<std::string> symbols;  ///< per dimension: the symbol of a symbolic one ("" static or an expression)
};

/// A graph value's recorded tensor metadata (the root graph's tensor_values).
struct TensorMeta {
    at::ScalarType dtype = at::kFloat;
    std::vector<int64_t> sizes;  ///< -1 where the dimension is symbolic
    bool requires_grad = false;
};

/// A symbolic dimension's range (range_constraints): min and max, max -1 for unbounded.
struct SymRange {
    int64_t min = 0, max = -1;
};

struct Program {
    std::string file;
    std::vector<Graph> graphs;  ///< graphs[0] is the root
    std::vector<InputSpec> inputs;
    std::vector<OutputSpec> outputs;
    std::vector<UserInput> user_inputs;
    std::vector<std::string> output_names;  ///< per user output, from the output tree ("0", "cls", …)
    std::map<std::string, at::Tensor> parameters, buffers, constants;  ///< by FQN, on the CPU
    std::vector<std::string> parameter_order, buffer_order;            ///< signature order
    std::vector<std::string> modules;                                  ///< module paths, root "" first
    std::map<std::string, std::string> module_types;                   ///< module path -> class (nn_module_stack)
    std::map<std::string, SymRange> ranges;                            ///< range_constraints by symbol
    std::string schema_version;                                        ///< "8.17"
    std::string ir;                                                    ///< verifiers, e.g. "TRAINING"
    bool decomposed = false;                  ///< core-ATen ops whose autocast policy differs from eager's
    std::map<std::string, TensorMeta> metas;  ///< root graph inputs' tensor_values, by graph input name
    std::set<std::string> frozen;             ///< parameters recorded with requires_grad=False
    std::set<std::string> non_persistent;     ///< buffers not in the module's state_dict
    /// Tied parameters (GPT-2's lm_head.weight = transformer.wte.weight): the FQN -> the FQN of
    /// its first occurrence in signature order; both name one tensor in `parameters`.
    std::map<std::string, std::string> tied;
    /// The mode the program was exported in, read from its mode-driven flags (export_mode.cpp);
    /// nullopt when it has none or they disagree.
    std::optional<bool> exported_train;
    std::vector<std::string> warnings;
};

/// What kind of model file a zip archive holds.
enum class ZipKind { NotZip, Export, AotInductor, TorchScript, Other };
ZipKind sniff_zip(const std::vector<char>& bytes, const std::string& file);

/// Module paths: root "" first, then the module call graph's, then any a node names
/// (export_outline.cpp, as sniff_zip and collect_output_names).
void collect_modules(const nlohmann::json& gm, Program& p);

/// Names of the user outputs from the root call's out_spec; "0", "1", … where it does not fit.
void collect_output_names(const nlohmann::json& gm, const std::string& file, const std::string& model_json, Program& p);

/// Checks a read program's graphs against its signature: every value defined once before use,
/// higher-order and symbolic nodes well formed. Throws InputError (export_check.cpp).
void check_program(const Program& p);

/// The user inputs' symbolic dimensions and their range_constraints, from the serialized
/// ExportedProgram (export_inputs.cpp).
void read_input_ranges(const nlohmann::json& program, Program& p);

/// Probe inputs against the program's input spec (count, dtype class, static dimensions,
/// symbolic ranges) and token ids against the embeddings they index, before any pass
/// (export_inputs.cpp). Throws InputError naming the probe file, the input and what was expected.
void check_user_inputs(const Program& p, const std::vector<at::Tensor>& inputs,
                       const std::vector<std::string>& sample_ids, const std::string& probe_file);

/// The batches `batch_size` cuts n samples into (the first, and a smaller last one) against the
/// ranges of the user inputs' symbolic dimension 0, as PyTorch checks them when the program runs;
/// before any pass. Throws InputError naming the probe file, the input, the batch, the range and
/// the --batch-size values that fit (export_inputs.cpp).
void check_batches(const Program& p, int64_t n, int64_t batch_size, const std::string& probe_file);

/// The embeddings whose indices the program computes from a user input (ids + offset, RoBERTa's
/// position ids): said, as the check before the pass cannot reach them (export_inputs.cpp).
std::vector<std::string> unchecked_embeddings(const Program& p);

/// The mode-driven flags: marks each node's train_flag where eager model.train()/eval() would
/// change the flag (BatchNorm modules with running statistics, Dropout modules, the flag equal
/// to the export-time mode) and sets exported_train (export_mode.cpp).
void mark_mode_flags(Program& p);

/// The note for a run in train (or eval) mode of a program exported in the other mode; "" when none.
std::string mode_warning(const Program& p, bool train);

/// Arity of the symbolic operation a SymOp target names (torch.sym_float, _operator.mul,
/// math.ceil, ...); -1 when the interpreter does not compute it (export_sym.cpp).
int sym_arity(const std::string& target);

/// A symbolic operation computed with Python semantics on ints, floats and bools
/// (export_sym.cpp). Throws std::domain_error on division by zero.
c10::IValue sym_eval(const std::string& target, const std::vector<c10::IValue>& args);

/// Reads a torch.export.save archive. Throws InputError naming the file and what was expected.
/// `owner`, when given, owns `bytes`: weights stored uncompressed are then tensors over those
/// bytes (kept alive by them) instead of copies, so that loading holds the file once, not twice.
Program read_program(const std::vector<char>& bytes, const std::string& file,
                     std::shared_ptr<std::vector<char>> owner = nullptr);

/// Tied parameters (one record and view in the archive) made one tensor (export_weights.cpp).
void tie_parameters(Program& p, const std::map<std::string, std::string>& views);
/// Program-level notes: decomposed core-ATen ops, export-time dtype assertions (export_check.cpp).
void flag_decomposed(Program& p);
void note_dtype_assertions(Program& p);

/// Python's name of a floating dtype (torch.float64, torch.bfloat16 ...; export_model.cpp).
std::string torch_name(at::ScalarType t);

}  // namespace ampscope::detail::pt2
