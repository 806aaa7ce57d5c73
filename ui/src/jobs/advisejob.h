// SPDX-License-Identifier: MIT
#pragma once
// The precision advisor off the UI thread: the engine's advise() on a worker (BackgroundJob:
// cancel, stale results dropped, the destructor cancels and joins), its staged progress and
// its result (or, after a cancel or an error, what it found so far) delivered to the UI
// thread as values.

#include <QString>

#include <functional>

#include "ampscope/engine/advise.h"
#include "backgroundjob.h"

namespace ampscope::ui {

class AdviseJob : public BackgroundJob {
    Q_OBJECT
public:
    /// What advises: the engine's advise(), unless a test installs another (setEngine).
    using Engine = std::function<AdviseResult(const AdviseSpec&, ProgressObserver*, AdviseResult* partial)>;

    explicit AdviseJob(QObject* parent = nullptr);
    ~AdviseJob() override;
    /// Starts advising on `spec`; false when a job is going.
    bool start(const AdviseSpec& spec);
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
    void work(quint64 job, const AdviseSpec& spec);
    Engine engine_;
};

}  // namespace ampscope::ui
