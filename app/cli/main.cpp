// SPDX-License-Identifier: MIT
// ampscope-cli: the headless front end. Links no Qt.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"
#include "ampscope/storage/json_io.h"
#include "ampscope/storage/store.h"
#include "checks.h"
#include "bench_command.h"
#include "store_commands.h"
#include "summary.h"

using namespace ampscope;

namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signals{0};
int g_abort_pipe[2] = {-1, -1};
/// First Ctrl-C/SIGTERM: finish the current batch or step, record the run cancelled, exit 130.
/// Second one (e.g. the model is stuck inside one op): the abort thread ends the process now.
extern "C" void on_sigint(int) {
    g_interrupted.store(true);
    if (g_signals.fetch_add(1) >= 1 && g_abort_pipe[1] >= 0) {
        const char c = 1;
        [[maybe_unused]] const auto n = write(g_abort_pipe[1], &c, 1);
    }
}

std::mutex g_abort_mutex;
std::function<void()> g_on_abort;  ///< marks the current run cancelled (set while one records)

/// Sets what the abort thread does before exiting, for the lifetime of a recording command.
struct AbortAction {
    explicit AbortAction(std::function<void()> f) {
        std::lock_guard<std::mutex> l(g_abort_mutex);
        g_on_abort = std::move(f);
    }
    ~AbortAction() {
        std::lock_guard<std::mutex> l(g_abort_mutex);
        g_on_abort = nullptr;
    }
};

void start_abort_thread() {
    if (pipe(g_abort_pipe) != 0) return;
    std::thread([] {
        char c = 0;
        while (read(g_abort_pipe[0], &c, 1) < 0 && errno == EINTR) {
        }
        {
            std::lock_guard<std::mutex> l(g_abort_mutex);
            try {
                if (g_on_abort) g_on_abort();
            } catch (const std::exception& e) {
                std::fprintf(stderr, "ampscope-cli: could not mark the run cancelled: %s\n", e.what());
            }
        }
        std::fprintf(stderr, "\nampscope-cli: interrupted twice: stopped inside the model; the run is recorded as cancelled\n");
        std::_Exit(130);
    }).detach();
}

enum Exit { kOk = 0, kRejected = 1, kBadInput = 2, kRuntime = 3, kInterrupted = 130 };

/// Terminal progress on stderr (only when stderr is a terminal), throttled to ~10 Hz.
class TerminalProgress : public ProgressObserver {
public:
    explicit TerminalProgress(bool enabled) : enabled_(enabled) {}
    void progress(const std::string& stage, int done, int total) override {
        if (!enabled_) return;
        const auto now = std::chrono::steady_clock::now();
        if (stage == last_stage_ && done != total && now - last_ < std::chrono::milliseconds(100)) return;
        last_ = now;
        last_stage_ = stage;
        const int width = 30;
        const int filled = total > 0 ? width * done / total : 0;
        std::fprintf(stderr, "\r%-14s [%s%s] %d/%d", stage.c_str(), std::string(size_t(filled), '#').c_str(),
                     std::string(size_t(width - filled), '.').c_str(), done, total);
        if (done == total) std::fprintf(stderr, "\r\033[K");
        std::fflush(stderr);
    }
    bool cancel_requested() const override { return g_interrupted.load() || cancel.load(); }
    void clear() {
        if (enabled_) std::fprintf(stderr, "\r\033[K");
    }

private:
    bool enabled_;
    std::string last_stage_;
    std::chrono::steady_clock::time_point last_{};
};



std::string read_file(const std::string& path, const std::string& what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, what, "cannot open file for reading");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_output(const std::string& path, const std::string& text) {
    if (path == "-") {
        std::cout << text << std::endl;
        return;
    }
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw InputError(path, "--json", "cannot write to this path");
        out << text << "\n";
        if (!out) throw InputError(path, "--json", "write failed");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw InputError(path, "--json", "cannot replace the file");
}

