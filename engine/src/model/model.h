// SPDX-License-Identifier: MIT
#pragma once
// model/ owns the models the passes run: the built-in demo zoo (torch::nn, seeded weights),
// TorchScript files (an instrumented, inlined graph) and torch.export programs (.pt2, an ATen
// interpreter). All behind one interface, so passes, observer, training and advisor never ask
// which format ran. Modules are named with the dotted paths Python's named_modules() gives.

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ampscope/engine/run.h"
#include "ampscope/engine/types.h"
#include "precision/precision.h"

namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace ampscope::detail {

/// A model as the passes see it: forward on a batch, mode, device, named state.
class Model {
public:
    virtual ~Model() = default;
    virtual at::Tensor forward(const std::vector<at::Tensor>& inputs) = 0;
    virtual void set_train(bool train) = 0;
    virtual void to_device(const at::Device& device) = 0;
    /// Parameters and buffers in named order (for hashing and checkpoints). Tied parameters
    /// appear under each name as one tensor (state_dict() holds both keys).
    virtual std::vector<std::pair<std::string, at::Tensor>> named_state() = 0;
    /// Each parameter once (tied ones by their first name), as model.parameters() lists them.
    virtual std::vector<at::Tensor> parameters() = 0;
    /// Buffers in named_state() that are not in the module's state_dict()
    /// (register_buffer(persistent=False)): a user's checkpoint does not hold them.
    virtual std::set<std::string> non_persistent_buffers() const { return {}; }
    virtual std::vector<std::string> module_paths() = 0;
    /// Module path -> the module's class as Python names it (torch.nn.modules.normalization.LayerNorm),
    /// where the format records it (torch.export programs, TorchScript); empty when unknown.
    virtual std::map<std::string, std::string> module_types() const { return {}; }
    /// Whether FP32 regions and per-module op attribution work for this model.
    virtual bool has_module_scopes() const = 0;
    /// Said in a run in train (or eval) mode: a torch.export program exported in the other mode.
    virtual std::vector<std::string> mode_warnings(bool train) const {
        (void)train;
        return {};
    }
    /// Probe inputs against what the model declares it takes (a torch.export program: its input
    /// spec, and token ids against its embeddings), before any pass. Throws InputError naming
    /// `file`; models that declare nothing accept anything here.
    virtual void check_inputs(const std::vector<at::Tensor>& inputs, const std::vector<SampleInfo>& samples,
                              const std::string& file) const {
        (void)inputs;
        (void)samples;
        (void)file;
    }
    /// The batches `batch_size` cuts `n` probe samples into against the batch sizes the model
    /// declares it takes (a torch.export program: the ranges of its symbolic batch dimension),
    /// before any pass. Throws InputError naming `file`.
    virtual void check_batches(int64_t n, int64_t batch_size, const std::string& file) const {
        (void)n;
        (void)batch_size;
        (void)file;
    }

    ModelInfo info;
    /// Expected per-sample input shapes (without the batch dim); empty when unknown.
    std::vector<std::vector<int64_t>> input_shapes;
    int num_outputs = 0;  ///< 0 when unknown before a forward
    /// Names of forward's inputs (TorchScript schema; empty when fixed by input_shapes) and
    /// how many of them have no default.
    std::vector<std::string> input_names;
    size_t required_inputs = 0;
    /// A batch size the model must be fed (a torch.export program with a static batch
    /// dimension); 0 when any batch size runs.
    int64_t fixed_batch = 0;
    /// The output forward returns, by name (torch.export programs; "" for single-output models).
    std::string output_name;
    /// Said in every run of this model (e.g. a decomposed torch.export program).
    std::vector<std::string> warnings;
    /// Said with a pass's "index out of range": embeddings whose token ids the check before the
    /// pass could not reach ("" when it reached every one the inputs index).
    std::string unchecked_ids;
};

/// Loads "demo:NAME" (seeded weights), a TorchScript file or a torch.export program (by
/// content); `output` picks a program's output (name or index, "" = the first tensor output).
/// Throws InputError.
std::unique_ptr<Model> load_model(const std::string& source, uint64_t seed, const std::string& output = "");

/// Tensor constants baked into a TorchScript module's method graphs (a traced torch.tensor(...), a
/// frozen attribute) moved to `d`: Module::to moves parameters and buffers only, and a constant
/// left on the CPU fails the first op that meets a CUDA tensor (Python's torch.jit.load with
/// map_location places them; the engine loads onto the CPU, then moves the model).
void move_graph_constants(torch::jit::Module& m, const at::Device& d);

/// The built-in demo models ("demo:NAME" without the prefix); InputError for unknown names.
std::unique_ptr<Model> make_demo_model(const std::string& name, const std::string& source, uint64_t seed);
/// A TorchScript file (torch.jit.save output), instrumented for module scopes and FP32 regions.
std::unique_ptr<Model> load_torchscript(const std::string& path);
/// A torch.export program (.pt2, torch.export.save output) read from `bytes`; `output` names
/// the user output compared (name or index; empty: the first). Throws InputError.
/// `owner` (optional) owns `bytes`: weights then share them instead of copying (read_program).
std::unique_ptr<Model> load_export(const std::vector<char>& bytes, const std::string& file, const std::string& output,
                                   std::shared_ptr<std::vector<char>> owner = nullptr);
/// SHA-256 over names, dtypes, shapes and bytes of a model's named state.
std::string weights_hash(const std::vector<std::pair<std::string, at::Tensor>>& state);

/// check_fp32_regions (precision/precision.h) against this model's module paths.
inline void check_fp32_regions(Model& model, const std::vector<std::string>& globs) {
    check_fp32_regions(model.info, model.has_module_scopes(), globs);
}

/// check_bf16_modules (precision/precision.h) against this model's module paths.
inline void check_bf16_modules(Model& model, const std::vector<std::string>& globs,
                               const std::vector<Precision>& precisions) {
    check_bf16_modules(model.info, model.has_module_scopes(), globs, precisions);
}

}  // namespace ampscope::detail
