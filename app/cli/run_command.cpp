// SPDX-License-Identifier: MIT
// ampscope-cli run: the FP32 reference pass plus AMP passes, compared against fixed criteria.
#include "run_command.h"

#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "ampscope/engine/distributed.h"
#include "ampscope/engine/errors.h"
#include "ampscope/engine/text.h"
#include "ampscope/storage/json_io.h"
#include "ampscope/storage/store.h"
#include "checks.h"
#include "run_options.h"
#include "summary.h"

namespace ampscope::cli {

namespace {

/// Under torchrun: rank 0 records and prints, the others only run their shard.
std::optional<DistributedEnv> rank_env(const RunOptions& o) {
    auto env = distributed_env();
    if (env) {
        env->batch_timeout_s = o.batch_timeout;
        env->lost_after_s = o.lost_after;
    }
    return env;
}

/// A region from --keep-fp32-file or --keep-bf16-file, a head of --criteria: the file named, not the flag.
[[noreturn]] void rethrow_named(const RunOptions& o) {
    try {
        throw;
    } catch (const InputError& e) {
        if (e.file() == "criteria" && !o.criteria_file.empty())
            throw InputError(o.criteria_file, e.field(), e.expected(), e.remedies());
        rethrow_region_named(o.regions);
    }
}

int run_run(RunOptions& o) {
    const auto env = rank_env(o);
    const bool lead = !env || env->rank == 0;
    if (lead)  // before any work
        check_output_path(o.json_path, "--json", storage::OutputKind::RunJson, run_inputs(o), o.force);
    finish_spec(o);
    auto& spec = o.spec;
    TerminalProgress progress(lead && isatty(STDERR_FILENO) && !o.quiet);
    const Recording<storage::RunWriter> rec(o.no_db || !lead, o.db, o.init_db, &storage::RunWriter::run_failed);
    RunResult r = [&] {
        try {
            if (env) return run_comparison_distributed(spec, *env, rec.writer(), &progress);
            return run_comparison(spec, rec.writer(), &progress);
        } catch (const std::exception&) {
            if (env) rec.discard();  // a distributed run is recorded whole or not at all
            rethrow_named(o);
        }
    }();
    if (interrupted()) throw Cancelled();
    progress.clear();
    const bool summary = lead && !o.quiet && o.json_path != "-";
    if (rec.store() && summary) std::cout << "recorded as run " << r.run_id << " in " << rec.store()->path() << "\n";
    if (summary) print_run_summary(std::cout, r, o.layers, isatty(STDOUT_FILENO));
    if (lead && !o.json_path.empty()) write_output(o.json_path, json::run_to_json(r, o.outputs));
    // The other ranks end 0 once the run is complete: the verdict is rank 0's to give (torchrun
    // stops every rank when one exits non-zero, and rank 0 may still be writing its outputs).
    if (!lead) return kOk;
    return r.verdict == Verdict::Accepted ? kOk : kRejected;
}

}  // namespace

Command add_run_command(CLI::App& app) {
    return subcommand<RunOptions>(app, "run", "FP32 reference pass plus AMP passes, compared against fixed criteria",
                                  add_run_options, run_run);
}

}  // namespace ampscope::cli
