// SPDX-License-Identifier: MIT
// ampscope-cli bench (see bench_command.h).
#include "bench_command.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/rules.h"
#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"
#include "ampscope/storage/json_io.h"
#include "ampscope/storage/store.h"
#include "checks.h"
#include "run_options.h"
#include "summary.h"

namespace ampscope::cli {

namespace {

struct BenchOptions {
    BenchSpec spec;
    std::string precision = "fp16,bf16", mode = "eval", db, json;
    bool unvalidated = false, init_db = false, force = false;
    RegionFiles regions;  ///< --keep-fp32-file, --allow-unverified (the precisions are fp16 and bf16: no BF16 list)
};

std::vector<Precision> parse_precisions(const std::string& list) {
    auto out = parse_amp_precisions(list);
    if (out.empty()) throw InputError("--precision", "", "'" + list + "': no AMP precision; expected fp16 and/or bf16");
    for (auto p : out)
        if (p == Precision::Fp32 || is_fp8(p))
            throw InputError("--precision", "",
                             "'" + to_string(p) + "'; expected fp16 and/or bf16 (" +
                                 (is_fp8(p) ? to_string(p) +
                                                  " is simulated here (FP32 GEMMs of quantized operands): its timing "
                                                  "would say nothing of FP8 hardware; run and advise take it" +
                                                  std::string(replays(p)  ? ", train and replay too"
                                                              : trains(p) ? ", train too"
                                                                          : "")
                                            : "FP32 is always timed") +
                                 ")");
    return out;
}

std::string glob_list(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& g : v) out += (out.empty() ? "" : ", ") + g;
    return out.empty() ? "none" : out;
}

/// The validation of each benchmarked precision (the rule: choose_validation, rules.h).
std::vector<storage::Validation> validations(const storage::Store& store, const BenchSpec& bs) {
    const auto ids = identify_inputs(bs.model, bs.probes, bs.device, bs.seed);
    std::vector<storage::Validation> out;
    for (auto p : bs.precisions) out.push_back(store.find_validation(bench_policy(bs, ids, p)));
    return out;
}

void print_result(const BenchResult& res, const BenchSpec& bs, const std::vector<storage::Validation>& vs,
                  const std::string& id) {
    for (const auto& v : vs) {
        if (v.run.empty()) {
            std::cout << "UNVALIDATED " << to_string(v.precision) << ": " << safe(v.refusal) << "\n";
            continue;
        }
        std::printf("validated %s by run %s (review %s; accepted under atol %g, rtol %g, max flips %d%s)\n",
                    to_string(v.precision).c_str(), v.run.c_str(), to_string(v.review.status).c_str(), v.criteria.atol,
                    v.criteria.rtol, v.criteria.max_flips,
                    v.criteria.allow_nonfinite ? ", non-finite outputs allowed" : "");
    }
    std::cout << safe(res.model.source) << ", batch " << res.batch << ", " << res.backend.device << " ("
              << res.backend.kind << "), " << (bs.train ? "training steps" : "forward passes") << ", mode "
              << to_string(bs.mode) << ", FP32 regions " << safe(glob_list(bs.keep_fp32)) << "\n";
    std::printf("  %-6s %10s %10s %10s %9s %12s %8s\n", "", "median ms", "p10", "p90", "speed-up", "peak MiB",
                "memory");
    for (const auto& f : res.figures)
        std::printf("  %-6s %10.3f %10.3f %10.3f %8.2fx %12.1f %7.2fx\n", to_string(f.precision).c_str(), f.median_ms,
                    f.p10_ms, f.p90_ms, f.speedup, double(f.peak_bytes) / (1 << 20), f.memory_ratio);
    std::cout << "  timer: " << res.timer << "; memory: " << res.memory << "\n  recorded as benchmark "
              << id.substr(0, 8) << "\n";
}

int measure(BenchOptions& o) {
    auto& bs = o.spec;
    storage::Store store(storage::default_db_path(o.db), storage::Store::Mode::Create, o.init_db);
    const auto vs = validations(store, bs);
    if (!all_validated(vs) && !o.unvalidated) {
        std::cerr << "ampscope-cli: refusing to measure " << safe(bs.model) << " on " << safe(bs.probes) << ":\n";
        for (const auto& v : vs)
            if (v.run.empty()) std::cerr << "  " << to_string(v.precision) << ": " << safe(v.refusal) << "\n";
        std::cerr << "Run `ampscope-cli run` with exactly this policy (model, probes, device, precision, --keep-fp32 "
                     "or --keep-fp32-file, --mode) until it is accepted, or pass --unvalidated.\n";
        return 1;
    }
    const auto res = run_benchmark(bs);
    if (res.keep_fp32 != bs.keep_fp32)
        throw InputError("--keep-fp32", "",
                         "this build's benchmark does not run FP32 regions (asked: " + glob_list(bs.keep_fp32) +
                             "; timed: " + glob_list(res.keep_fp32) + "); nothing was recorded");
    const auto id = store.record_benchmark(res, bs, vs);
    if (!o.json.empty()) write_output(o.json, json::bench_to_json(res, bs, vs));
    if (o.json != "-") print_result(res, bs, vs, id);
    return 0;
}

int run_bench(BenchOptions& o) {
    refuse_under_torchrun("bench");
    auto& bs = o.spec;
    bs.precisions = parse_precisions(o.precision);
    bs.mode = o.mode == "train" ? Mode::Train : Mode::Eval;
    std::vector<std::string> no_bf16;
    apply_region_files(o.regions, bs.keep_fp32, no_bf16);  // after the flags' globs, as run lists them
    check_output_path(o.json, "--json", storage::OutputKind::BenchJson,
                      protected_inputs(false, o.db,
                                       {{"the model (--model)", bs.model},
                                        {"the probe file (--probes)", bs.probes},
                                        {"the FP32-region file (--keep-fp32-file)", o.regions.keep_fp32_file}}),
                      o.force);  // before any work
    try {
        return measure(o);
    } catch (...) {
        rethrow_region_named(o.regions);  // a glob of the file: the file named
    }
}

void add_bench_options(CLI::App* bench, BenchOptions& o) {
    auto& bs = o.spec;
    bench->add_option("--model", bs.model, "demo:NAME, a TorchScript file or a torch.export program (.pt2)")
        ->required();
    add_output_option(bench, bs.output);
    bench->add_option("--probes", bs.probes, "the probe set the validation run used")->required();
    bench->add_option("--device", bs.device, "cpu | cuda | cuda:N")->check(checks::Device());
    bench->add_option("--precision", o.precision, "AMP precisions to time against FP32")->default_str("fp16,bf16");
    bench->add_option("--keep-fp32", bs.keep_fp32, "module-path glob run without autocast (repeatable), as validated");
    bench
        ->add_option("--keep-fp32-file", o.regions.keep_fp32_file,
                     "FP32 regions from a file, as run reads it: the JSON `ampscope-cli advise` writes (its keep_fp32 "
                     "list) or one glob a line")
        ->check(checks::NonEmptyPath());
    bench->add_flag("--allow-unverified", o.regions.allow_unverified,
                    "accept a --keep-fp32-file whose advise outcome is 'unverified' (as the validating run did)");
    bench->add_option("--mode", o.mode, "eval | train, as validated")
        ->transform(CLI::IsMember({"eval", "train"}, CLI::ignore_case))
        ->default_str("eval");
    bench->add_option("--batch-size", bs.batch_size, "samples per forward")->default_val(64)->check(checks::Integer(1));
    bench->add_option("--warmup", bs.warmup, "untimed forwards first")->default_val(5)->check(checks::Integer(0));
    bench->add_option("--repeats", bs.repeats, "timed forwards per precision")
        ->default_val(30)
        ->check(checks::Integer(1));
    bench->add_option("--seed", bs.seed, "seed of the demo weights and probes")->default_val(0)->check(checks::Seed());
    bench->add_flag("--train", bs.train,
                    "time training steps (forward, loss, backward, SGD step; GradScaler for fp16)");
    bench->add_flag("--unvalidated", o.unvalidated,
                    "measure without a validation run (stored and shown as unvalidated)");
    bench->add_option("--db", o.db, "run database holding the validation run")->check(checks::NonEmptyPath());
    bench->add_flag("--init-db", o.init_db, "add ampscope's tables to an existing SQLite file of another application");
    bench->add_option("--json", o.json, "write the result JSON to PATH, or '-' for stdout")
        ->check(checks::NonEmptyPath());
    bench->add_flag("--force", o.force, kForceHelp);
}

}  // namespace

Command add_bench_command(CLI::App& app) {
    return subcommand<BenchOptions>(app, "bench",
                                    "speed and memory of FP32 vs AMP, only after a validation run of exactly "
                                    "this policy was accepted",
                                    add_bench_options, run_bench);
}

}  // namespace ampscope::cli
