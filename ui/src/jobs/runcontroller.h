// SPDX-License-Identifier: MIT
#pragma once
// Runs comparisons and training runs off the UI thread: engine + RunWriter/TrainWriter on a
// worker; the results themselves (header, passes, comparisons, steps) delivered to the UI
// thread as queued signals carrying the values, so the views append them without reading the
// database back. The worker, cancel and stale results as every job's (BackgroundJob).

#include <QString>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"
#include "backgroundjob.h"

namespace ampscope::storage {
class Store;
}

namespace ampscope::ui {

class RunController : public BackgroundJob {
    Q_OBJECT
public:
    /// What runs a comparison / a training run: the engine's run_comparison / run_training,
    /// unless a test or benchmark installs another (setEngines).
    using ComparisonEngine = std::function<RunResult(const RunSpec&, RunSink*, ProgressObserver*)>;
    using TrainingEngine = std::function<TrainResult(const TrainSpec&, TrainSink*, ProgressObserver*)>;

    explicit RunController(QObject* parent = nullptr);
    ~RunController() override;  ///< cancels and joins a running job

    /// Starts a run recorded into `db_path`. The spec (criteria included) is frozen from here
    /// on: spec() returns the copy in use. Returns false when a run is already going.
    bool start(const RunSpec& spec, const QString& db_path);
    /// Starts a training run (FP32 reference and AMP side by side) recorded into `db_path`;
    /// stepsFinished follows the steps as they are produced, finished's verdict says how many
    /// updates took effect.
    bool startTraining(const TrainSpec& spec, const QString& db_path);
    const RunSpec& spec() const { return spec_; }
    void setEngines(ComparisonEngine comparison, TrainingEngine training);

Q_SIGNALS:
    /// Named stage with progress in 0..1000 (throttled to ~20 Hz).
    void progress(const QString& stage, int permille);
    /// A comparison run started: spec, criteria, backend, model, probes and samples (no passes).
    void runStarted(const ampscope::RunResult& header);
    void passFinished(const ampscope::PassResult& pass);
    void comparisonFinished(const ampscope::Comparison& comparison);
    /// The whole record of a comparison run that completed (before finished).
    void runCompleted(const ampscope::RunResult& result);
    /// A training run started: spec, backend, model (no steps).
    void trainingStarted(const ampscope::TrainResult& header);
    /// Steps in order, as produced; several at once when the UI thread was busy.
    void stepsFinished(const std::vector<ampscope::TrainStep>& steps);
    void finished(const QString& run_uuid, const QString& verdict);
    void failed(const QString& run_uuid, const QString& message);
    void cancelled(const QString& run_uuid);

private:
    class StepQueue;
    class LiveRunSink;
    class LiveTrainSink;
    /// Common worker: `work` runs the engine with the store and progress and returns {uuid,
    /// verdict}; `uuid_now` tells the run id recorded so far (for failures).
    using Work = std::function<std::pair<std::string, std::string>(quint64 job, storage::Store&, ProgressObserver&,
                                                                   std::string& uuid_now)>;
    bool launchRun(Work work, const QString& db_path);
    void runWorker(quint64 job, const std::string& path, const Work& work);
    RunSpec spec_;
    ComparisonEngine comparison_;
    TrainingEngine training_;
};

}  // namespace ampscope::ui
