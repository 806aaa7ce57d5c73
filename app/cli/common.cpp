// SPDX-License-Identifier: MIT
#include "common.h"

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "ampscope/engine/errors.h"

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
        std::fprintf(stderr, "\nampscope-cli: interrupted twice: stopped inside the model; the run is recorded as cancelled\n");
        std::_Exit(130);
    }).detach();
}

}  // namespace

void install_signal_handlers() {
    start_abort_thread();
    std::signal(SIGINT, on_sigint);
    std::signal(SIGTERM, on_sigint);
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

std::string read_file(const std::string& path, const std::string& what) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw InputError(path, what, "a directory; expected a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, what, "cannot open file for reading");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_output(const std::string& path, const std::string& text, const std::string& what) {
    if (path == "-") {
        std::cout << text << std::endl;
        return;
    }
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw InputError(path, what, "cannot write to this path");
        out << text << "\n";
        if (!out) throw InputError(path, what, "write failed");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw InputError(path, what, "cannot replace the file");
}

void check_output_path(const std::string& path, const std::string& what) {
    if (path.empty() || path == "-") return;
    std::error_code ec;
    const auto p = std::filesystem::path(path);
    if (std::filesystem::is_directory(p, ec)) throw InputError(path, what, "a directory; expected a file path to write");
    const auto dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
    if (!std::filesystem::is_directory(dir, ec))
        throw InputError(path, what, "its folder " + dir.string() + " does not exist; expected a path in an existing folder");
    if (::access(dir.c_str(), W_OK) != 0) throw InputError(path, what, "its folder " + dir.string() + " is not writable");
}

}  // namespace ampscope::cli
