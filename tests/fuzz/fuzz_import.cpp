// SPDX-License-Identifier: MIT
// Fuzz target: `import FILE`, an .ampscope file from someone else merged into a fresh run
// database by storage::import_file. What an import accepted is then read back like any
// recorded run (it must load: the file was validated), and a second import of the same file
// must add nothing (runs are keyed by UUID).
#include <cstdint>
#include <filesystem>
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

const std::string& empty_db() {
    static const std::string path = [] {
        const auto p = fuzz::scratch_path("empty.sqlite");
        { Store s(p); }  // created and migrated once; copied for every input
        return p;
    }();
    return path;
}

void read_back(const Store& s) {
    storage::RunFilter all;
    std::ostringstream os;
    for (const auto& row : s.list_runs(all)) {
        const RunResult r = s.load_run(row.uuid);
        os << json::run_to_json(r, true);
        cli::print_run_summary(os, r, true, false);
        for (const auto& a : s.annotations(row.uuid)) os << a.text;
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    empty_db();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string bundle = fuzz::scratch_path("in.ampscope"), db = fuzz::scratch_path("into.sqlite");
    fuzz::remove_db(db);
    fuzz::remove_db(bundle);
    fuzz::write_file(bundle, data, size);
    std::filesystem::copy_file(empty_db(), db);
    fuzz::guarded<StoreError>([&] {
        Store into(db);
        const auto first = storage::import_file(into, bundle);
        if (first.added == 0) return;
        try {
            read_back(into);
        } catch (const std::exception& e) {
            fuzz::finding(std::string("an imported run cannot be read back: ") + e.what());
        }
        const auto again = storage::import_file(into, bundle);
        if (again.added != 0) fuzz::finding("importing the same file twice added runs");
    });
    fuzz::remove_db(db);
    fuzz::remove_db(bundle);
    return 0;
}