int report(const std::exception& e, int code) {
    std::cerr << "ampscope-cli: " << (code == kBadInput ? "error: " : code == kRuntime ? "runtime error: " : "") << e.what()
              << std::endl;
    return code;
}

}  // namespace

int main(int argc, char** argv) {
    // Ctrl-C / SIGTERM: finish the current batch, record the run as cancelled, exit 130.
    start_abort_thread();
    std::signal(SIGINT, on_sigint);
    std::signal(SIGTERM, on_sigint);
    CLI::App app{"ampscope-cli: is it safe to run this model in mixed precision? Runs an FP32 reference pass and "
                 "autocast FP16/BF16 passes on a fixed probe set, compares scores and decisions against criteria "
                 "fixed before the run, and names where NaN/Inf is born."};
    app.set_version_flag("--version", "ampscope-cli " + version() + " (torch " + backend_report("cpu").torch_version + ")");
    app.require_subcommand(1);

    // ---- run ----
    auto* run = app.add_subcommand("run", "FP32 reference pass plus AMP passes, compared against fixed criteria");
    RunSpec spec;
    std::string precisions = "fp16,bf16", mode = "eval", criteria_file, json_path, db, tie_rule, quality_metric;
    std::optional<double> atol, rtol, tie_tol, qthresh;
    std::optional<int> max_flips;
    bool allow_nonfinite = false, layers = false, outputs = false, no_inspect = false, quiet = false;
    run->add_option("--model", spec.model, "demo:NAME (transformer, mlp, regressor) or a TorchScript file")->required();
    run->add_option("--probes", spec.probes, "'demo' (the demo model's built-in set) or a .pt / .csv probe file")->required();
    run->add_option("--precision", precisions, "AMP passes to run, comma-separated; the FP32 reference always runs")
        ->default_str("fp16,bf16");
    run->add_option("--device", spec.device, "cpu | cuda | cuda:N (default: cuda when available, else cpu)")->check(cli::checks::Device());
    run->add_option("--mode", mode, "eval | train, fixed for every pass")->check(CLI::IsMember({"eval", "train"}))->default_str("eval");
    run->add_option("--criteria", criteria_file, "criteria JSON file; flags below override its keys");
    run->add_option("--atol", atol, "absolute tolerance per score (default 1e-3)")->check(cli::checks::Number(0));
    run->add_option("--rtol", rtol, "relative tolerance per score (default 1e-2)")->check(cli::checks::Number(0));
    run->add_option("--tie-tolerance", tie_tol, "scores within this of the maximum count as tied (default 0)")->check(cli::checks::Number(0));
    run->add_option("--tie-rule", tie_rule, "lowest-index | abstain")->check(CLI::IsMember({"lowest-index", "abstain"}));
    run->add_option("--max-flips", max_flips, "decision flips allowed (default 0)")->check(cli::checks::Integer(0));
    run->add_option("--quality-metric", quality_metric, "accuracy | mse | max_abs_error")
        ->check(CLI::IsMember({"accuracy", "mse", "max_abs_error"}));
    run->add_option("--quality-threshold", qthresh, "accuracy: at least this; mse, max_abs_error: at most this")->check(cli::checks::Finite());
    run->add_flag("--allow-nonfinite", allow_nonfinite, "do not reject a pass for non-finite outputs");
    run->add_option("--keep-fp32", spec.keep_fp32, "module-path glob run without autocast (repeatable), e.g. 'blocks.1.*'");
    run->add_option("--seed", spec.seed, "seed for weights of demo models, demo probes and every pass's RNG")->default_val(0)->check(cli::checks::Seed());
    run->add_option("--batch-size", spec.batch_size, "samples per forward")->default_val(64)->check(cli::checks::Integer(1));
    run->add_option("--db", db, "run database (default: $AMPSCOPE_DB, else ${XDG_DATA_HOME:-~/.local/share}/ampscope/runs.sqlite)")
        ->check(cli::checks::NonEmptyPath());
    bool no_db = false, run_init_db = false;
    run->add_flag("--init-db", run_init_db, "add ampscope's tables to an existing SQLite file of another application");
    run->add_flag("--no-db", no_db, "do not record the run");
    run->add_option("--json", json_path, "write the run result JSON to PATH, or '-' for stdout");
    run->add_flag("--layers", layers, "print the per-layer table (module, op, dtype, absmax, headroom, overflow)");
    run->add_flag("--outputs", outputs, "include per-sample scores and decisions in the JSON");
    run->add_flag("--no-inspect", no_inspect, "skip per-op statistics (faster; no origins)");
    run->add_flag("-q,--quiet", quiet, "no terminal summary");

    // ---- backend ----
    auto* backend = app.add_subcommand("backend", "what hardware and libraries would run: CPU/CUDA/HIP, versions, bf16 support");
    bool backend_json = false;
    std::string backend_device;
    backend->add_flag("--json", backend_json, "print JSON");
    backend->add_option("--device", backend_device, "cpu | cuda | cuda:N (default: the default device)")->check(cli::checks::Device());

    // ---- ops ----
    auto* ops = app.add_subcommand("ops", "operator coverage: the ops a model runs, which autocast keeps in FP32, "
                                          "and which have no kernel for the target device and dtype");
    RunSpec ops_spec;
    std::string ops_precision = "fp16";
    bool ops_json = false;
    ops->add_option("--model", ops_spec.model, "demo:NAME or a TorchScript file")->required();
    ops->add_option("--probes", ops_spec.probes, "probe file whose first sample drives the forward (default: demo)")
        ->default_str("demo");
    ops->add_option("--device", ops_spec.device, "cpu | cuda | cuda:N")->check(cli::checks::Device());
    ops->add_option("--precision", ops_precision, "fp16 | bf16")->default_str("fp16");
    ops->add_option("--seed", ops_spec.seed, "seed for demo weights")->default_val(0)->check(cli::checks::Seed());
    ops->add_flag("--json", ops_json, "print JSON");

    // ---- train ----
    auto* train = app.add_subcommand("train", "reference FP32 and AMP training side by side, with a GradScaler port");
    TrainSpec ts;
    std::string train_precision = "fp16", train_json, train_db;
    bool no_scaler = false, no_autocast = false, train_quiet = false, no_guards = false;
    train->add_option("--model", ts.model, "demo:NAME or a TorchScript file (its parameters are trained)")->required();
    train->add_option("--data", ts.data, "'demo' or a .pt/.csv file with labels or targets")->required();
    train->add_option("--steps", ts.steps, "optimizer iterations")->required()->check(cli::checks::Integer(1));
    train->add_option("--batch-size", ts.batch_size, "samples per micro-batch, taken in file order")->default_val(16)->check(cli::checks::Integer(1));
    train->add_option("--loss", ts.loss, "ce | mse (default: ce with labels, mse with targets)")->check(CLI::IsMember({"ce", "mse"}));
    train->add_option("--optimizer", ts.optimizer, "sgd | adam | adamw")->check(CLI::IsMember({"sgd", "adam", "adamw"}))->default_val("sgd");
    train->add_option("--lr", ts.lr, "learning rate")->default_val(0.05)->check(cli::checks::Number(0));
    train->add_option("--momentum", ts.momentum, "SGD momentum")->default_val(0.0)->check(cli::checks::Number(0));
    train->add_option("--weight-decay", ts.weight_decay, "weight decay")->default_val(0.0)->check(cli::checks::Number(0));
    train->add_option("--lr-schedule", ts.lr_schedule, "constant | cosine (over --steps)")->check(CLI::IsMember({"constant", "cosine"}))->default_val("constant");
    train->add_flag("--lr-per-iteration", ts.lr_per_iteration, "advance the schedule per iteration, not per effective update (warns when steps were skipped)");
    train->add_option("--precision", train_precision, "fp16 | bf16")->default_val("fp16");
    train->add_flag("--no-scaler", no_scaler, "isolation: autocast only, no GradScaler");
    train->add_flag("--no-autocast", no_autocast, "isolation: FP32 compute with loss scaling only");
    train->add_option("--init-scale", ts.scaler.init_scale, "GradScaler init_scale")->default_val(65536.0)->check(cli::checks::Number(0, INFINITY, true));
    train->add_option("--growth-factor", ts.scaler.growth_factor, "GradScaler growth_factor")->default_val(2.0)->check(cli::checks::Number(1, INFINITY, true));
    train->add_option("--backoff-factor", ts.scaler.backoff_factor, "GradScaler backoff_factor")->default_val(0.5)->check(cli::checks::Number(0, 1, true, true));
    train->add_option("--growth-interval", ts.scaler.growth_interval, "GradScaler growth_interval")->default_val(2000)->check(cli::checks::Integer(1));
    train->add_option("--clip-grad-norm", ts.clip_grad_norm, "clip the unscaled gradient norm to this (0 = off)")->default_val(0.0)->check(cli::checks::Number(0));
    train->add_option("--accumulate", ts.accumulate, "micro-batches per optimizer step (unscale once, after accumulating)")->default_val(1)->check(cli::checks::Integer(1));
    train->add_option("--checkpoint-every", ts.checkpoint_every, "write a checkpoint every N steps (model, optimizer, scaler, RNG, counters, policy)")->default_val(0)->check(cli::checks::Integer(0));
    train->add_option("--checkpoint-dir", ts.checkpoint_dir, "where checkpoints go")->default_val(".");
    train->add_option("--resume", ts.resume, "continue from a checkpoint");
    train->add_option("--keep-fp32", ts.keep_fp32, "module-path glob run without autocast (repeatable)");
    train->add_option("--seed", ts.seed, "seed for weights, data and per-step RNG")->default_val(0)->check(cli::checks::Seed());
    train->add_option("--device", ts.device, "cpu | cuda | cuda:N")->check(cli::checks::Device());
    train->add_flag("--no-guards", no_guards, "skip the per-step finiteness checks (they synchronise with the device)");
    train->add_option("--db", train_db, "run database (default: $AMPSCOPE_DB, else ${XDG_DATA_HOME:-~/.local/share}/ampscope/runs.sqlite)")
        ->check(cli::checks::NonEmptyPath());
    bool train_no_db = false, train_init_db = false;
    train->add_flag("--init-db", train_init_db, "add ampscope's tables to an existing SQLite file of another application");
    train->add_flag("--no-db", train_no_db, "do not record the run");
    train->add_option("--json", train_json, "write the training JSON to PATH, or '-' for stdout");
    train->add_flag("-q,--quiet", train_quiet, "no terminal summary");

    // ---- bench ----
    auto bench_command = cli::add_bench_command(app, write_output);

    auto store_command = cli::add_store_commands(app);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? kOk : kBadInput;
    }

    try {
        if (*backend) {
            const auto b = backend_report(backend_device);
            if (backend_json) std::cout << json::backend_to_json(b) << std::endl;
            else cli::print_backend(std::cout, b);
            return kOk;
        }
        if (*ops) {
            auto p = parse_precision(ops_precision);
            if (!p || *p == Precision::Fp32) throw InputError("--precision", "", "'" + ops_precision + "'; expected fp16 or bf16");
            ops_spec.precisions = {*p};
            const auto rep = op_coverage(ops_spec);
            if (ops_json) {
                std::cout << json::ops_to_json(rep) << std::endl;
            } else {
                cli::print_ops(std::cout, rep);
            }
            int failing = 0;
            for (const auto& o : rep.ops) failing += !o.kernel_ok;
            return failing ? kRejected : kOk;
        }
        if (const int rc = bench_command(); rc >= 0) return rc;
        if (*train) {
            auto p = parse_precision(train_precision);
            if (!p || *p == Precision::Fp32) throw InputError("--precision", "", "'" + train_precision + "'; expected fp16 or bf16");
            ts.precision = *p;
            ts.scaler.enabled = !no_scaler;
            ts.autocast = !no_autocast;
            ts.guards = !no_guards;
            TerminalProgress progress(isatty(STDERR_FILENO) && !train_quiet);
            std::unique_ptr<storage::Store> tstore;
            std::unique_ptr<storage::TrainWriter> twriter;
            if (!train_no_db) {
                tstore = std::make_unique<storage::Store>(storage::default_db_path(train_db), storage::Store::Mode::Create, train_init_db);
                twriter = std::make_unique<storage::TrainWriter>(*tstore);
            }
            AbortAction abort([w = twriter.get()] {
                if (w) w->train_failed("cancelled", "interrupted twice while the model was running");
            });
            const auto r = run_training(ts, twriter.get(), &progress);
            progress.clear();
            if (!train_quiet && train_json != "-") cli::print_train(std::cout, r, isatty(STDOUT_FILENO));
            if (!train_json.empty()) write_output(train_json, json::train_to_json(r));
            if (g_interrupted) throw Cancelled();
            bool nonfinite_weights = false;
            for (const auto& st : r.steps) nonfinite_weights = nonfinite_weights || !std::isfinite(st.divergence);
            return nonfinite_weights ? kRejected : kOk;
        }
        if (*run) {
            spec.precisions.clear();
            std::stringstream ss(precisions);
            std::string item;
            while (std::getline(ss, item, ',')) {
                if (item.empty()) continue;
                auto p = parse_precision(item);
                if (!p) throw InputError("--precision", "", "unknown precision '" + item + "'; expected fp16 and/or bf16");
                spec.precisions.push_back(*p);
            }
            spec.mode = mode == "train" ? Mode::Train : Mode::Eval;
            if (!criteria_file.empty())
                spec.criteria = json::parse_criteria(read_file(criteria_file, "--criteria"), criteria_file);
            auto& c = spec.criteria;
            if (atol) c.atol = *atol;
            if (rtol) c.rtol = *rtol;
            if (tie_tol) c.tie_tolerance = *tie_tol;
            if (!tie_rule.empty()) c.tie_rule = *parse_tie_rule(tie_rule);
            if (max_flips) c.max_flips = *max_flips;
            if (!quality_metric.empty()) {
                c.quality_metric = *parse_quality_metric(quality_metric);
                c.quality_metric_set = true;
            }
            if (qthresh) {
                c.quality_threshold = *qthresh;
                c.quality_threshold_set = true;
            }
            if (allow_nonfinite) c.allow_nonfinite = true;
            spec.inspect = !no_inspect;

            TerminalProgress progress(isatty(STDERR_FILENO) && !quiet);
            std::unique_ptr<storage::Store> store;
            std::unique_ptr<storage::RunWriter> writer;
            if (!no_db) {
                store = std::make_unique<storage::Store>(storage::default_db_path(db), storage::Store::Mode::Create, run_init_db);
                writer = std::make_unique<storage::RunWriter>(*store);
            }
            AbortAction abort([w = writer.get()] {
                if (w) w->run_failed("cancelled", "interrupted twice while the model was running");
            });
            RunResult r = run_comparison(spec, writer.get(), &progress);
            if (g_interrupted) throw Cancelled();
            progress.clear();
            if (store && !quiet && json_path != "-") std::cout << "recorded as run " << r.run_id << " in " << store->path() << "\n";
            if (!quiet && json_path != "-") cli::print_run_summary(std::cout, r, layers, isatty(STDOUT_FILENO));
            if (!json_path.empty()) write_output(json_path, json::run_to_json(r, outputs));
            return r.verdict == Verdict::Accepted ? kOk : kRejected;
        }
        if (const int rc = store_command(); rc >= 0) return rc;
    } catch (const InputError& e) {
        return report(e, kBadInput);
    } catch (const storage::StoreError& e) {
        return report(e, kBadInput);
    } catch (const Cancelled& e) {
        std::cerr << "ampscope-cli: interrupted" << std::endl;
        return kInterrupted;
    } catch (const ModelError& e) {
        return report(e, kRuntime);
    } catch (const BackendError& e) {
        return report(e, kRuntime);
    } catch (const std::exception& e) {
        return report(e, kRuntime);
    }
    return kOk;
}
