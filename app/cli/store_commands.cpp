// SPDX-License-Identifier: MIT
#include "store_commands.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <sstream>

#include "ampscope/storage/json_io.h"
#include "ampscope/engine/errors.h"
#include "ampscope/engine/text.h"
#include "ampscope/engine/vocabulary.h"
#include "ampscope/storage/replay_record.h"
#include "ampscope/storage/store.h"
#include "checks.h"
#include "summary.h"

namespace ampscope::cli {

using storage::Store;

namespace {

struct State {
    std::string db;
    // list
    storage::RunFilter filter;
    bool json = false;
    // show
    std::string run;
    bool layers = false, outputs = false;
    // export / import
    std::vector<std::string> runs;
    std::string out, file;
    bool force = false, init_db = false;
    // annotate / review
    std::string text, sample, layer, author, review_status;
};

/// A training run: its status and summary, or (json) the JSON `train --json` wrote.
int show_training(const Store& s, const std::string& uuid, bool json) {
    const TrainResult tr = s.load_training(uuid);
    if (json) {
        std::cout << escape_c1_in_json(json::train_to_json(tr)) << std::endl;
        return 0;
    }
    std::cout << "status: " << safe(s.status(uuid)) << (s.error(uuid).empty() ? "" : " (" + safe(s.error(uuid)) + ")")
              << "\n";
    print_train(std::cout, tr, isatty(STDOUT_FILENO));
    return 0;
}

void print_benchmarks(const Store& s, const std::string& uuid) {
    for (const auto& b : s.benchmarks(uuid)) {
        std::ostringstream o;
        o << "\nbenchmark " << safe(b.uuid.substr(0, 8)) << " (" << safe(b.created_at.substr(0, 19)) << ", batch "
          << b.result.batch << "):";
        for (const auto& f : b.result.figures)
            o << " " << to_string(f.precision) << " " << f.median_ms << " ms (" << f.speedup << "x)";
        std::cout << o.str() << "\n";
    }
}

void print_annotations(const Store& s, const std::string& uuid) {
    const auto notes = s.annotations(uuid);
    if (notes.empty()) return;
    std::cout << "\nannotations:\n";
    for (const auto& a : notes)
        std::cout << "  " << safe(a.created_at.substr(0, 19)) << " " << safe(a.author) << " on " << safe(a.target_kind)
                  << (a.target.empty() ? "" : " " + safe(a.target)) << ": "
                  << visible_controls(a.text, /*keep_newline=*/true) << "\n";
}

void print_status(const Store& s, const std::string& uuid) {
    std::cout << "status: " << safe(s.status(uuid));
    if (!s.error(uuid).empty()) std::cout << " (" << safe(s.error(uuid)) << ")";
    const auto rv = s.review(uuid);
    std::cout << "   review: " << safe(to_string(rv.status))
              << (rv.by.empty() ? "" : " by " + safe(rv.by) + " at " + safe(rv.at)) << "\n";
}

/// A recorded replay: checked (a damaged or hostile stored JSON is refused, exit 2, named), then
/// its JSON (C1 controls escaped: the same JSON value), and without --json its status, review
/// and annotations around it.
int show_replay(const Store& s, const std::string& uuid, bool json) {
    storage::checked_replay(s, uuid);
    const std::string text = escape_c1_in_json(storage::replay_json(s, uuid));
    if (json) {
        std::cout << text << std::endl;
        return 0;
    }
    print_status(s, uuid);
    std::cout << text << "\n";
    print_annotations(s, uuid);
    std::cout << std::flush;
    return 0;
}

int show_run(const Store& s, const State& st) {
    const auto uuid = s.resolve(st.run);
    if (s.kind(uuid) == "train") return show_training(s, uuid, st.json);
    if (s.kind(uuid) == "replay") return show_replay(s, uuid, st.json);
    std::vector<std::string> damaged;
    const auto r = s.load_run(uuid, &damaged);
    for (const auto& d : damaged)
        std::cerr << "ampscope-cli: warning: " << s.path() << ": damaged: " << safe(d) << std::endl;
    if (st.json) {
        std::cout << escape_c1_in_json(json::run_to_json(r, st.outputs, 2, damaged)) << std::endl;
        return 0;
    }
    print_status(s, uuid);
    for (const auto& d : damaged) std::cout << "DAMAGED: " << safe(d) << "\n";
    print_run_summary(std::cout, r, st.layers, isatty(STDOUT_FILENO));
    print_benchmarks(s, uuid);
    print_annotations(s, uuid);
    if (!damaged.empty())
        std::cout << "\n" << damaged.size() << " damaged part(s) of this run were left out (see DAMAGED above)\n";
    return 0;
}

int list_runs(const Store& s, const State& st) {
    const auto rows = s.list_runs(st.filter);
    if (st.json) {
        std::cout << "[";
        for (size_t i = 0; i < rows.size(); ++i) {
            const auto& r = rows[i];
            nlohmann::ordered_json j = {{"run_id", r.uuid},
                                        {"kind", r.kind},
                                        {"status", r.status},
                                        {"verdict", r.verdict},
                                        {"model", r.model},
                                        {"probes", r.probes},
                                        {"device", r.device},
                                        {"precisions", r.precisions},
                                        {"mode", r.mode},
                                        {"samples", r.samples},
                                        {"started_at", r.started_at},
                                        {"finished_at", r.finished_at},
                                        {"review", to_string(r.review_status)},
                                        {"annotations", r.annotations},
                                        {"error", r.error}};
            std::cout << (i ? ",\n " : "\n ")
                      << escape_c1_in_json(j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
        }
        std::cout << "\n]" << std::endl;
        return 0;
    }
    std::cout << pad("run", 10) << pad("started", 21) << pad("status", 12) << pad("verdict", 18) << pad("review", 9)
              << pad("device", 8) << pad("passes", 15) << "model\n";
    for (const auto& r : rows)
        std::cout << pad(r.uuid.substr(0, 8), 10) << pad(r.started_at.substr(0, 19), 21) << pad(r.status, 12)
                  << pad(r.verdict.empty() ? "-" : r.verdict, 18) << pad(to_string(r.review_status), 9)
                  << pad(r.device, 8) << pad(r.precisions, 15) << safe(r.model)
                  << (r.annotations ? "  [" + std::to_string(r.annotations) + " notes]" : "") << "\n";
    std::cout << rows.size() << " run(s) in " << s.path() << std::endl;
    return 0;
}

struct Commands {
    CLI::App *list, *show, *exp, *imp, *ann, *rev;
};

/// Runs the selected store command; -1 when none was selected.
int dispatch(const State& st, const Commands& c) {
    const auto path = storage::default_db_path(st.db);
    // Reading commands never create a database; list and show may mark dead runs interrupted.
    if (*c.list) return list_runs(Store(path, Store::Mode::ReadWrite), st);
    if (*c.show) return show_run(Store(path, Store::Mode::ReadWrite), st);
    if (*c.exp) {
        Store s(path, Store::Mode::ReadOnly);
        std::vector<std::string> uuids;
        for (const auto& r : st.runs) uuids.push_back(s.resolve(r));
        storage::export_runs(s, uuids, st.out, st.force);
        std::cout << "exported " << uuids.size() << " run(s) to " << st.out << std::endl;
        return 0;
    }
    if (*c.imp) {
        Store s(path, Store::Mode::Create, st.init_db);
        const auto res = storage::import_file(s, st.file);
        std::cout << "imported " << res.added << " run(s), " << res.skipped << " already present, into " << path
                  << std::endl;
        return 0;
    }
    if (*c.ann) {
        Store s(path, Store::Mode::ReadWrite);
        storage::Annotation a;
        a.author = st.author;
        a.text = st.text;
        if (!st.sample.empty() && !st.layer.empty())
            throw InputError("--sample/--layer", "", "give one target: a sample or a layer");
        if (!st.sample.empty()) {
            a.target_kind = "sample";
            a.target = st.sample;
        }
        if (!st.layer.empty()) {
            a.target_kind = "layer";
            a.target = st.layer;
        }
        s.annotate(s.resolve(st.run), a);
        std::cout << "annotated " << st.run << std::endl;
        return 0;
    }
    if (*c.rev) {
        Store s(path, Store::Mode::ReadWrite);
        const auto uuid = s.resolve(st.run);
        const auto status = ampscope::parse_review_status(st.review_status);
        s.set_review(uuid, status, st.author);
        std::cout << "run " << uuid.substr(0, 8) << " review: " << to_string(status) << std::endl;
        return 0;
    }
    return -1;
}

}  // namespace

namespace {

void add_db_option(CLI::App* c, State& st) {
    c->add_option("--db", st.db, kDbHelp)->check(checks::NonEmptyPath());
}

CLI::App* add_list(CLI::App& app, State& st) {
    auto* list = app.add_subcommand("list", "list recorded runs, newest first");
    add_db_option(list, st);
    auto& f = st.filter;
    list->add_option("--model", f.model, "model source contains");
    list->add_option("--precision", f.precision, "has a pass of this precision")
        ->transform(CLI::IsMember({"fp32", "fp16", "bf16", "fp8", "fp8-rowwise", "mxfp8", "nvfp4", "fp8-delayed"},
                                  CLI::ignore_case));
    list->add_option("--device", f.device, "device, e.g. cpu or cuda:0");
    list->add_option("--verdict", f.verdict, "accepted | rejected | invalid_reference")
        ->transform(CLI::IsMember({"accepted", "rejected", "invalid_reference"}, CLI::ignore_case));
    list->add_option("--status", f.status, "running | completed | failed | interrupted | cancelled")
        ->transform(CLI::IsMember({"running", "completed", "failed", "interrupted", "cancelled"}, CLI::ignore_case));
    list->add_option("--since", f.since, "started at or after (ISO-8601 date or UTC time, e.g. 2025-01-31T14:05)")
        ->check(checks::IsoTime());
    list->add_option("--until", f.until, "started at or before (ISO-8601 date or UTC time)")->check(checks::IsoTime());
    list->add_option("--limit", f.limit, "at most this many runs")->default_val(1000)->check(checks::Integer(0));
    list->add_flag("--json", st.json, "print JSON");
    return list;
}

CLI::App* add_show(CLI::App& app, State& st) {
    auto* show = app.add_subcommand("show", "show one recorded run: summary, criteria, origins, annotations, review");
    show->add_option("RUN", st.run, "run id (or a unique prefix)")->required();
    add_db_option(show, st);
    show->add_flag("--layers", st.layers, "print the per-layer tables");
    show->add_flag("--json", st.json, "print the run result JSON");
    show->add_flag("--outputs", st.outputs, "with --json: per-sample scores and decisions");
    return show;
}

CLI::App* add_export(CLI::App& app, State& st) {
    auto* exp = app.add_subcommand("export", "write runs to a self-contained .ampscope file for a teammate");
    exp->add_option("RUN", st.runs, "run ids (or unique prefixes)")->required();
    exp->add_option("-o,--output", st.out, "file to write (e.g. runs.ampscope)")
        ->required()
        ->check(checks::NonEmptyPath());
    add_db_option(exp, st);
    exp->add_flag("--force", st.force,
                  "replace an existing file that is not an ampscope export (never the database itself)");
    return exp;
}

CLI::App* add_import(CLI::App& app, State& st) {
    auto* imp = app.add_subcommand("import", "merge an .ampscope file into the database (idempotent, by run UUID)");
    imp->add_option("FILE", st.file, "file written by `ampscope-cli export`")->required();
    add_db_option(imp, st);
    imp->add_flag("--init-db", st.init_db, "add ampscope's tables to an existing SQLite file of another application");
    return imp;
}

CLI::App* add_annotate(CLI::App& app, State& st) {
    auto* ann = app.add_subcommand("annotate", "comment on a run, one of its samples or one of its layers");
    ann->add_option("RUN", st.run, "run id (or a unique prefix)")->required();
    ann->add_option("TEXT", st.text, "the comment")->required();
    ann->add_option("--sample", st.sample, "sample id the comment is about");
    ann->add_option("--layer", st.layer, "layer index (N or PRECISION:N) the comment is about");
    ann->add_option("--author", st.author, "author (default: $USER)");
    add_db_option(ann, st);
    return ann;
}

CLI::App* add_review(CLI::App& app, State& st) {
    auto* rev = app.add_subcommand("review", "set a run's review status");
    rev->add_option("RUN", st.run, "run id (or a unique prefix)")->required();
    rev->add_option("STATUS", st.review_status, "accepted | rejected | open")
        ->required()
        ->transform(CLI::IsMember(ampscope::review_status_names(), CLI::ignore_case));
    rev->add_option("--author", st.author, "reviewer (default: $USER)");
    add_db_option(rev, st);
    return rev;
}

}  // namespace

Command add_store_commands(CLI::App& app) {
    auto st = std::make_shared<State>();
    const Commands c{add_list(app, *st),   add_show(app, *st),     add_export(app, *st),
                     add_import(app, *st), add_annotate(app, *st), add_review(app, *st)};
    return [st, c]() -> int { return dispatch(*st, c); };
}

}  // namespace ampscope::cli
