// SPDX-License-Identifier: MIT
// Fuzz target: a run database given with --db (or an .ampscope file opened as one), read the
// way `list`, `show` and `export` read it: opened read-only (as `export` opens it) then
// read-write (as `list` and `show` do: migrations, interrupted runs marked), every run listed,
// loaded and printed (`show`, `show --layers`, `show --json --outputs`, training runs too), and
// every comparison run exported to a new file.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <sstream>
#include <string>

#include "ampscope/storage/json_io.h"
#include "ampscope/storage/store.h"
#include "fuzz_util.h"
#include "summary.h"

namespace {

using namespace ampscope;
using storage::Store;
using storage::StoreError;

constexpr size_t kMaxRuns = 16;  // enough for every seed; bounds the time per input

/// What `show RUN` reads and prints (app/cli/store_commands.cpp).
void show(const Store& s, const std::string& listed_uuid) {
    const std::string uuid = s.resolve(listed_uuid);
    std::ostringstream os;
    if (s.kind(uuid) == "train") {
        const TrainResult tr = s.load_training(uuid);
        cli::print_train(os, tr, true);
        os << json::train_to_json(tr);
    } else {
        const RunResult r = s.load_run(uuid);
        os << json::run_to_json(r, true) << json::run_to_json(r, false, -1);
        cli::print_run_summary(os, r, true, true);
        for (const auto& p : r.passes) os << s.layers(uuid, p.precision).size();
        for (const auto& b : s.benchmarks(uuid)) os << b.result.figures.size() << b.result.timer;
    }
    os << s.status(uuid) << s.error(uuid) << to_string(s.review(uuid).status);
    for (const auto& a : s.annotations(uuid)) os << a.text;
}

void read_all(const std::string& path, Store::Mode mode, bool do_export) {
    Store s(path, mode);
    storage::RunFilter all;
    const auto rows = s.list_runs(all);
    std::vector<std::string> compare_runs;
    for (size_t i = 0; i < rows.size() && i < kMaxRuns; ++i) {
        fuzz::guarded<StoreError>([&] { show(s, rows[i].uuid); });
        if (rows[i].kind == "compare") compare_runs.push_back(rows[i].uuid);
    }
    if (do_export && !compare_runs.empty()) {
        const std::string out = fuzz::scratch_path("export.ampscope");
        fuzz::guarded<StoreError>([&] { storage::export_runs(s, compare_runs, out); });
        fuzz::remove_db(out);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string path = fuzz::scratch_path("runs.sqlite");
    fuzz::remove_db(path);
    fuzz::write_file(path, data, size);
    fuzz::guarded<StoreError>([&] { read_all(path, Store::Mode::ReadOnly, true); });
    fuzz::guarded<StoreError>([&] { read_all(path, Store::Mode::ReadWrite, false); });
    fuzz::remove_db(path);
    return 0;
}
