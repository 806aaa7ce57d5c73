// SPDX-License-Identifier: MIT
// The options that fix a run, shared by `run` and `advise`.
#include "run_options.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/vocabulary.h"
#include "ampscope/storage/input_file.h"
#include "ampscope/storage/json_io.h"
#include "checks.h"
#include "common.h"

namespace ampscope::cli {

namespace {

/// Sequence outputs [N, T, V] (language models): judged per unmasked position.
void add_sequence_options(CLI::App* run, RunOptions& o) {
    run->add_option("--max-flip-rate", o.max_flip_rate,
                    "sequence outputs: fraction of positions whose top-1 token may change (default 0)")
        ->check(checks::Number(0, 1));
    run->add_option("--max-mean-kld", o.max_mean_kld,
                    "sequence outputs: largest mean KL(ref || amp) per position (default 1e-3)")
        ->check(checks::Number(0));
    run->add_option("--min-same-top", o.min_same_top,
                    "sequence outputs: smallest fraction of positions with the same top-1 (default 0.99)")
        ->check(checks::Number(0, 1));
    run->add_option(
        "--mask-input", o.mask_input,
        "sequence outputs: the input [N, T] whose zeros mark positions not compared (default: attention_mask when the "
        "model has it)");
    run->add_option("--sequence-axis", o.sequence_axis,
                    "sequence outputs: the output axis of positions when not 1 ([N, T, V])")
        ->check(checks::Integer(1, 2));
}

/// The criteria flags; they override the keys of a --criteria file.
void add_criteria_options(CLI::App* run, RunOptions& o) {
    run->add_option("--criteria", o.criteria_file, "criteria JSON file; flags below override its keys")
        ->check(checks::NonEmptyPath());
    run->add_option("--atol", o.atol, "absolute tolerance per score (default 1e-3)")->check(checks::Number(0));
    run->add_option("--rtol", o.rtol, "relative tolerance per score (default 1e-2)")->check(checks::Number(0));
    run->add_option("--tie-tolerance", o.tie_tol, "scores within this of the maximum count as tied (default 0)")
        ->check(checks::Number(0));
    run->add_option("--tie-rule", o.tie_rule, "lowest-index | abstain")
        ->transform(CLI::IsMember({"lowest-index", "abstain"}, CLI::ignore_case));
    run->add_option("--max-flips", o.max_flips, "decision flips allowed (default 0)")->check(checks::Integer(0));
    run->add_option("--quality-metric", o.quality_metric,
                    "accuracy | mse | max_abs_error | perplexity | token_accuracy")
        ->transform(
            CLI::IsMember({"accuracy", "mse", "max_abs_error", "perplexity", "token_accuracy"}, CLI::ignore_case));
    run->add_option("--quality-threshold", o.qthresh,
                    "accuracy, token_accuracy: at least this; mse, max_abs_error, perplexity: at most this")
        ->check(checks::Finite());
    run->add_flag("--allow-nonfinite", o.allow_nonfinite, "do not reject a pass for non-finite outputs");
    add_sequence_options(run, o);
}

}  // namespace

void add_spec_options(CLI::App* run, RunOptions& o, bool model_required) {
    auto& spec = o.spec;
    auto* model =
        run->add_option("--model", spec.model,
                        "demo:NAME (transformer, mlp, regressor), a TorchScript file or a torch.export program (.pt2)");
    if (model_required) model->required();
    add_output_option(run, o.output);
    auto* probes =
        run->add_option("--probes", spec.probes, "'demo' (the demo model's built-in set) or a .pt / .csv probe file");
    if (model_required) probes->required();
    run->add_option("--precision", o.precisions,
                    "AMP passes to run, comma-separated (fp16, bf16, fp8, fp8-rowwise, mxfp8, nvfp4, fp8-delayed); "
                    "the FP32 reference always runs")
        ->default_str("fp16,bf16");
    run->add_option("--device", spec.device, "cpu | cuda | cuda:N (default: cuda when available, else cpu)")
        ->check(checks::Device());
    run->add_option("--mode", o.mode, "eval | train, fixed for every pass")
        ->transform(CLI::IsMember({"eval", "train"}, CLI::ignore_case))
        ->default_str("eval");
    add_criteria_options(run, o);
    run->add_option("--seed", spec.seed, "seed for weights of demo models, demo probes and every pass's RNG")
        ->default_val(0)
        ->check(checks::Seed());
    run->add_option("--batch-size", spec.batch_size, "samples per forward")->default_val(64)->check(checks::Integer(1));
    run->add_option("--db", o.db, kDbHelp)->check(checks::NonEmptyPath());
    run->add_flag("--init-db", o.init_db, "add ampscope's tables to an existing SQLite file of another application");
    run->add_flag("--no-db", o.no_db, "do not record the run");
    add_mx_scaling_option(run, o.mx_scaling, "floor");
    run->add_flag("--fp8-all-gemms", spec.fp8_all_gemms,
                  "FP8 passes (and --fp8-what-if) also quantize the model's own matrix products (addmm, mm, bmm, "
                  "baddbmm outside linear layers: Conv1D, attention), each operand as the recipe quantizes a "
                  "linear's, and in fp8 / fp8-delayed the convolutions (per-tensor scales); default: linear layers "
                  "only, as torchao and Transformer Engine");
}

void add_run_options(CLI::App* run, RunOptions& o) {
    add_spec_options(run, o, true);
    run->add_option("--keep-fp32", o.spec.keep_fp32,
                    "module-path glob run without autocast (repeatable), e.g. 'blocks.1.*'");
    run->add_flag("--fp8-what-if", o.spec.fp8_what_if,
                  "the bf16 pass also counts, on its linear layers' operands, what fp8, fp8-rowwise, mxfp8 and "
                  "nvfp4 would quantize (its outputs unchanged)");
    run->add_option("--fp8-real-gemm", o.fp8_real_gemm,
                    "fp8 / fp8-rowwise passes also run with real FP8 GEMMs (torch._scaled_mm), beside the simulated "
                    "ones: auto (on a CUDA GPU with compute capability >= 8.9), on (wherever PyTorch has the "
                    "kernel; the CPU's takes tensorwise scales only), off")
        ->transform(CLI::IsMember(real_gemm_names(), CLI::ignore_case))
        ->default_val("auto");
    run->add_option("--keep-bf16", o.spec.keep_bf16,
                    "FP8 passes: module-path glob whose linear layers stay in BF16, not quantized (repeatable)");
    add_region_file_options(run, o.regions);
    run->add_option("--json", o.json_path, "write the run result JSON to PATH, or '-' for stdout")
        ->check(checks::NonEmptyPath());
    run->add_flag("--force", o.force, kForceHelp);
    add_fp8_delayed_options(run, o.fp8_delayed, "batches");
    run->add_flag("--layers", o.layers, "print the per-layer table (module, op, dtype, absmax, headroom, overflow)");
    run->add_flag("--outputs", o.outputs, "include per-sample scores and decisions in the JSON");
    run->add_flag("--no-inspect", o.no_inspect, "skip per-op statistics (faster; no origins)");
    run->add_flag("-q,--quiet", o.quiet, "no terminal summary");
    run->add_option("--batch-timeout", o.batch_timeout,
                    "under torchrun: seconds one batch may run before its rank counts as hung and every rank stops")
        ->default_val(1800)
        ->check(checks::Number(1));
    run->add_option("--lost-after", o.lost_after,
                    "under torchrun: seconds without a rank's heartbeat before it counts as lost and every rank stops")
        ->default_val(15)
        ->check(checks::Number(1));
}

std::vector<storage::ProtectedFile> run_inputs(const RunOptions& o) {
    auto files = region_file_inputs(o.regions);
    files.insert(files.begin(), {{"the model (--model)", o.spec.model},
                                 {"the probe file (--probes)", o.spec.probes},
                                 {"the criteria file (--criteria)", o.criteria_file}});
    return protected_inputs(o.no_db, o.db, files);
}

void add_region_file_options(CLI::App* cmd, RegionFiles& f) {
    cmd->add_option(
           "--keep-fp32-file", f.keep_fp32_file,
           "FP32 regions from a file: the JSON `ampscope-cli advise` writes (its keep_fp32 list) or one glob a line")
        ->check(checks::NonEmptyPath());
    cmd->add_option("--keep-bf16-file", f.keep_bf16_file,
                    "FP8: modules kept in BF16 from a file: the JSON `ampscope-cli advise --precision fp8...` "
                    "writes (its keep_bf16 list) or one glob a line")
        ->check(checks::NonEmptyPath());
    cmd->add_flag("--allow-unverified", f.allow_unverified,
                  "accept a --keep-fp32-file or --keep-bf16-file whose advise outcome is 'unverified' (the set's "
                  "verifying run was rejected)");
}

void apply_region_files(RegionFiles& f, std::vector<std::string>& keep_fp32, std::vector<std::string>& keep_bf16) {
    f.keep_fp32_flags = keep_fp32.size();
    if (!f.keep_fp32_file.empty()) {
        const auto regions = read_keep_fp32_file(f.keep_fp32_file, f.allow_unverified);
        keep_fp32.insert(keep_fp32.end(), regions.begin(), regions.end());
    }
    f.keep_bf16_flags = keep_bf16.size();
    if (!f.keep_bf16_file.empty()) {
        const auto modules = storage::read_regions_file(f.keep_bf16_file, "--keep-bf16-file", f.allow_unverified,
                                                        storage::RegionsList::KeepBf16);
        keep_bf16.insert(keep_bf16.end(), modules.begin(), modules.end());
    }
}

void rethrow_region_named(const RegionFiles& f) {
    try {
        throw;
    } catch (const InputError& e) {
        // the lists hold the flags' globs, then the file's (apply_region_files)
        if (e.file().empty() && e.field().rfind("keep_fp32[", 0) == 0 &&
            field_index(e.field()) >= long(f.keep_fp32_flags))
            throw InputError(f.keep_fp32_file, "keep_fp32", e.expected(), e.remedies());
        if (e.file().empty() && e.field().rfind("keep_bf16[", 0) == 0 &&
            field_index(e.field()) >= long(f.keep_bf16_flags))
            throw InputError(f.keep_bf16_file, "keep_bf16", e.expected(), e.remedies());
        // a whole list refused (no module scopes, no FP8 pass) where only the file gave it
        if (e.file().empty() && e.field() == "keep_fp32" && f.keep_fp32_flags == 0 && !f.keep_fp32_file.empty())
            throw InputError(f.keep_fp32_file, "keep_fp32", e.expected(), e.remedies());
        if (e.file().empty() && e.field() == "keep_bf16" && f.keep_bf16_flags == 0 && !f.keep_bf16_file.empty())
            throw InputError(f.keep_bf16_file, "keep_bf16", e.expected(), e.remedies());
        throw;
    }
}

std::vector<std::pair<std::string, std::string>> region_file_inputs(const RegionFiles& f) {
    return {{"the FP32-region file (--keep-fp32-file)", f.keep_fp32_file},
            {"the BF16 module file (--keep-bf16-file)", f.keep_bf16_file}};
}

void add_fp8_delayed_options(CLI::App* cmd, DelayedFlags& f, const char* history_unit) {
    cmd->add_option("--fp8-amax-history", f.amax_history,
                    std::string("fp8-delayed: ") + history_unit +
                        " of amax history each scale comes from (Transformer Engine's amax_history_len; default 1024)")
        ->check(checks::Integer(1, kMaxAmaxHistory));
    cmd->add_option("--fp8-margin", f.margin,
                    "fp8-delayed: the scale is 448 / max(amax history) / 2^M (Transformer Engine's margin; default 0)")
        ->check(checks::Integer(0, kMaxFp8Margin));
}

void apply_fp8_delayed_options(const DelayedFlags& f, bool delayed, int& history, int& margin) {
    const std::pair<const char*, const std::optional<int>*> flags[] = {{"--fp8-amax-history", &f.amax_history},
                                                                       {"--fp8-margin", &f.margin}};
    for (const auto& [flag, value] : flags)
        if (*value && !delayed)
            throw InputError(flag, "",
                             "applies to --precision fp8-delayed only (delayed scaling); this run has no such pass");
    if (f.amax_history) history = *f.amax_history;
    if (f.margin) margin = *f.margin;
}

void add_mx_scaling_option(CLI::App* cmd, std::optional<std::string>& flag, const char* default_name) {
    cmd->add_option("--mx-scaling", flag,
                    std::string("mxfp8: each block's E8M0 scale, floor (the OCP MX specification's) or rceil "
                                "(2^ceil(log2(amax / 448)): torchao's MXFP8Linear and its training recipes); "
                                "default ") +
                        default_name)
        ->transform(CLI::IsMember(mx_scaling_names(), CLI::ignore_case));
}

void apply_mx_scaling_option(const std::optional<std::string>& flag, bool mxfp8, MxScaling& into) {
    if (!flag) return;
    if (!mxfp8)
        throw InputError("--mx-scaling", "",
                         "applies to --precision mxfp8 only (MX block scales; in `run` also --fp8-what-if)");
    into = parse_mx_scaling(*flag, "--mx-scaling");
}

std::vector<Precision> parse_amp_precisions(const std::string& list) {
    std::vector<Precision> out;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        auto p = parse_precision(item);
        if (!p)
            throw InputError("--precision", "",
                             "unknown precision '" + item +
                                 "'; expected fp16, bf16, fp8, fp8-rowwise, mxfp8, nvfp4 and/or fp8-delayed");
        if (std::find(out.begin(), out.end(), *p) != out.end())
            throw InputError("--precision", "", "'" + item + "' given twice; expected each precision once");
        out.push_back(*p);
    }
    return out;
}

