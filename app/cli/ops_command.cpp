// SPDX-License-Identifier: MIT
// ampscope-cli backend and ops: what would run, and which operators a model needs.
#include "ops_command.h"

#include <iostream>
#include <memory>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/train.h"
#include "ampscope/engine/text.h"
#include "ampscope/storage/json_io.h"
#include "checks.h"
#include "summary.h"

namespace ampscope::cli {

namespace {

struct BackendOptions {
    bool json = false;
    std::string device;
};

void add_backend_options(CLI::App* backend, BackendOptions& o) {
    backend->add_flag("--json", o.json, "print JSON");
    backend->add_option("--device", o.device, "cpu | cuda | cuda:N (default: the default device)")
        ->check(checks::Device());
}

int run_backend(BackendOptions& o) {
    const auto b = backend_report(o.device);
    if (o.json)
        std::cout << json::backend_to_json(b) << std::endl;
    else
        print_backend(std::cout, b);
    return kOk;
}

struct OpsOptions {
    RunSpec spec;
    CLI::Option* probes = nullptr;  ///< to tell --probes given from its default
    std::string precision = "fp16";
    bool json = false;
};

void add_ops_options(CLI::App* ops, OpsOptions& o) {
    ops->add_option("--model", o.spec.model, "demo:NAME, a TorchScript file or a torch.export program (.pt2)")
        ->required();
    add_output_option(ops, o.spec.criteria.output);
    o.probes = ops->add_option("--probes", o.spec.probes,
                               "probe file whose first sample drives the forward (default: demo, for demo models)")
                   ->default_str("demo")
                   ->check(checks::NonEmptyPath());
    ops->add_option("--device", o.spec.device, "cpu | cuda | cuda:N")->check(checks::Device());
    ops->add_option("--precision", o.precision, "fp16 | bf16")->default_str("fp16");
    ops->add_option("--seed", o.spec.seed, "seed for demo weights")->default_val(0)->check(checks::Seed());
    ops->add_flag("--json", o.json, "print JSON");
}

int run_ops(OpsOptions& o) {
    auto p = parse_precision(o.precision);
    if (!p || (*p != Precision::Fp16 && *p != Precision::Bf16))
        throw InputError("--precision", "",
                         "'" + o.precision + "'; expected fp16 or bf16" +
                             (p && is_fp8(*p) ? " (ops lists autocast's per-op policy and the kernels for its dtype; " +
                                                    to_string(*p) + " is simulated by run and advise" +
                                                    std::string(replays(*p)  ? ", train and replay"
                                                                : trains(*p) ? ", train"
                                                                             : "") +
                                                    ", where the linear layers are the only ops it changes)"
                                              : ""));
    o.spec.precisions = {*p};
    if (!o.probes->count() && o.spec.model.rfind("demo:", 0) != 0)
        throw InputError("--probes", "",
                         "missing: " + clip_echo(o.spec.model) +
                             " is not a demo model, so there are no built-in probes; give a .pt or .csv probe file "
                             "whose first sample "
                             "drives the forward");
    const auto rep = op_coverage(o.spec);
    if (o.json)
        std::cout << json::ops_to_json(rep) << std::endl;
    else
        print_ops(std::cout, rep);
    int failing = 0;
    for (const auto& op : rep.ops) failing += !op.kernel_ok;
    return failing ? kRejected : kOk;
}

}  // namespace

Command add_backend_command(CLI::App& app) {
    return subcommand<BackendOptions>(app, "backend",
                                      "what hardware and libraries would run: CPU/CUDA/HIP, versions, bf16 support",
                                      add_backend_options, run_backend);
}

Command add_ops_command(CLI::App& app) {
    return subcommand<OpsOptions>(app, "ops",
                                  "operator coverage: the ops a model runs, which autocast keeps in FP32, "
                                  "and which have no kernel for the target device and dtype",
                                  add_ops_options, run_ops);
}

}  // namespace ampscope::cli
