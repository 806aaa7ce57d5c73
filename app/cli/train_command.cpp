// SPDX-License-Identifier: MIT
// ampscope-cli train: reference FP32 and AMP training side by side, with a GradScaler port.
#include "train_command.h"

#include <unistd.h>

#include <cmath>
#include <iostream>
#include <memory>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/train.h"
#include "ampscope/engine/vocabulary.h"
#include "ampscope/storage/json_io.h"
#include "ampscope/storage/store.h"
#include "checks.h"
#include "run_options.h"
#include "summary.h"

namespace ampscope::cli {

namespace {

struct TrainOptions {
    TrainSpec spec;
    std::string precision = "fp16", loss, optimizer, lr_schedule, json, db;
    DelayedFlags fp8_delayed;               ///< --fp8-amax-history, --fp8-margin (fp8-delayed only)
    std::optional<std::string> mx_scaling;  ///< --mx-scaling (mxfp8 only)
    RegionFiles regions;                    ///< --keep-fp32-file, --keep-bf16-file, --allow-unverified
    bool no_scaler = false, no_autocast = false, quiet = false, no_guards = false, no_db = false, init_db = false,
         force = false;
};

/// The optimizer, schedule and GradScaler options.
void add_optimizer_options(CLI::App* train, TrainOptions& o) {
    auto& ts = o.spec;
    train->add_option("--optimizer", o.optimizer, "sgd | adam | adamw")
        ->transform(CLI::IsMember(ampscope::optimizer_kind_names(), CLI::ignore_case))
        ->default_val(ampscope::to_string(ampscope::OptimizerKind::Sgd));
    train->add_option("--lr", ts.lr, "learning rate")->default_val(0.05)->check(checks::Number(0));
    train->add_option("--momentum", ts.momentum, "SGD momentum")->default_val(0.0)->check(checks::Number(0));
    train->add_option("--weight-decay", ts.weight_decay, "weight decay")->default_val(0.0)->check(checks::Number(0));
    train->add_option("--lr-schedule", o.lr_schedule, "constant | cosine (over --steps)")
        ->transform(CLI::IsMember(ampscope::lr_schedule_names(), CLI::ignore_case))
        ->default_val(ampscope::to_string(ampscope::LrSchedule::Constant));
    train->add_flag("--lr-per-iteration", ts.lr_per_iteration,
                    "advance the schedule per iteration, not per effective update (warns when steps were skipped)");
    train
        ->add_option("--precision", o.precision,
                     "fp16 | bf16 | fp8 | fp8-rowwise | mxfp8 | nvfp4 | fp8-delayed (FP8 and FP4: simulated, as "
                     "torchao and Transformer Engine train)")
        ->default_val("fp16");
    add_fp8_delayed_options(train, o.fp8_delayed, "micro-batches");
    add_mx_scaling_option(train, o.mx_scaling, "rceil");
    train->add_flag("--no-scaler", o.no_scaler, "isolation: autocast only, no GradScaler");
    train->add_flag("--no-autocast", o.no_autocast, "isolation: FP32 compute with loss scaling only");
    train->add_option("--init-scale", ts.scaler.init_scale, "GradScaler init_scale")
        ->default_val(65536.0)
        ->check(checks::Number(0, INFINITY, true));
    train->add_option("--growth-factor", ts.scaler.growth_factor, "GradScaler growth_factor")
        ->default_val(2.0)
        ->check(checks::Number(1, INFINITY, true));
    train->add_option("--backoff-factor", ts.scaler.backoff_factor, "GradScaler backoff_factor")
        ->default_val(0.5)
        ->check(checks::Number(0, 1, true, true));
    train->add_option("--growth-interval", ts.scaler.growth_interval, "GradScaler growth_interval")
        ->default_val(2000)
        ->check(checks::Integer(1));
    train->add_option("--clip-grad-norm", ts.clip_grad_norm, "clip the unscaled gradient norm to this (0 = off)")
        ->default_val(0.0)
        ->check(checks::Number(0));
    train
        ->add_option("--accumulate", ts.accumulate,
                     "micro-batches per optimizer step (unscale once, after accumulating)")
        ->default_val(1)
        ->check(checks::Integer(1));
}

void add_train_options(CLI::App* train, TrainOptions& o) {
    auto& ts = o.spec;
    train
        ->add_option("--model", ts.model,
                     "demo:NAME, a TorchScript file or a torch.export program (.pt2) (its parameters are trained)")
        ->required();
    add_output_option(train, ts.output);
    train->add_option("--data", ts.data, "'demo' or a .pt/.csv file with labels or targets")->required();
    train->add_option("--steps", ts.steps, "optimizer iterations")->required()->check(checks::Integer(1));
    train->add_option("--batch-size", ts.batch_size, "samples per micro-batch, taken in file order")
        ->default_val(16)
        ->check(checks::Integer(1));
    train
        ->add_option(
            "--loss", o.loss,
            "ce | mse | lm (token labels [N, T], causal shift, -100 ignored) | model (the program returns its loss); "
            "default: ce with labels, lm with token labels, mse with targets")
        ->transform(CLI::IsMember(ampscope::loss_kind_names(), CLI::ignore_case));
    add_optimizer_options(train, o);
    train
        ->add_option("--checkpoint-every", ts.checkpoint_every,
                     "write a checkpoint every N steps (model, optimizer, scaler, RNG, counters, policy)")
        ->default_val(0)
        ->check(checks::Integer(0));
    train->add_option("--checkpoint-dir", ts.checkpoint_dir, "where checkpoints go")
        ->default_val(".")
        ->check(checks::NonEmptyPath());
    train->add_option("--resume", ts.resume, "continue from a checkpoint")->check(checks::NonEmptyPath());
    train->add_option("--keep-fp32", ts.keep_fp32, "module-path glob run without autocast (repeatable)");
    train->add_option("--keep-bf16", ts.keep_bf16,
                      "FP8 recipes: module-path glob whose linear layers stay in BF16, out of FP8 (repeatable; "
                      "torchao's module_filter_fn)");
    add_region_file_options(train, o.regions);
    train->add_flag("--fp8-weight-cache", ts.fp8_weight_cache,
                    "fp8-delayed with --accumulate: a step's later micro-batches reuse the FP8 weights its first one "
                    "cast, as Transformer Engine does given is_first_microbatch (Megatron-LM passes it)");
    train->add_flag("--fp8-all-gemms", ts.fp8_all_gemms,
                    "fp8, fp8-rowwise, mxfp8, fp8-delayed: quantize the model's own matrix products (Conv1D's addmm, "
                    "torch.matmul, bmm) too, forward and backward, and in fp8 / fp8-delayed its convolutions");
    train->add_flag("--rowwise-gw-hp", ts.rowwise_gw_hp,
                    "fp8-rowwise as torchao's recipe rowwise_with_gw_hp: the weight gradient's GEMM in high "
                    "precision, grad_input with a tensorwise weight");
    train->add_option("--seed", ts.seed, "seed for weights, data and per-step RNG")
        ->default_val(0)
        ->check(checks::Seed());
    train->add_option("--device", ts.device, "cpu | cuda | cuda:N")->check(checks::Device());
    train->add_flag("--no-guards", o.no_guards,
                    "skip the per-step finiteness checks (they synchronise with the device)");
    train->add_option("--db", o.db, kDbHelp)->check(checks::NonEmptyPath());
    train->add_flag("--init-db", o.init_db, "add ampscope's tables to an existing SQLite file of another application");
    train->add_flag("--no-db", o.no_db, "do not record the run");
    train->add_option("--json", o.json, "write the training JSON to PATH, or '-' for stdout")
        ->check(checks::NonEmptyPath());
    train->add_flag("--force", o.force, kForceHelp);
    train->add_flag("-q,--quiet", o.quiet, "no terminal summary");
}

int run_train(TrainOptions& o) {
    refuse_under_torchrun("train");
    auto& ts = o.spec;
    auto inputs = region_file_inputs(o.regions);
    inputs.insert(inputs.begin(), {{"the model (--model)", ts.model},
                                   {"the training data (--data)", ts.data},
                                   {"the checkpoint resumed from (--resume)", ts.resume}});
    check_output_path(o.json, "--json", storage::OutputKind::TrainJson, protected_inputs(o.no_db, o.db, inputs),
                      o.force);  // before any work
    auto p = parse_precision(o.precision);
    if (!p || !trains(*p))
        throw InputError("--precision", "",
                         "'" + o.precision + "'; expected " + training_precisions_listed() +
                             (p && is_fp8(*p) ? " (" + to_string(*p) + " runs with `run` and `advise` only)" : ""));
    ts.precision = *p;
    apply_fp8_delayed_options(o.fp8_delayed, ts.precision == Precision::Fp8Delayed, ts.fp8_amax_history, ts.fp8_margin);
    apply_mx_scaling_option(o.mx_scaling, ts.precision == Precision::Mxfp8, ts.mx_scaling);
    if (o.no_autocast)  // FP32 compute: no recipe runs, its settings would be recorded for nothing
        for (const auto& [given, flag] : {std::pair{o.fp8_delayed.amax_history.has_value(), "--fp8-amax-history"},
                                          std::pair{o.fp8_delayed.margin.has_value(), "--fp8-margin"},
                                          std::pair{o.mx_scaling.has_value(), "--mx-scaling"}})
            if (given)
                throw InputError(flag, "",
                                 "given with --no-autocast; expected autocast (without it the AMP side computes in "
                                 "FP32 with loss scaling only, and no FP8 recipe runs)");
    ts.loss = parse_loss_kind(o.loss);
    ts.optimizer = parse_optimizer_kind(o.optimizer);
    ts.lr_schedule = parse_lr_schedule(o.lr_schedule);
    ts.scaler.enabled = !o.no_scaler;
    ts.autocast = !o.no_autocast;
    ts.guards = !o.no_guards;
    apply_region_files(o.regions, ts.keep_fp32, ts.keep_bf16);
    TerminalProgress progress(isatty(STDERR_FILENO) && !o.quiet);
    const Recording<storage::TrainWriter> rec(o.no_db, o.db, o.init_db, &storage::TrainWriter::train_failed);
    const auto r = [&] {
        try {
            return run_training(ts, rec.writer(), &progress);
        } catch (...) {
            rethrow_region_named(o.regions);
        }
    }();
    progress.clear();
    if (!o.quiet && o.json != "-") print_train(std::cout, r, isatty(STDOUT_FILENO));
    if (!o.json.empty()) write_output(o.json, json::train_to_json(r));
    if (interrupted()) throw Cancelled();
    bool nonfinite_weights = false;
    for (const auto& st : r.steps) nonfinite_weights = nonfinite_weights || !std::isfinite(st.divergence);
    return nonfinite_weights ? kRejected : kOk;
}

}  // namespace

Command add_train_command(CLI::App& app) {
    return subcommand<TrainOptions>(app, "train",
                                    "reference FP32 and AMP training side by side, with a GradScaler port",
                                    add_train_options, run_train);
}

}  // namespace ampscope::cli
