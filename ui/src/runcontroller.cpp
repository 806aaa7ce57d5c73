// SPDX-License-Identifier: MIT
#include "runcontroller.h"

#include <QMetaObject>
#include <QPointer>

#include <chrono>

#include "ampscope/engine/errors.h"
#include "ampscope/storage/store.h"

namespace ampscope::ui {

namespace {

/// Forwards engine progress to the controller (throttled) and exposes its cancel flag.
class Progress : public ProgressObserver {
public:
    Progress(std::atomic<bool>& cancel, std::function<void(const std::string&, int)> report)
        : cancel_(cancel), report_(std::move(report)) {}
    void progress(const std::string& stage, int done, int total) override {
        const auto now = std::chrono::steady_clock::now();
        if (stage == last_ && done != total && now - last_time_ < std::chrono::milliseconds(50)) return;
        last_ = stage;
        last_time_ = now;
        report_(stage, total > 0 ? int(1000LL * done / total) : 0);
    }
    bool cancel_requested() const override { return cancel_.load(); }

private:
    std::atomic<bool>& cancel_;
    std::function<void(const std::string&, int)> report_;
    std::string last_;
    std::chrono::steady_clock::time_point last_time_{};
};

/// Records through RunWriter and tells the UI when a unit landed.
class Sink : public storage::RunWriter {
public:
    Sink(storage::Store& s, std::function<void(const std::string&)> landed) : RunWriter(s), landed_(std::move(landed)) {}
    void pass_finished(const PassResult& p) override {
        RunWriter::pass_finished(p);
        landed_(run_uuid());
    }
    void comparison_finished(const Comparison& c) override {
        RunWriter::comparison_finished(c);
        landed_(run_uuid());
    }

private:
    std::function<void(const std::string&)> landed_;
};

}  // namespace

RunController::RunController(QObject* parent) : QObject(parent) {}

RunController::~RunController() {
    cancel_ = true;
    if (worker_.joinable()) worker_.join();
}

void RunController::deliver(quint64 job, std::function<void()> fn) {
    QPointer<RunController> self(this);
    QMetaObject::invokeMethod(this, [self, job, fn = std::move(fn)] {
        if (self && self->job_ == job) fn();  // results of a stale job are dropped
    }, Qt::QueuedConnection);
}

/// Records training steps and tells the UI, at most about five times a second.
class TrainSinkUi : public storage::TrainWriter {
public:
    TrainSinkUi(storage::Store& s, std::function<void(const std::string&)> landed) : TrainWriter(s), landed_(std::move(landed)) {}
    void step_finished(const TrainStep& st) override {
        TrainWriter::step_finished(st);
        const auto now = std::chrono::steady_clock::now();
        if (now - last_ < std::chrono::milliseconds(200)) return;
        last_ = now;
        landed_(run_uuid());
    }

private:
    std::function<void(const std::string&)> landed_;
    std::chrono::steady_clock::time_point last_{};
};

bool RunController::start(const RunSpec& spec, const QString& db_path) {
    if (running_) return false;
    spec_ = spec;
    return launch([spec](storage::Store& store, ProgressObserver& prog, std::function<void(const std::string&)> landed,
                         std::string& uuid) {
        Sink sink(store, landed);
        try {
            auto r = run_comparison(spec, &sink, &prog);
            return std::make_pair(r.run_id, to_string(r.verdict));
        } catch (...) {
            uuid = sink.run_uuid();
            throw;
        }
    }, db_path);
}

bool RunController::startTraining(const TrainSpec& spec, const QString& db_path) {
    if (running_) return false;
    return launch([spec](storage::Store& store, ProgressObserver& prog, std::function<void(const std::string&)> landed,
                         std::string& uuid) {
        TrainSinkUi sink(store, landed);
        try {
            auto r = run_training(spec, &sink, &prog);
            return std::make_pair(r.run_id, std::to_string(r.effective_updates) + " of " + std::to_string(r.iterations) +
                                                " updates took effect");
        } catch (...) {
            uuid = sink.run_uuid();
            throw;
        }
    }, db_path);
}

bool RunController::launch(Work work, const QString& db_path) {
    if (worker_.joinable()) worker_.join();
    cancel_ = false;
    running_ = true;
    const quint64 job = ++job_;
    Q_EMIT started(job);
    const std::string path = db_path.toStdString();
    worker_ = std::thread([this, job, path, work = std::move(work)] {
        std::string uuid;
        try {
            storage::Store store(path);
            auto landed = [this, job](const std::string& u) {
                deliver(job, [this, u] { Q_EMIT partialResult(QString::fromStdString(u)); });
            };
            Progress prog(cancel_, [this, job](const std::string& stage, int permille) {
                deliver(job, [this, stage, permille] { Q_EMIT progress(QString::fromStdString(stage), permille); });
            });
            try {
                auto [id, verdict] = work(store, prog, landed, uuid);
                uuid = id;
                deliver(job, [this, uuid, verdict = verdict] {
                    running_ = false;
                    Q_EMIT finished(QString::fromStdString(uuid), QString::fromStdString(verdict));
                });
            } catch (const Cancelled&) {
                deliver(job, [this, uuid] {
                    running_ = false;
                    Q_EMIT cancelled(QString::fromStdString(uuid));
                });
            } catch (const std::exception& e) {
                const std::string msg = e.what();
                deliver(job, [this, uuid, msg] {
                    running_ = false;
                    Q_EMIT failed(QString::fromStdString(uuid), QString::fromStdString(msg));
                });
            }
        } catch (const std::exception& e) {  // the store could not be opened
            const std::string msg = e.what();
            deliver(job, [this, msg] {
                running_ = false;
                Q_EMIT failed(QString(), QString::fromStdString(msg));
            });
        }
    });
    return true;
}

void RunController::cancel() { cancel_ = true; }

}  // namespace ampscope::ui
