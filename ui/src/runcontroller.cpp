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

bool RunController::start(const RunSpec& spec, const QString& db_path) {
    if (running_) return false;
    if (worker_.joinable()) worker_.join();
    spec_ = spec;
    cancel_ = false;
    running_ = true;
    const quint64 job = ++job_;
    Q_EMIT started(job);
    const std::string path = db_path.toStdString();
    worker_ = std::thread([this, job, path, spec = spec_] {
        std::string uuid;
        try {
            storage::Store store(path);
            Sink sink(store, [this, job](const std::string& u) {
                deliver(job, [this, u] { Q_EMIT partialResult(QString::fromStdString(u)); });
            });
            Progress prog(cancel_, [this, job](const std::string& stage, int permille) {
                deliver(job, [this, stage, permille] { Q_EMIT progress(QString::fromStdString(stage), permille); });
            });
            try {
                auto r = run_comparison(spec, &sink, &prog);
                uuid = r.run_id;
                const auto verdict = to_string(r.verdict);
                deliver(job, [this, uuid, verdict] {
                    running_ = false;
                    Q_EMIT finished(QString::fromStdString(uuid), QString::fromStdString(verdict));
                });
            } catch (const Cancelled&) {
                uuid = sink.run_uuid();
                deliver(job, [this, uuid] {
                    running_ = false;
                    Q_EMIT cancelled(QString::fromStdString(uuid));
                });
            } catch (const std::exception& e) {
                uuid = sink.run_uuid();
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
