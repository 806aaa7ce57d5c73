// SPDX-License-Identifier: MIT
#pragma once
// The skeleton every long job of the GUI shares (RunController, AdviseJob, ReplayJob): one
// worker thread at a time, a job id per start so that results of a stale job are dropped, an
// atomic cancel flag the engine polls (through ThrottledProgress), values handed to the UI
// thread as queued calls, and a destructor that cancels and joins. A job adds its start…()
// (which calls launch() with its work()) and its own signals.

#include <QObject>

#include <atomic>
#include <functional>
#include <thread>

namespace ampscope::ui {

class BackgroundJob : public QObject {
    Q_OBJECT
public:
    ~BackgroundJob() override;  ///< cancels and joins a running job
    /// Asks the running job to stop: the engine sees it at its next check.
    void cancel();
    bool running() const { return running_; }
    /// The id of the latest job started (0 before the first).
    quint64 jobId() const { return job_; }

Q_SIGNALS:
    /// Job `job` is starting: emitted on the UI thread before its worker runs.
    void started(quint64 job);

protected:
    explicit BackgroundJob(QObject* parent = nullptr);
    /// Starts `work(job)` on the worker thread under a new job id (started() first); false,
    /// and nothing started, when a job is going.
    bool launch(std::function<void(quint64 job)> work);
    /// Runs `fn` on the UI thread, unless by then another job has started or this is gone.
    void deliver(quint64 job, std::function<void()> fn);
    /// As deliver(), for the job's last word (finished, cancelled, failed): running() is
    /// false when `fn` runs.
    void deliverEnd(quint64 job, std::function<void()> fn);
    /// The cancel flag, for the engine's progress observer.
    std::atomic<bool>& cancelFlag() { return cancel_; }
    /// Cancels and joins. A job whose work() reads its own members calls it from its
    /// destructor, before those members go.
    void stop();

private:
    std::atomic<bool> cancel_{false};
    bool running_ = false;
    quint64 job_ = 0;
    std::thread worker_;
};

}  // namespace ampscope::ui
