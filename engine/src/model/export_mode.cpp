// SPDX-License-Identifier: MIT
// Train and eval mode of a torch.export program, as eager model.train() / model.eval() would
// change it and nothing else. A program records its ops' mode flags as literals; the only flags
// eager's mode switch changes are those its modules compute from `self.training`: BatchNorm with
// running statistics (`training`) and the Dropout modules (`train`). They are found by the
// node's module class (nn_module_stack) and by their value equal to the export-time mode;
// functional calls with literal flags (F.batch_norm(training=False), F.dropout(training=True))
// and BatchNorm without running statistics (always batch statistics) keep theirs.
#include <set>
#include <string>
#include <vector>

#include "model/export_program.h"

namespace ampscope::detail::pt2 {
namespace {

bool starts_with(const std::string& s, const char* prefix) {
    return s.rfind(prefix, 0) == 0;
}

bool batchnorm_module(const Node& n) {
    return starts_with(n.module_type, "torch.nn.modules.batchnorm.");
}

bool dropout_module(const Node& n) {
    return starts_with(n.module_type, "torch.nn.modules.dropout.");
}

/// The index of the node's literal 'training' / 'train' bool argument, or -1.
int flag_index(const Node& n) {
    if (n.kind != Node::Kind::Op || !n.op) return -1;
    const auto& args = n.op->schema().arguments();
    for (size_t i = 0; i < args.size() && i < n.args.size(); ++i) {
        const auto& sa = args[i];
        if (sa.name() != "training" && sa.name() != "train") continue;
        const auto& a = n.args[i];
        if (a && a->kind == Arg::Kind::Constant && a->constant.isBool()) return int(i);
    }
    return -1;
}

/// Whether the node's 'running_mean' argument is a tensor (a BatchNorm tracking running statistics).
bool has_running_stats(const Node& n) {
    const auto& args = n.op->schema().arguments();
    for (size_t i = 0; i < args.size() && i < n.args.size(); ++i)
        if (args[i].name() == "running_mean") return n.args[i] && n.args[i]->kind == Arg::Kind::Tensor;
    return false;
}

/// Whether n adds to a BatchNorm's num_batches_tracked buffer (add_ in the training IR, add
/// with a buffer mutation after functionalisation): its first argument is that buffer.
bool counts_batches(const Node& n, const std::set<std::string>& counters) {
    if (!batchnorm_module(n) || (n.target != "torch.ops.aten.add_.Tensor" && n.target != "torch.ops.aten.add.Tensor"))
        return false;
    return !n.args.empty() && n.args[0] && n.args[0]->kind == Arg::Kind::Tensor && counters.count(n.args[0]->name);
}

/// The graph input names of BatchNorm counters (buffers named num_batches_tracked).
std::set<std::string> batch_counters(const Program& p) {
    std::set<std::string> names;
    const std::string leaf = "num_batches_tracked";
    for (const auto& in : p.inputs)
        if (in.kind == InputSpec::Kind::Buffer && in.target.size() >= leaf.size() &&
            in.target.compare(in.target.size() - leaf.size(), leaf.size(), leaf) == 0 &&
            (in.target.size() == leaf.size() || in.target[in.target.size() - leaf.size() - 1] == '.'))
            names.insert(in.arg);
    return names;
}

struct Flag {
    Node* node;
    int index;
    bool value;
};

}  // namespace

void mark_mode_flags(Program& p) {
    std::vector<Flag> flags;
    int eval_only = 0;  // decomposed BatchNorm in eval mode: no flag, but evidence of the mode
    for (auto& g : p.graphs)
        for (auto& n : g.nodes) {
            n.train_flag = -1;
            if (n.kind != Node::Kind::Op) continue;
            if (batchnorm_module(n) && n.target == "torch.ops.aten._native_batch_norm_legit_no_training.default")
                ++eval_only;
            const int i = flag_index(n);
            if (i < 0) continue;
            if ((batchnorm_module(n) && has_running_stats(n)) || dropout_module(n))
                flags.push_back({&n, i, n.args[size_t(i)]->constant.toBool()});
        }
    int train = 0, eval = eval_only;
    for (const auto& f : flags) (f.value ? train : eval)++;
    p.exported_train.reset();
    if (train == eval) {
        if (train > 0)
            p.warnings.push_back(
                "the program's BatchNorm and Dropout modules were exported in different modes (" +
                std::to_string(train) + " in train mode, " + std::to_string(eval) +
                " in eval mode): their flags are kept as exported, the run's mode does not change them");
        return;
    }
    p.exported_train = train > eval;
    for (const auto& f : flags)
        if (f.value == *p.exported_train) f.node->train_flag = f.index;
    if (!*p.exported_train) return;
    const auto counters = batch_counters(p);
    for (auto& g : p.graphs)
        for (auto& n : g.nodes) n.counts_batches = n.kind == Node::Kind::Op && counts_batches(n, counters);
}

std::string mode_warning(const Program& p, bool train) {
    if (!p.exported_train || *p.exported_train == train) return "";
    const std::string exported = *p.exported_train ? "train" : "eval", run = train ? "train" : "eval";
    return "the program was exported in " + exported + " mode and runs in " + run +
           " mode: BatchNorm and Dropout modules follow the run's mode as eager model." + run +
           "() would, but what Python decided from self.training at export time (drop-path, stochastic depth, "
           "any branch on the mode) is fixed in the program as it was in " +
           exported + " mode" +
           (p.decomposed ? "; a decomposed BatchNorm (_native_batch_norm_legit_no_training) cannot change its mode"
                         : "") +
           ": export in the mode you run";
}

}  // namespace ampscope::detail::pt2
