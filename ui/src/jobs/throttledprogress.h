// SPDX-License-Identifier: MIT
#pragma once
// Engine progress for a worker thread: forwarded to `report` at most every 50 ms per stage
// (a stage's first and last step always), with the job's atomic cancel flag.

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "ampscope/engine/run.h"

namespace ampscope::ui {

class ThrottledProgress : public ProgressObserver {
public:
    using Report = std::function<void(const std::string& stage, int done, int total)>;
    ThrottledProgress(std::atomic<bool>& cancel, Report report) : cancel_(cancel), report_(std::move(report)) {}
    void progress(const std::string& stage, int done, int total) override {
        const auto now = std::chrono::steady_clock::now();
        if (stage == last_ && done != total && now - last_time_ < std::chrono::milliseconds(50)) return;
        last_ = stage;
        last_time_ = now;
        report_(stage, done, total);
    }
    bool cancel_requested() const override { return cancel_.load(); }

private:
    std::atomic<bool>& cancel_;
    Report report_;
    std::string last_;
    std::chrono::steady_clock::time_point last_time_{};
};

}  // namespace ampscope::ui
