// SPDX-License-Identifier: MIT
// ampscope-cli run: the FP32 reference pass plus AMP passes, compared against fixed criteria.
#include "run_command.h"

#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/text.h"
#include "ampscope/storage/json_io.h"
#include "ampscope/storage/store.h"
#include "checks.h"
#include "run_options.h"
#include "summary.h"

namespace ampscope::cli {

namespace {

int run_run(RunOptions& o) {
    check_output_path(o.json_path, "--json", storage::OutputKind::RunJson, run_inputs(o), o.force);  // before any work
    finish_spec(o);
    auto& spec = o.spec;
    TerminalProgress progress(isatty(STDERR_FILENO) && !o.quiet);
    const Recording<storage::RunWriter> rec(o.no_db, o.db, o.init_db, &storage::RunWriter::run_failed);
    RunResult r = [&] {
        try {
            return run_comparison(spec, rec.writer(), &progress);
        } catch (
            const InputError& e) {  // a region from --keep-fp32-file, a head of --criteria: name the file, not the flag
            if (e.file() == "criteria" && !o.criteria_file.empty())
                throw InputError(o.criteria_file, e.field(), e.expected());
            // spec.keep_fp32 holds the --keep-fp32 globs, then the file's (finish_spec)
            if (e.file().empty() && e.field().rfind("keep_fp32[", 0) == 0 &&
                field_index(e.field()) >= long(o.keep_fp32_flags))
                throw InputError(o.keep_fp32_file, "keep_fp32", e.expected());
            throw;
        }
    }();
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