/// The criteria file, then the flags over it.
Criteria criteria_of(const RunOptions& o) {
    Criteria c;
    if (!o.criteria_file.empty()) c = json::parse_criteria(read_file(o.criteria_file, "--criteria"), o.criteria_file);
    if (o.atol) c.atol = *o.atol;
    if (o.rtol) c.rtol = *o.rtol;
    if (o.tie_tol) c.tie_tolerance = *o.tie_tol;
    if (!o.tie_rule.empty()) c.tie_rule = *parse_tie_rule(o.tie_rule);
    if (o.max_flips) c.max_flips = *o.max_flips;
    if (!o.quality_metric.empty()) {
        c.quality_metric = *parse_quality_metric(o.quality_metric);
        c.quality_metric_set = true;
    }
    if (o.qthresh) {
        c.quality_threshold = *o.qthresh;
        c.quality_threshold_set = true;
    }
    if (o.allow_nonfinite) c.allow_nonfinite = true;
    if (!o.output.empty()) c.output = o.output;
    if (o.max_flip_rate) c.max_flip_rate = *o.max_flip_rate;
    if (o.max_mean_kld) c.max_mean_kld = *o.max_mean_kld;
    if (o.min_same_top) c.min_same_top = *o.min_same_top;
    if (!o.mask_input.empty()) c.mask_input = o.mask_input;
    if (o.sequence_axis) c.sequence_axis = *o.sequence_axis;
    return c;
}

void finish_spec(RunOptions& o) {
    auto& spec = o.spec;
    spec.precisions = parse_amp_precisions(o.precisions);
    spec.mode = o.mode == "train" ? Mode::Train : Mode::Eval;
    spec.criteria = criteria_of(o);
    spec.inspect = !o.no_inspect;
    apply_fp8_delayed_options(o.fp8_delayed, spec.has_pass(Precision::Fp8Delayed), spec.fp8_amax_history,
                              spec.fp8_margin);
    spec.fp8_real_gemm = parse_real_gemm(o.fp8_real_gemm, "fp8_real_gemm");
    apply_mx_scaling_option(o.mx_scaling, spec.has_pass(Precision::Mxfp8) || spec.fp8_what_if, spec.mx_scaling);
    apply_region_files(o.regions, spec.keep_fp32, spec.keep_bf16);
}

std::vector<std::string> read_keep_fp32_file(const std::string& path, bool allow_unverified) {
    return storage::read_regions_file(path, "--keep-fp32-file", allow_unverified);
}

}  // namespace ampscope::cli
