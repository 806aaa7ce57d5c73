// SPDX-License-Identifier: MIT
#pragma once
// The precision advisor off the UI thread: the engine's advise() on a worker, its staged
// progress and its result (or, after a cancel or an error, what it found so far) delivered to
// the UI thread as values. Cancellation through an atomic flag; results of a stale job are
// dropped; the destructor cancels and joins.

#include <QObject>
#include <QString>

#include <atomic>
#include <functional>
#include <thread>

#include "ampscope/engine/advise.h"

namespace ampscope::ui {

class AdviseJob : public QObject {
    Q_OBJECT
public:
    /// What advises: the engine's advise(), unless a test installs another (setEngine).
    using Engine = std::function<AdviseResult(const AdviseSpec&, ProgressObserver*, AdviseResult* partial)>;

    explicit AdviseJob(QObject* parent = nullptr);
    ~AdviseJob() override;
    /// Starts advising on `spec`; false when a job is going.
    bool start(const AdviseSpec& spec);
    void cancel();
    bool running() const { return running_; }
    void setEngine(Engine engine) { engine_ = std::move(engine); }

Q_SIGNALS:
    /// A named stage ("reference", "amp passes", "fp32 check", "sensitivity", "search", "shares").
    void progress(const QString& stage, int done, int total);
    void finished(const ampscope::AdviseResult& result);
    /// Cancelled: `partial` holds what was found so far (e.g. the sensitivity).
    void cancelled(const ampscope::AdviseResult& partial);
    /// An error (InputError, ModelError, BackendError...): `title` names its kind.
    void failed(const QString& title, const QString& message, const ampscope::AdviseResult& partial);

private:
    void deliver(quint64 job, std::function<void()> fn);
    void work(quint64 job, const AdviseSpec& spec);
    Engine engine_;
    std::atomic<bool> cancel_{false};
    bool running_ = false;
    quint64 job_ = 0;
    std::thread worker_;
};

}  // namespace ampscope::ui
