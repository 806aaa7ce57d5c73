// SPDX-License-Identifier: MIT
#include "common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "ampscope/engine/distributed.h"
#include "ampscope/engine/errors.h"
#include "ampscope/engine/text.h"
#include "ampscope/storage/input_file.h"
#include "checks.h"

namespace ampscope::cli {

namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signals{0};
int g_abort_pipe[2] = {-1, -1};

extern "C" void on_sigint(int) {
    g_interrupted.store(true);
    if (g_signals.fetch_add(1) >= 1 && g_abort_pipe[1] >= 0) {
        const char c = 1;
        [[maybe_unused]] const auto n = write(g_abort_pipe[1], &c, 1);
    }
}

std::mutex g_abort_mutex;
std::function<void()> g_on_abort;  ///< marks the current run cancelled (set while one records)

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
        std::fprintf(stderr,
                     "\nampscope-cli: interrupted twice: stopped inside the model; the run is recorded as cancelled\n");
        std::_Exit(130);
    }).detach();
}

}  // namespace

void install_signal_handlers() {
    start_abort_thread();
    std::signal(SIGINT, on_sigint);
    std::signal(SIGTERM, on_sigint);
}

CLI::Option* add_output_option(CLI::App* app, std::string& output) {
    return app
        ->add_option("--output", output,
                     "the output compared, for torch.export programs with several outputs: a name from its output tree "
                     "(e.g. cls) or an index; default: the first tensor output")
        ->check(checks::NonEmpty("an output name or index"));
}

void refuse_under_torchrun(const std::string& command) {
    if (distributed_env())
        throw InputError("environment", "WORLD_SIZE",
                         "ampscope-cli " + command +
                             " runs in one process; under torchrun only `run` shares its work between the ranks "
                             "(start " +
                             command + " without torchrun)");
}

bool interrupted() {
    return g_interrupted.load();
}

AbortAction::AbortAction(std::function<void()> f) {
    std::lock_guard<std::mutex> l(g_abort_mutex);
    g_on_abort = std::move(f);
}

AbortAction::~AbortAction() {
    std::lock_guard<std::mutex> l(g_abort_mutex);
    g_on_abort = nullptr;
}

