// SPDX-License-Identifier: MIT
// ampscope-cli advise: which modules must stay in FP32 (the engine's advisor), verified by a
// recorded run that must be accepted, then timed against full AMP and FP32.
#include "advise_command.h"

#include <unistd.h>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <optional>

#include "ampscope/engine/advise.h"
#include "ampscope/engine/errors.h"
#include "ampscope/engine/text.h"
#include "ampscope/storage/json_io.h"
#include "ampscope/storage/store.h"
#include "checks.h"
#include "summary.h"
#include "run_options.h"

namespace ampscope::cli {

namespace {

struct AdviseOptions : RunOptions {
    std::string run, granularity = "leaf", python_path;
    bool no_bench = false;
    CLI::App* cmd = nullptr;  ///< the subcommand, to tell flags given from defaults
};

void add_advise_options(CLI::App* cmd, AdviseOptions& o) {
    cmd->add_option(
        "run", o.run,
        "a recorded run (UUID or prefix) whose model, probes, precisions and fixed criteria are advised on");
    add_spec_options(cmd, o, false);
    add_fp8_delayed_options(cmd, o.fp8_delayed, "batches");  // the passes of an fp8-delayed advice
    cmd->add_option("--granularity", o.granularity,
                    "candidate modules: leaf | block (elements of numbered containers) | a depth N")
        ->default_str("leaf");
    cmd->add_option("--json", o.json_path, "write the advice JSON to PATH (also a --keep-fp32-file), or '-' for stdout")
        ->check(checks::NonEmptyPath());
    cmd->add_option("--python", o.python_path,
                    "write a Python snippet applying the same FP32 regions to your nn.Module")
        ->check(checks::NonEmptyPath());
    cmd->add_flag("--force", o.force, kForceHelp);
    cmd->add_flag("--no-bench", o.no_bench, "do not time the verified set against full AMP and FP32");
    cmd->add_flag("-q,--quiet", o.quiet, "no terminal summary");
}

/// The spec: a recorded run's (criteria stay as fixed then), or the flags'.
AdviseSpec spec_of(AdviseOptions& o, CLI::App* cmd) {
    AdviseSpec a;
    a.granularity = parse_granularity(o.granularity);
    if (o.run.empty()) {
        if (!cmd || !cmd->count("--model") || !cmd->count("--probes"))
            throw InputError(cmd && cmd->count("--model") ? "--probes" : "--model", "",
                             "expected a recorded run (ampscope-cli advise RUN) or --model and --probes");
        finish_spec(o);
        a.run = o.spec;
        return a;
    }
    for (const char* flag : {"--model",           "--probes",       "--precision",      "--mode",
                             "--criteria",        "--atol",         "--rtol",           "--tie-tolerance",
                             "--tie-rule",        "--max-flips",    "--quality-metric", "--quality-threshold",
                             "--allow-nonfinite", "--output",       "--seed",           "--batch-size",
                             "--max-flip-rate",   "--max-mean-kld", "--min-same-top",   "--mask-input",
                             "--sequence-axis",   "--mx-scaling",   "--fp8-all-gemms",  "--fp8-amax-history",
                             "--fp8-margin"})
        if (cmd && cmd->count(flag))
            throw InputError(
                flag, "",
                "a recorded run's model, probes and criteria are fixed; give either RUN or " + std::string(flag));
    if (o.no_db) throw InputError("--no-db", "", "advising a recorded run needs its database (drop --no-db)");
    const storage::Store store(storage::default_db_path(o.db), storage::Store::Mode::ReadOnly);  // never creates one
    a = advise_spec_of(store.load_run(store.resolve(o.run)), a.granularity);  // refuses changed files
    if (!o.spec.device.empty()) a.run.device = o.spec.device;
    return a;
}

void print_advice(const AdviseResult& r, const json::AdviseRecord& rec) {
    std::cout << "advise: " << to_string(r.outcome) << ": " << safe(r.message) << "\n";
    if (!r.sensitivity.empty()) {
        std::cout << "\nsensitivity (worst first; the module alone under autocast, on the FP32 reference's inputs)\n"
                  << std::left << std::setw(40) << "module" << std::setw(6) << "prec" << std::right << std::setw(10)
                  << "SQNR dB" << std::setw(12) << "rel error" << std::setw(10) << "overflow" << std::setw(11)
                  << "underflow"
                  << "\n";
        for (size_t i = 0; i < r.sensitivity.size() && i < 15; ++i) {
            const auto& s = r.sensitivity[i];
            std::cout << std::left << std::setw(40) << safe(s.module) << std::setw(6) << to_string(s.precision)
                      << std::right << std::setw(10) << std::fixed << std::setprecision(1) << s.sqnr_db << std::setw(12)
                      << std::scientific << std::setprecision(2) << s.rel_error << std::setw(10) << s.overflow
                      << std::setw(11) << s.underflow << (s.origin ? "  origin" : "") << "\n"
                      << std::defaultfloat;
        }
    }
    if (!r.keep_fp32.empty()) {
        const std::string kept = r.kept_in == Precision::Bf16 ? "BF16" : "FP32";
        std::cout << (r.outcome == AdviseResult::Outcome::Unverified ? "\nthe search's set (unverified, not advice):\n"
                                                                     : "\nkeep in " + kept + ":\n");
        for (const auto& x : r.reasons)
            std::cout << "  " << std::left << std::setw(38) << safe(x.module) << safe(x.why) << "  (" << safe(x.detail)
                      << ")\n";
        std::cout << std::fixed << std::setprecision(1) << "left in " << kept << ": " << 100 * r.fp32_share_ops
                  << "% of ops, " << 100 * r.fp32_share_flops << "% of FLOPs\n"
                  << std::defaultfloat;
    }
    std::cout << "search: " << r.evaluations << " candidate sets checked, " << r.passes_used << " passes in all\n";
    if (!rec.verified_run.empty())
        std::cout << (r.outcome == AdviseResult::Outcome::Unverified ? "verifying run " : "verified by run ")
                  << rec.verified_run << ": " << rec.verified_verdict << "\n";
    if (rec.with_set && rec.full_amp)
        for (const auto& f : rec.with_set->figures) {
            if (f.precision == Precision::Fp32) continue;
            for (const auto& g : rec.full_amp->figures)
                if (g.precision == f.precision)
                    std::cout << to_string(f.precision) << ": " << f.median_ms << " ms with the set, " << g.median_ms
                              << " ms full AMP, " << rec.full_amp->figures[0].median_ms << " ms FP32\n";
        }
    for (const auto& w : r.warnings) std::cout << "warning: " << safe(w) << "\n";
}

BenchResult time_policy(const AdviseSpec& a, const std::vector<std::string>& keep) {
    BenchSpec b;
    b.model = a.run.model;
    b.probes = a.run.probes;
    b.device = a.run.device;
    b.precisions = a.run.precisions;
    b.mode = a.run.mode;
    b.batch_size = a.run.batch_size;
    b.seed = a.run.seed;
    b.output = a.run.criteria.output;
    b.warmup = 2;
    b.repeats = 10;
    for (const auto& m : keep) b.keep_fp32.push_back(exact_glob(m));  // module paths, not globs
    return run_benchmark(b);
}

/// --json and --python: never an input (database, model, probes, criteria) nor each other.
void check_advise_outputs(const AdviseOptions& o, const std::string& model, const std::string& probes) {
    auto inputs = protected_inputs(o.no_db, o.db,
                                   {{"the model (--model)", model},
                                    {"the probe file (--probes)", probes},
                                    {"the criteria file (--criteria)", o.criteria_file}});
    auto with = [&inputs](const std::string& role, const std::string& path) {
        auto v = inputs;
        if (!path.empty() && path != "-") v.push_back({path, role});
        return v;
    };
    check_output_path(o.json_path, "--json", storage::OutputKind::AdviseJson,
                      with("the --python output", o.python_path), o.force);
    check_output_path(o.python_path, "--python", storage::OutputKind::PythonSnippet,
                      with("the --json output", o.json_path), o.force);
}

int run_advise(AdviseOptions& o) {
    refuse_under_torchrun("advise");
    // every output path and the spec checked before any work
    check_advise_outputs(o, o.spec.model, o.spec.probes);
    if (!o.json_path.empty() && o.json_path != "-" && o.json_path == o.python_path)
        throw InputError(o.python_path, "--python", "the same file as --json; expected two different files");
    AdviseSpec spec = spec_of(o, o.cmd);
    if (!o.run.empty()) check_advise_outputs(o, spec.run.model, spec.run.probes);  // the recorded run's files
    const bool fp8 = !spec.run.precisions.empty() && is_fp8(spec.run.precisions.front());
    const Recording<storage::RunWriter> rec(o.no_db, o.db, o.init_db, &storage::RunWriter::run_failed);
    TerminalProgress progress(isatty(STDERR_FILENO) && !o.quiet);
    json::AdviseRecord record;
    record.advised_from = spec.run.advised_from;
    record.granularity = to_string(spec.granularity);
    spec.verify = [&](const std::vector<std::string>& keep) {  // the set found, as a recorded run
        RunSpec verify = spec.run;
        auto& globs = fp8 ? verify.keep_bf16 : verify.keep_fp32;  // an FP8 recipe's set: left out of FP8, in BF16
        globs.clear();
        for (const auto& m : keep) globs.push_back(exact_glob(m));  // module paths, not globs
        const RunResult v = run_comparison(verify, rec.writer(), &progress);
        if (interrupted()) throw Cancelled();  // Ctrl-C as the verifying run ended: no timing, exit 130
        record.verified_run = rec.store() ? v.run_id : "";
        record.verified_verdict = to_string(v.verdict);
        return v.verdict;
    };
    const AdviseResult r = advise(spec, &progress);
    if (interrupted()) throw Cancelled();
    std::optional<BenchResult> full, with_set;
    // gains only after numeric validation (an accepted verifying run); FP8 passes are simulated: not timed
    if (r.outcome == AdviseResult::Outcome::Found && !o.no_bench && !fp8) {
        full = time_policy(spec, {});
        if (interrupted()) throw Cancelled();
        with_set = time_policy(spec, r.keep_fp32);
        if (interrupted()) throw Cancelled();
        record.full_amp = &*full;
        record.with_set = &*with_set;
    }
    progress.clear();
    if (!o.quiet && o.json_path != "-") print_advice(r, record);
    if (!o.json_path.empty()) write_output(o.json_path, json::advise_to_json(r, record));
    if (!o.python_path.empty() && r.outcome == AdviseResult::Outcome::Found && !r.keep_fp32.empty())
        write_output(o.python_path,
                     python_snippet(r.keep_fp32, spec.run.precisions.empty() ? Precision::Fp16 : spec.run.precisions[0],
                                    spec.run.fp8_all_gemms),
                     "--python", /*json=*/false);
    if (r.outcome == AdviseResult::Outcome::Unverified)
        std::cerr << "ampscope-cli: advise: the verifying run was " << record.verified_verdict
                  << "; the set is unverified"
                  << (o.python_path.empty() ? "" : " and --python " + o.python_path + " was not written")
                  << (o.json_path.empty() || o.json_path == "-"
                          ? ""
                          : std::string("; run ") + (fp8 ? "--keep-bf16-file " : "--keep-fp32-file ") + o.json_path +
                                " takes it only with --allow-unverified")
                  << "\n";
    const bool ok = r.outcome == AdviseResult::Outcome::AlreadyAccepted || r.outcome == AdviseResult::Outcome::Found;
    return ok ? kOk : kRejected;
}

}  // namespace

Command add_advise_command(CLI::App& app) {
    auto* sub = app.add_subcommand(
        "advise", "find a minimal set of modules to keep in FP32 so that every AMP pass meets the criteria");
    auto options = std::make_shared<AdviseOptions>();
    add_advise_options(sub, *options);
    return [sub, options] {
        if (!*sub) return -1;
        options->cmd = sub;
        return run_advise(*options);
    };
}

}  // namespace ampscope::cli
