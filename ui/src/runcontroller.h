// SPDX-License-Identifier: MIT
#pragma once
// Runs comparisons off the UI thread: engine + RunWriter on a worker, progress and results
// delivered as queued signals, cancellation through an atomic flag, stale jobs dropped.

#include <QObject>
#include <QString>

#include <atomic>
#include <memory>
#include <thread>

#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"

namespace ampscope::storage {
class Store;
}

namespace ampscope::ui {

class RunController : public QObject {
    Q_OBJECT
public:
    explicit RunController(QObject* parent = nullptr);
    ~RunController() override;  ///< cancels and joins a running job

    /// Starts a run recorded into `db_path`. The spec (criteria included) is frozen from here
    /// on: spec() returns the copy in use. Returns false when a run is already going.
    bool start(const RunSpec& spec, const QString& db_path);
    /// Starts a training run (FP32 reference and AMP side by side) recorded into `db_path`;
    /// partialResult follows the recorded steps (at most ~5 per second), finished's verdict
    /// says how many updates took effect.
    bool startTraining(const TrainSpec& spec, const QString& db_path);
    void cancel();
    bool running() const { return running_; }
    const RunSpec& spec() const { return spec_; }
    quint64 jobId() const { return job_; }

Q_SIGNALS:
    void started(quint64 job);
    /// Named stage with progress in 0..1000 (throttled to ~20 Hz).
    void progress(const QString& stage, int permille);
    /// A unit (pass, comparison) was recorded: views may refresh.
    void partialResult(const QString& run_uuid);
    void finished(const QString& run_uuid, const QString& verdict);
    void failed(const QString& run_uuid, const QString& message);
    void cancelled(const QString& run_uuid);

private:
    void deliver(quint64 job, std::function<void()> fn);
    /// Common worker: `work` runs the engine with the store, progress and landed callback and
    /// returns {uuid, verdict}; `uuid_now` tells the run id recorded so far (for failures).
    using Work = std::function<std::pair<std::string, std::string>(storage::Store&, ProgressObserver&,
                                                                   std::function<void(const std::string&)>, std::string&)>;
    bool launch(Work work, const QString& db_path);
    RunSpec spec_;
    std::atomic<bool> cancel_{false};
    bool running_ = false;
    quint64 job_ = 0;
    std::thread worker_;
};

}  // namespace ampscope::ui