void TerminalProgress::progress(const std::string& stage, int done, int total) {
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

bool TerminalProgress::cancel_requested() const {
    return g_interrupted.load() || cancel.load();
}

void TerminalProgress::clear() {
    if (enabled_) std::fprintf(stderr, "\r\033[K");
}

std::unique_ptr<storage::Store> recording_store(bool no_db, const std::string& db, bool init_db) {
    if (no_db) return nullptr;
    return std::make_unique<storage::Store>(storage::default_db_path(db), storage::Store::Mode::Create, init_db);
}

std::string read_file(const std::string& path, const std::string& what, size_t max_bytes) {
    return storage::read_small_file(path, what, max_bytes);
}

namespace {

/// field (as the engine and storage name it) -> the flag that sets it
const std::map<std::string, std::string>& flag_of_field() {
    static const std::map<std::string, std::string> table = {{"accumulate", "--accumulate"},
                                                             {"backoff_factor", "--backoff-factor"},
                                                             {"growth_factor", "--growth-factor"},
                                                             {"lr", "--lr"},
                                                             {"momentum", "--momentum"},
                                                             {"weight_decay", "--weight-decay"},
                                                             {"batch_size", "--batch-size"},
                                                             {"checkpoint_every", "--checkpoint-every"},
                                                             {"clip_grad_norm", "--clip-grad-norm"},
                                                             {"device", "--device"},
                                                             {"granularity", "--granularity"},
                                                             {"growth_interval", "--growth-interval"},
                                                             {"init_scale", "--init-scale"},
                                                             {"keep_fp32", "--keep-fp32"},
                                                             {"keep_bf16", "--keep-bf16"},
                                                             {"fp8_what_if", "--fp8-what-if"},
                                                             {"fp8_all_gemms", "--fp8-all-gemms"},
                                                             {"rowwise_gw_hp", "--rowwise-gw-hp"},
                                                             {"fp8_real_gemm", "--fp8-real-gemm"},
                                                             {"fp8_amax_history", "--fp8-amax-history"},
                                                             {"fp8_margin", "--fp8-margin"},
                                                             {"fp8_weight_cache", "--fp8-weight-cache"},
                                                             {"mx_scaling", "--mx-scaling"},
                                                             {"layer", "--layer"},
                                                             {"loss", "--loss"},
                                                             {"lr_schedule", "--lr-schedule"},
                                                             {"mask_input", "--mask-input"},
                                                             {"optimizer", "--optimizer"},
                                                             {"output", "--output"},
                                                             {"precision", "--precision"},
                                                             {"repeats", "--repeats"},
                                                             {"sample", "--sample"},
                                                             {"sequence_axis", "--sequence-axis"},
                                                             {"steps", "--steps"},
                                                             {"warmup", "--warmup"},
                                                             // settings errors name as remedies (Remedy)
                                                             {"force", "--force"},
                                                             {"no_db", "--no-db"},
                                                             {"strip_prefix", "--strip-prefix"},
                                                             {"non_strict", "--non-strict"}};
    return table;
}

/// field that names a file -> the flag that gives it
const std::map<std::string, std::string>& flag_of_file_field() {
    static const std::map<std::string, std::string> table = {{"model", "--model"},
                                                             {"probes", "--probes"},
                                                             {"data", "--data"},
                                                             {"batch_file", "--batch"},
                                                             {"optimizer_state", "--optimizer-state"},
                                                             {"param_groups_file", "--param-groups"},
                                                             {"checkpoint", "--checkpoint"},
                                                             {"checkpoint_dir", "--checkpoint-dir"},
                                                             {"resume", "--resume"}};
    return table;
}

}  // namespace

long field_index(const std::string& field) {
    const auto open = field.find('[');
    if (open == std::string::npos || field.back() != ']') return -1;
    try {
        return std::stol(field.substr(open + 1, field.size() - open - 2));
    } catch (const std::exception&) {
        return -1;
    }
}

std::string remedy_flags(const std::vector<Remedy>& remedies) {
    std::string said;
    for (const auto& r : remedies) {
        const std::string* flag = nullptr;
        for (const auto* table : {&flag_of_field(), &flag_of_file_field()})
            if (const auto it = table->find(r.field); !flag && it != table->end()) flag = &it->second;
        if (!flag) continue;  // a setting the CLI has no flag for: the words alone
        said += (said.empty() ? "" : " or ") + *flag + (r.value.empty() ? "" : " " + r.value);
    }
    return said.empty() ? said : " (ampscope-cli: " + said + ")";
}

InputError named_by_flag(const InputError& e) {
    const std::string expected = e.expected() + remedy_flags(e.remedies());
    if (!e.file().empty()) {  // a file given by a flag: the field says which flag gave it
        const auto it = flag_of_file_field().find(e.field());
        return InputError(e.file(), it == flag_of_file_field().end() ? e.field() : it->second, expected);
    }
    const auto field = e.field().substr(0, e.field().find('['));
    const auto it = flag_of_field().find(field);
    return it == flag_of_field().end() ? InputError("", e.field(), expected) : InputError(it->second, "", expected);
}

void write_output(const std::string& path, const std::string& text, const std::string& what, bool json) {
    const std::string out = json ? escape_c1_in_json(text) : text;
    if (path != "-") {
        storage::write_output_file(path, what, out + "\n");
        return;
    }
    std::cout << out << std::endl;
    if (!std::cout) throw storage::OutputWriteError("-: " + what + ": cannot write to standard output");
}

std::vector<storage::ProtectedFile> protected_inputs(bool no_db, const std::string& db,
                                                     const std::vector<std::pair<std::string, std::string>>& files) {
    std::vector<storage::ProtectedFile> out;
    if (!no_db) out = storage::protected_database(storage::default_db_path(db), "the run database (--db)");
    for (const auto& [role, path] : files)
        if (!path.empty() && path != "demo" && path.rfind("demo:", 0) != 0) out.push_back({path, role});
    return out;
}

void check_output_path(const std::string& path, const std::string& what, storage::OutputKind kind,
                       const std::vector<storage::ProtectedFile>& inputs, bool force) {
    if (path.empty() || path == "-") return;
    storage::check_output_file(path, what, kind, inputs, force);
}

}  // namespace ampscope::cli
