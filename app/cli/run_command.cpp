// SPDX-License-Identifier: MIT
// ampscope-cli run: the FP32 reference pass plus AMP passes, compared against fixed criteria.
#include "run_command.h"

#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "ampscope/engine/errors.h"
#include "ampscope/storage/json_io.h"
#include "ampscope/storage/store.h"
#include "checks.h"
#include "summary.h"

namespace ampscope::cli {

namespace {

struct RunOptions {
    RunSpec spec;
    std::string precisions = "fp16,bf16", mode = "eval", criteria_file, json_path, db, tie_rule, quality_metric, output;
    std::optional<double> atol, rtol, tie_tol, qthresh;
    std::optional<int> max_flips;
    bool allow_nonfinite = false, layers = false, outputs = false, no_inspect = false, quiet = false;
    bool no_db = false, init_db = false;
};

/// The criteria flags; they override the keys of a --criteria file.
void add_criteria_options(CLI::App* run, RunOptions& o) {
    run->add_option("--criteria", o.criteria_file, "criteria JSON file; flags below override its keys");
    run->add_option("--atol", o.atol, "absolute tolerance per score (default 1e-3)")->check(checks::Number(0));
    run->add_option("--rtol", o.rtol, "relative tolerance per score (default 1e-2)")->check(checks::Number(0));
    run->add_option("--tie-tolerance", o.tie_tol, "scores within this of the maximum count as tied (default 0)")->check(checks::Number(0));
    run->add_option("--tie-rule", o.tie_rule, "lowest-index | abstain")->check(CLI::IsMember({"lowest-index", "abstain"}));
    run->add_option("--max-flips", o.max_flips, "decision flips allowed (default 0)")->check(checks::Integer(0));
    run->add_option("--quality-metric", o.quality_metric, "accuracy | mse | max_abs_error")
        ->check(CLI::IsMember({"accuracy", "mse", "max_abs_error"}));
    run->add_option("--quality-threshold", o.qthresh, "accuracy: at least this; mse, max_abs_error: at most this")->check(checks::Finite());
    run->add_flag("--allow-nonfinite", o.allow_nonfinite, "do not reject a pass for non-finite outputs");
}

void add_run_options(CLI::App* run, RunOptions& o) {
    auto& spec = o.spec;
    run->add_option("--model", spec.model, "demo:NAME (transformer, mlp, regressor), a TorchScript file or a torch.export program (.pt2)")->required();
    run->add_option("--output", o.output, "the output compared, for torch.export programs with several outputs: a name from its output tree (e.g. cls) or an index; default: the first tensor output");
    run->add_option("--probes", spec.probes, "'demo' (the demo model's built-in set) or a .pt / .csv probe file")->required();
    run->add_option("--precision", o.precisions, "AMP passes to run, comma-separated; the FP32 reference always runs")
        ->default_str("fp16,bf16");
    run->add_option("--device", spec.device, "cpu | cuda | cuda:N (default: cuda when available, else cpu)")->check(checks::Device());
    run->add_option("--mode", o.mode, "eval | train, fixed for every pass")->check(CLI::IsMember({"eval", "train"}))->default_str("eval");
    add_criteria_options(run, o);
    run->add_option("--keep-fp32", spec.keep_fp32, "module-path glob run without autocast (repeatable), e.g. 'blocks.1.*'");
    run->add_option("--seed", spec.seed, "seed for weights of demo models, demo probes and every pass's RNG")->default_val(0)->check(checks::Seed());
    run->add_option("--batch-size", spec.batch_size, "samples per forward")->default_val(64)->check(checks::Integer(1));
    run->add_option("--db", o.db, kDbHelp)->check(checks::NonEmptyPath());
    run->add_flag("--init-db", o.init_db, "add ampscope's tables to an existing SQLite file of another application");
    run->add_flag("--no-db", o.no_db, "do not record the run");
    run->add_option("--json", o.json_path, "write the run result JSON to PATH, or '-' for stdout");
    run->add_flag("--layers", o.layers, "print the per-layer table (module, op, dtype, absmax, headroom, overflow)");
    run->add_flag("--outputs", o.outputs, "include per-sample scores and decisions in the JSON");
    run->add_flag("--no-inspect", o.no_inspect, "skip per-op statistics (faster; no origins)");
    run->add_flag("-q,--quiet", o.quiet, "no terminal summary");
}

std::vector<Precision> parse_amp_precisions(const std::string& list) {
    std::vector<Precision> out;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        auto p = parse_precision(item);
        if (!p) throw InputError("--precision", "", "unknown precision '" + item + "'; expected fp16 and/or bf16");
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
    return c;
}

int run_run(RunOptions& o) {
    auto& spec = o.spec;
    spec.precisions = parse_amp_precisions(o.precisions);
    spec.mode = o.mode == "train" ? Mode::Train : Mode::Eval;
    spec.criteria = criteria_of(o);
    spec.inspect = !o.no_inspect;
    TerminalProgress progress(isatty(STDERR_FILENO) && !o.quiet);
    const Recording<storage::RunWriter> rec(o.no_db, o.db, o.init_db, &storage::RunWriter::run_failed);
    RunResult r = run_comparison(spec, rec.writer(), &progress);
    if (interrupted()) throw Cancelled();
    progress.clear();
    const bool summary = !o.quiet && o.json_path != "-";
    if (rec.store() && summary) std::cout << "recorded as run " << r.run_id << " in " << rec.store()->path() << "\n";
    if (summary) print_run_summary(std::cout, r, o.layers, isatty(STDOUT_FILENO));
    if (!o.json_path.empty()) write_output(o.json_path, json::run_to_json(r, o.outputs));
    return r.verdict == Verdict::Accepted ? kOk : kRejected;
}

}  // namespace

Command add_run_command(CLI::App& app) {
    return subcommand<RunOptions>(app, "run", "FP32 reference pass plus AMP passes, compared against fixed criteria",
                                  add_run_options, run_run);
}

}  // namespace ampscope::cli
