// SPDX-License-Identifier: MIT
#pragma once
// The options that fix a run (model, probes, precisions, device, mode, criteria, seed, batch,
// database), shared by `run` and `advise`.

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "ampscope/engine/fp8.h"
#include "ampscope/engine/run.h"
#include "ampscope/storage/output_file.h"

namespace ampscope::cli {

/// --fp8-amax-history and --fp8-margin (fp8-delayed's settings), for `run` and `train`.
struct DelayedFlags {
    std::optional<int> amax_history, margin;
};
void add_fp8_delayed_options(CLI::App* cmd, DelayedFlags& f, const char* history_unit);
/// The flags into `history` / `margin`; InputError naming a flag given while `delayed` is false
/// (the command runs no fp8-delayed pass or training).
void apply_fp8_delayed_options(const DelayedFlags& f, bool delayed, int& history, int& margin);
/// --mx-scaling floor|rceil (mxfp8's block scales; run, advise, train, replay); applied: InputError
/// naming the flag when given while `mxfp8` is false (nothing runs MX blocks).
void add_mx_scaling_option(CLI::App* cmd, std::optional<std::string>& flag, const char* default_name);
void apply_mx_scaling_option(const std::optional<std::string>& flag, bool mxfp8, MxScaling& into);

/// --keep-fp32-file, --keep-bf16-file and --allow-unverified (run, train, replay): module globs
/// from files (an `ampscope-cli advise` JSON or one glob a line), after those of the flags.
struct RegionFiles {
    std::string keep_fp32_file, keep_bf16_file;
    size_t keep_fp32_flags = 0;     ///< how many of the FP32 list came before the file's globs
    size_t keep_bf16_flags = 0;     ///< how many of the BF16 list came before the file's globs
    bool allow_unverified = false;  ///< a file may be an "unverified" advice
};
void add_region_file_options(CLI::App* cmd, RegionFiles& f);
/// The files' globs appended to the lists (InputError naming a file that is not one).
void apply_region_files(RegionFiles& f, std::vector<std::string>& keep_fp32, std::vector<std::string>& keep_bf16);
/// Rethrows the current exception; an InputError about a glob of a file names that file.
[[noreturn]] void rethrow_region_named(const RegionFiles& f);
/// The files among a command's inputs (ProtectedFile labels).
std::vector<std::pair<std::string, std::string>> region_file_inputs(const RegionFiles& f);

struct RunOptions {
    RunSpec spec;
    std::string precisions = "fp16,bf16", mode = "eval", criteria_file, json_path, db, tie_rule, quality_metric, output;
    RegionFiles regions;  ///< --keep-fp32-file, --keep-bf16-file, --allow-unverified
    std::string mask_input;
    std::string fp8_real_gemm = "auto";  ///< --fp8-real-gemm
    std::optional<double> atol, rtol, tie_tol, qthresh, max_flip_rate, max_mean_kld, min_same_top;
    std::optional<int> max_flips, sequence_axis;
    DelayedFlags fp8_delayed;               ///< --fp8-amax-history, --fp8-margin (fp8-delayed only)
    std::optional<std::string> mx_scaling;  ///< --mx-scaling (an mxfp8 pass or the what-if)
    bool allow_nonfinite = false, layers = false, outputs = false, no_inspect = false, quiet = false;
    bool no_db = false, init_db = false;
    bool force = false;  ///< --force: an output may replace an existing file of another kind
    /// Under torchrun (docs/distributed.md): a batch running longer than this is a hung rank; a
    /// rank whose heartbeat stops this long is lost. Either stops every rank.
    double batch_timeout = 1800, lost_after = 15;
};

/// Model, probes, precisions, device, mode, criteria flags, seed, batch size and database.
void add_spec_options(CLI::App* cmd, RunOptions& o, bool model_required);
/// Everything `run` takes.
void add_run_options(CLI::App* run, RunOptions& o);

/// The files the run reads (database, model, probes, criteria, --keep-fp32-file): what its
/// outputs must never replace.
std::vector<storage::ProtectedFile> run_inputs(const RunOptions& o);

std::vector<Precision> parse_amp_precisions(const std::string& list);
/// The criteria file, then the flags over it.
Criteria criteria_of(const RunOptions& o);
/// The spec the options give: precisions, mode, criteria, inspection, --keep-fp32-file's regions.
void finish_spec(RunOptions& o);
/// FP32 regions from a file: an `ampscope-cli advise` JSON (its "keep_fp32" list) or one glob a
/// line ('#' starts a comment). InputError naming the file otherwise, and for an advise JSON
/// whose outcome is "unverified" (its verifying run was rejected) unless `allow_unverified`.
std::vector<std::string> read_keep_fp32_file(const std::string& path, bool allow_unverified = false);

}  // namespace ampscope::cli
