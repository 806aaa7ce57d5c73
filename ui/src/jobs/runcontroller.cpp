// SPDX-License-Identifier: MIT
#include "runcontroller.h"

#include <memory>
#include <mutex>

#include "uitext.h"
#include "ampscope/engine/errors.h"
#include "ampscope/storage/store.h"
#include "throttledprogress.h"

namespace ampscope::ui {

/// Steps produced on the worker, waiting for the UI thread: one delivery is pending at a time
/// and takes every step queued until it runs, so a busy UI thread gets fewer, larger batches.
class RunController::StepQueue {
public:
    /// True when the caller must schedule a delivery (none pending).
    bool push(const TrainStep& s) {
        std::lock_guard<std::mutex> lock(m_);
        steps_.push_back(s);
        const bool schedule = !pending_;
        pending_ = true;
        return schedule;
    }
    std::vector<TrainStep> take() {
        std::lock_guard<std::mutex> lock(m_);
        pending_ = false;
        return std::exchange(steps_, {});
    }

private:
    std::mutex m_;
    std::vector<TrainStep> steps_;
    bool pending_ = false;
};

namespace {

/// A writer (RunWriter, TrainWriter) that also hands what it recorded to the UI thread:
/// `emit(signal, value)` emits the controller's signal there with a copy of the value.
template <class Writer>
class Live : public Writer {
public:
    Live(storage::Store& s, RunController* c, std::function<void(std::function<void()>)> deliver)
        : Writer(s), c_(c), deliver_(std::move(deliver)) {}

protected:
    template <class T>
    void emit(void (RunController::*signal)(const T&), const T& value) {
        deliver_([c = c_, signal, value] { (c->*signal)(value); });
    }
    RunController* c_;
    std::function<void(std::function<void()>)> deliver_;
};

}  // namespace

/// Records through RunWriter and hands each result to the UI thread as a value.
class RunController::LiveRunSink : public Live<storage::RunWriter> {
public:
    using Live::Live;
    // recorded first, then handed over
    void run_started(const RunResult& h) override { RunWriter::run_started(h), emit(&RunController::runStarted, h); }
    void pass_finished(const PassResult& p) override {
        RunWriter::pass_finished(p), emit(&RunController::passFinished, p);
    }
    void comparison_finished(const Comparison& c) override {
        RunWriter::comparison_finished(c), emit(&RunController::comparisonFinished, c);
    }
    void run_finished(const RunResult& r) override {
        RunWriter::run_finished(r), emit(&RunController::runCompleted, r);
    }
};

/// Records through TrainWriter and hands the steps to the UI thread (StepQueue).
class RunController::LiveTrainSink : public Live<storage::TrainWriter> {
public:
    using Live::Live;
    void train_started(const TrainResult& h) override {
        TrainWriter::train_started(h), emit(&RunController::trainingStarted, h);
    }
    void step_finished(const TrainStep& st) override {
        TrainWriter::step_finished(st);
        if (queue_->push(st)) deliver_([c = c_, queue = queue_] { Q_EMIT c->stepsFinished(queue->take()); });
    }

private:
    std::shared_ptr<StepQueue> queue_ = std::make_shared<StepQueue>();
};

RunController::RunController(QObject* parent)
    : BackgroundJob(parent),
      comparison_([](const RunSpec& s, RunSink* sink, ProgressObserver* p) { return run_comparison(s, sink, p); }),
      training_([](const TrainSpec& s, TrainSink* sink, ProgressObserver* p) { return run_training(s, sink, p); }) {}

RunController::~RunController() {
    stop();  // the worker runs runWorker() on this
}

void RunController::setEngines(ComparisonEngine comparison, TrainingEngine training) {
    if (comparison) comparison_ = std::move(comparison);
    if (training) training_ = std::move(training);
}

bool RunController::start(const RunSpec& spec, const QString& db_path) {
    if (running()) return false;
    spec_ = spec;
    return launchRun(
        [this, spec, engine = comparison_](quint64 job, storage::Store& store, ProgressObserver& prog,
                                           std::string& uuid) {
            LiveRunSink sink(store, this, [this, job](std::function<void()> fn) { deliver(job, std::move(fn)); });
            try {
                auto r = engine(spec, &sink, &prog);
                return std::make_pair(r.run_id, to_string(r.verdict));
            } catch (...) {
                uuid = sink.run_uuid();
                throw;
            }
        },
        db_path);
}

bool RunController::startTraining(const TrainSpec& spec, const QString& db_path) {
    return launchRun(
        [this, spec, engine = training_](quint64 job, storage::Store& store, ProgressObserver& prog,
                                         std::string& uuid) {
            LiveTrainSink sink(store, this, [this, job](std::function<void()> fn) { deliver(job, std::move(fn)); });
            try {
                auto r = engine(spec, &sink, &prog);
                return std::make_pair(r.run_id, std::to_string(r.effective_updates) + " of " +
                                                    std::to_string(r.iterations) + " updates took effect");
            } catch (...) {
                uuid = sink.run_uuid();
                throw;
            }
        },
        db_path);
}

bool RunController::launchRun(Work work, const QString& db_path) {
    return BackgroundJob::launch(
        [this, path = db_path.toStdString(), work = std::move(work)](quint64 job) { runWorker(job, path, work); });
}

void RunController::runWorker(quint64 job, const std::string& path, const Work& work) {
    auto end = [this, job](auto signal, const std::string& uuid, const std::string& text) {
        deliverEnd(job, [this, signal, uuid, text] {
            (this->*signal)(QString::fromStdString(uuid), QString::fromStdString(text));
        });
    };
    std::string uuid;
    try {
        storage::Store store(path);
        ThrottledProgress prog(cancelFlag(), [this, job](const std::string& stage, int done, int total) {
            const int permille = total > 0 ? int(1000LL * done / total) : 0;
            deliver(job, [this, stage, permille] { Q_EMIT progress(QString::fromStdString(stage), permille); });
        });
        try {
            auto [id, verdict] = work(job, store, prog, uuid);
            end(&RunController::finished, id, verdict);
        } catch (const Cancelled&) {
            deliverEnd(job, [this, uuid] { Q_EMIT cancelled(QString::fromStdString(uuid)); });
        } catch (const std::exception& e) {
            end(&RunController::failed, uuid, errorText(e).toStdString());
        }
    } catch (const std::exception& e) {  // the store could not be opened
        end(&RunController::failed, std::string(), e.what());
    }
}

}  // namespace ampscope::ui
