// SPDX-License-Identifier: MIT
// ampscope-cli replay: from the user's checkpoint (weights, optimizer and GradScaler state) and
// the batch that broke their job, the FP32 reference step and the AMP step as configured, the
// first stage that produced NaN/Inf, the scale and skip decision, per-parameter departures.
#include "replay_command.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/replay.h"
#include "ampscope/engine/vocabulary.h"
#include "ampscope/storage/replay_record.h"
#include "ampscope/engine/bundle.h"
#include "checks.h"
#include "run_options.h"
#include "summary.h"

namespace ampscope::cli {

namespace {

struct ReplayOptions {
    ReplaySpec spec;
    std::string precision = "fp16", loss, optimizer, json;
    double init_scale = 0;
    int growth_interval = 0;
    bool quiet = false, no_db = false, init_db = false, force = false;
    std::string db;
    CLI::Option* clip = nullptr;  ///< --clip-grad-norm (given or not)
    CLI::Option* precision_opt = nullptr;
    CLI::Option* loss_opt = nullptr;
    std::string bundle;                     ///< replay BUNDLE: an incident bundle folder (docs/capture.md)
    std::optional<std::string> mx_scaling;  ///< --mx-scaling (mxfp8 only)
    RegionFiles regions;                    ///< --keep-fp32-file, --keep-bf16-file, --allow-unverified
    size_t bundle_fp32 = 0;                 ///< the bundle's FP32 regions, first in spec.keep_fp32
};

void add_replay_options(CLI::App* sub, ReplayOptions& o) {
    auto& s = o.spec;
    sub->add_option(
        "bundle", o.bundle,
        "an incident bundle folder written by the capture package (docs/capture.md): every setting is read from "
        "it; options given beside it override");  // checked by read_bundle: after CLI11 names any unknown option
    sub->add_option("--model", s.model,
                    "a TorchScript file or a torch.export program (.pt2) whose state_dict keys the checkpoint holds");
    sub->add_option(
        "--checkpoint", s.checkpoint,
        "torch.save state_dict, a dict with model/optimizer/scaler, a Lightning .ckpt, a Hugging Face Trainer "
        "checkpoint-N/ folder or a .safetensors file");
    sub->add_option("--batch", s.batch, "the failing batch: a .pt dict with inputs and labels or targets");
    o.loss_opt = sub->add_option("--loss", o.loss,
                                 "ce | mse | lm (shifted token cross-entropy, -100 ignored) | model (the program "
                                 "returns its loss); default: ce "
                                 "with class labels, lm with token labels [N, T], mse with targets")
                     ->transform(CLI::IsMember(ampscope::loss_kind_names(), CLI::ignore_case));
    sub->add_option("--steps", s.steps, "optimizer steps replayed on the batch")
        ->default_val(1)
        ->check(checks::Integer(1));
    o.precision_opt =
        sub->add_option(
               "--precision", o.precision,
               "fp16 | bf16 | fp8 | fp8-rowwise | mxfp8 (the job's autocast dtype or FP8 training recipe; bf16 as a "
               "remedy)")
            ->default_val("fp16");
    add_mx_scaling_option(sub, o.mx_scaling, "rceil");
    sub->add_option("--optimizer-state", s.optimizer_state,
                    "a torch.save of optimizer.state_dict() (overrides the checkpoint's)");
    sub->add_option("--scaler-state", s.scaler_state,
                    "a torch.save of GradScaler.state_dict() (overrides the checkpoint's)");
    sub->add_option("--strip-prefix", s.strip_prefix,
                    "removed from checkpoint keys that start with it (Lightning: model.)");
    sub->add_flag("--non-strict", s.non_strict,
                  "replay even when checkpoint keys do not match the model (still listed)");
    sub->add_option("--keep-fp32", s.keep_fp32, "remedy: module-path glob run without autocast (repeatable)");
    sub->add_option("--keep-bf16", s.keep_bf16,
                    "FP8 recipes: module-path glob whose linear layers stay in BF16, out of FP8 (repeatable): the "
                    "job's module_filter_fn, or a remedy");
    add_region_file_options(sub, o.regions);
    sub->add_flag("--fp8-all-gemms", s.fp8_all_gemms,
                  "FP8 recipes: the model's own matrix products (Conv1D's addmm, torch.matmul, bmm) in FP8 too, "
                  "forward and backward, and in fp8 its convolutions");
    sub->add_flag("--rowwise-gw-hp", s.rowwise_gw_hp,
                  "fp8-rowwise: the job trained with torchao's recipe rowwise_with_gw_hp (the weight gradient in "
                  "high precision)");
    sub->add_option("--init-scale", o.init_scale, "remedy: start GradScaler at this scale instead of the checkpoint's")
        ->check(checks::Number(0, INFINITY, true));
    sub->add_option("--growth-interval", o.growth_interval, "remedy: GradScaler growth_interval")
        ->check(checks::Integer(1));
    o.clip = sub->add_option("--clip-grad-norm", s.clip_grad_norm,
                             "the job's clipping of the unscaled gradient norm (a Trainer's max_grad_norm, Lightning's "
                             "gradient_clip_val), "
                             "or a remedy (0 = off)")
                 ->default_val(0.0)
                 ->check(checks::Number(0));
    sub->add_option("--optimizer", o.optimizer,
                    "sgd | adam | adamw: the optimizer where the state cannot tell (an Adam/AdamW state from PyTorch "
                    "<= 2.6 with "
                    "weight decay)")
        ->transform(CLI::IsMember(ampscope::optimizer_kind_names(), CLI::ignore_case));
    sub->add_option(
        "--param-groups", s.param_groups,
        "a JSON list per optimizer param group of its parameter names, in the optimizer's order (groups built "
        "without named_parameters())");
    sub->add_flag("--no-scaler", s.no_scaler,
                  "the job ran without GradScaler (BF16 jobs; implied for BF16 without scaler state)");
    sub->add_option("--output", s.output, "the output the loss reads, for torch.export programs with several outputs");
    sub->add_option("--device", s.device, "cpu | cuda | cuda:N")->check(checks::Device());
    sub->add_option("--json", o.json, "write the replay JSON to PATH, or '-' for stdout")
        ->check(checks::NonEmptyPath());
    sub->add_option("--db", o.db, kDbHelp)->check(checks::NonEmptyPath());
    sub->add_flag("--init-db", o.init_db, "add ampscope's tables to an existing SQLite file of another application");
    sub->add_flag("--no-db", o.no_db, "do not record the replay");
    sub->add_flag("--force", o.force, kForceHelp);
    sub->add_flag("-q,--quiet", o.quiet, "no terminal summary");
}

void print_replay(std::ostream& out, const ReplayResult& r) {
    out << "replay " << r.run_id.substr(0, 8) << "  " << safe(r.checkpoint_format) << " checkpoint, "
        << safe(r.optimizer) << ", " << to_string(r.spec.precision)
        << (r.scaler_enabled ? " with GradScaler" : " without GradScaler");
    if (r.spec.clip_grad_norm > 0) out << ", clipping the gradient norm at " << r.spec.clip_grad_norm;
    if (r.spec.precision == Precision::Mxfp8) out << " (" << to_string(r.spec.mx_scaling) << " block scales)";
    if (r.spec.rowwise_gw_hp) out << " (rowwise_with_gw_hp)";
    if (r.spec.fp8_all_gemms) out << ", every matrix product in FP8";
    if (!r.spec.keep_bf16.empty()) {
        out << ", kept in BF16 out of " << to_string(r.spec.precision) << ":";
        for (const auto& k : r.spec.keep_bf16) out << " " << safe(k);
    }
    out << "\n";
    const auto& o = r.optimizer_groups;
    if (!o.groups.empty()) {
        out << "  optimizer " << safe(o.kind) << " (" << safe(o.kind_source) << "), " << o.groups.size()
            << " param group" << (o.groups.size() > 1 ? "s" : "") << " mapped by " << safe(o.mapping) << ":";
        for (const auto& g : o.groups)
            out << " [" << g.params.size() << " params, lr " << g.lr << ", weight decay " << g.weight_decay
                << (g.fused ? ", fused" : "") << "]";
        out << "\n";
    }
    for (const auto& st : r.steps)
        out << "  step " << st.step << ": loss fp32 " << st.loss_ref << ", amp " << st.loss_amp << "; scale "
            << st.scale << (st.skipped ? " (GradScaler skips the step)" : "") << " -> " << st.scale_after << "\n";
    if (r.spec.incident) out << safe(incident_in_words(r)) << "\n";
    if (r.first_nonfinite) {
        const auto& f = *r.first_nonfinite;
        out << "first non-finite: " << to_string(f.stage) << " at step " << f.step
            << (f.module.empty() ? "" : " in " + safe(f.module)) << (f.op.empty() ? "" : ", " + safe(f.op))
            << (f.node.empty() ? "" : " (" + safe(f.node) + ")") << " [" << to_string(f.side) << "]";
        for (const auto& st : r.steps)
            if (st.step == f.step && f.side != ampscope::ReplaySide::Reference && r.scaler_enabled)
                out << (st.skipped ? "; GradScaler skips the step"
                                   : "; GradScaler does not skip the step: the optimizer applies it");
        out << "\n";
    } else {
        out << "no non-finite values in " << r.steps.size() << " replayed step(s)\n";
    }
    for (const auto& w : r.warnings) out << "warning: " << safe(w) << "\n";
}

/// What --json must never replace: the database, model, batch, state files, and the checkpoint
/// (a file, or every file of a Trainer folder and of its subfolders).
std::vector<storage::ProtectedFile> replay_inputs(const ReplayOptions& o) {
    const auto& s = o.spec;
    std::vector<std::pair<std::string, std::string>> files = {
        {"the model (--model)", s.model},
        {"the batch (--batch)", s.batch},
        {"the optimizer state (--optimizer-state)", s.optimizer_state},
        {"the scaler state (--scaler-state)", s.scaler_state},
        {"the param groups (--param-groups)", s.param_groups},
        {"the checkpoint (--checkpoint)", s.checkpoint},
        {"the incident bundle", o.bundle.empty() ? "" : o.bundle + "/incident.json"}};
    const auto regions = region_file_inputs(o.regions);
    files.insert(files.end(), regions.begin(), regions.end());
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_directory(s.checkpoint, ec))
        for (fs::recursive_directory_iterator it(s.checkpoint, ec), end; !ec && it != end; it.increment(ec))
            if (it->is_regular_file(ec))
                files.push_back({"a file of the checkpoint folder (--checkpoint)", it->path().string()});
    return protected_inputs(o.no_db, o.db, files);
}

/// replay BUNDLE: the settings incident.json records, where no option given beside it overrides them.
void apply_bundle(ReplayOptions& o) {
    auto& s = o.spec;
    const auto b = read_bundle(o.bundle);
    const auto bs = replay_spec_of(b);
    if (s.model.empty()) s.model = bs.model;
    if (s.model.empty())
        throw InputError(
            o.bundle + "/incident.json", "files.model",
            "is null: torch.export failed in the job (" + b.export_error + "); give the model with --model");
    if (s.checkpoint.empty()) s.checkpoint = bs.checkpoint;
    if (s.batch.empty()) s.batch = bs.batch;
    if (o.loss_opt->count() == 0) s.loss = bs.loss;
    if (o.precision_opt->count() == 0) o.precision = b.precision;
    s.keep_fp32.insert(s.keep_fp32.begin(), bs.keep_fp32.begin(), bs.keep_fp32.end());
    o.bundle_fp32 = bs.keep_fp32.size();
    if (!o.clip || o.clip->count() == 0) {
        s.clip_grad_norm = bs.clip_grad_norm;
        s.clip_given = true;
    }
    if (!s.optimizer_kind) {
        s.optimizer_kind = bs.optimizer_kind;
        s.optimizer_kind_from = bs.optimizer_kind_from;
    }
    s.no_scaler = s.no_scaler || bs.no_scaler;
    s.incident = bs.incident;
}

int run_replay_command(ReplayOptions& o) {
    refuse_under_torchrun("replay");
    auto& s = o.spec;
    s.loss = parse_loss_kind(o.loss);  // "" (not given): Auto, or the bundle's
    if (!o.optimizer.empty()) s.optimizer_kind = parse_optimizer_kind(o.optimizer);
    if (!o.bundle.empty()) apply_bundle(o);
    for (const auto& [v, name] :
         {std::pair{&s.model, "--model"}, {&s.checkpoint, "--checkpoint"}, {&s.batch, "--batch"}})
        if (v->empty())
            throw InputError(name, "", "missing; give it, or an incident bundle folder (replay BUNDLE) that holds it");
    check_output_path(o.json, "--json", storage::OutputKind::ReplayJson, replay_inputs(o), o.force);  // before any work
    auto p = parse_precision(o.precision);
    if (!p || !replays(*p))
        throw InputError("--precision", "",
                         "'" + o.precision + "'; expected " + precisions_listed(kReplayPrecisions) +
                             (p && trains(*p)   ? " (" + to_string(*p) + " trains with `train` only)"
                              : p && is_fp8(*p) ? " (" + to_string(*p) + " runs with `run` and `advise` only)"
                                                : ""));
    s.precision = *p;
    apply_mx_scaling_option(o.mx_scaling, s.precision == Precision::Mxfp8, s.mx_scaling);
    s.clip_given = o.clip && o.clip->count() > 0;
    if (o.init_scale > 0) s.init_scale = o.init_scale;
    if (o.growth_interval > 0) s.growth_interval = o.growth_interval;
    apply_region_files(o.regions, s.keep_fp32, s.keep_bf16);  // after the bundle's regions
    TerminalProgress progress(isatty(STDERR_FILENO) && !o.quiet);
    const auto r = [&] {
        try {
            return run_replay(s, &progress);
        } catch (const InputError& e) {  // a region of the bundle: incident.json named, not --keep-fp32
            const long i = e.file().empty() && e.field().rfind("keep_fp32[", 0) == 0 ? field_index(e.field()) : -1;
            if (i >= 0 && size_t(i) < o.bundle_fp32)
                throw InputError(o.bundle + "/incident.json", "precision.keep_fp32[" + std::to_string(i) + "]",
                                 e.expected(), e.remedies());
            rethrow_region_named(o.regions);
        } catch (...) {
            rethrow_region_named(o.regions);
        }
    }();
    progress.clear();
    if (!o.quiet && o.json != "-") print_replay(std::cout, r);
    const auto rec = storage::replay_record_of(r);  // the replay JSON is its header
    if (auto store = recording_store(o.no_db, o.db, o.init_db)) storage::record_replay(*store, rec);
    if (!o.json.empty()) write_output(o.json, rec.json);
    if (interrupted()) throw Cancelled();
    return r.first_nonfinite ? kRejected : kOk;
}

}  // namespace

Command add_replay_command(CLI::App& app) {
    return subcommand<ReplayOptions>(app, "replay",
                                     "the user's checkpoint and failing batch, replayed step by step in FP32 and AMP",
                                     add_replay_options, run_replay_command);
}

}  // namespace ampscope::cli
