// SPDX-License-Identifier: MIT
#include "replayjob.h"

#include <QMetaObject>
#include <QPointer>

#include "ampscope/engine/errors.h"
#include "ampscope/storage/errors.h"
#include "ampscope/storage/replay_record.h"
#include "throttledprogress.h"

namespace ampscope::ui {

ReplayJob::ReplayJob(QObject* parent)
    : QObject(parent), engine_([](const ReplaySpec& s, ProgressObserver* p) { return run_replay(s, p); }) {}

ReplayJob::~ReplayJob() {
    cancel_ = true;
    if (worker_.joinable()) worker_.join();
}

void ReplayJob::deliver(quint64 job, std::function<void()> fn) {
    QPointer<ReplayJob> self(this);
    QMetaObject::invokeMethod(
        this,
        [self, job, fn = std::move(fn)] {
            if (self && self->job_ == job) fn();  // results of a stale job are dropped
        },
        Qt::QueuedConnection);
}

bool ReplayJob::start(const ReplaySpec& spec, const QString& dbPath) {
    if (running_) return false;
    if (worker_.joinable()) worker_.join();
    cancel_ = false;
    running_ = true;
    const quint64 job = ++job_;
    worker_ = std::thread([this, job, spec, path = dbPath.toStdString()] { work(job, spec, path); });
    return true;
}

void ReplayJob::cancel() {
    cancel_ = true;
}

void ReplayJob::work(quint64 job, const ReplaySpec& spec, const std::string& dbPath) {
    ThrottledProgress prog(cancel_, [this, job](const std::string& stage, int done, int total) {
        deliver(job, [this, stage, done, total] { Q_EMIT progress(QString::fromStdString(stage), done, total); });
    });
    auto fail = [&](const char* title, const std::exception& e) {
        deliver(job, [this, title = QString::fromUtf8(title), msg = QString::fromStdString(e.what())] {
            running_ = false;
            Q_EMIT failed(title, msg);
        });
    };
    try {
        ReplayResult r = engine_(spec, &prog);
        r.spec.original_run_id = spec.original_run_id;
        if (cancel_) throw Cancelled();  // replayed, but the user no longer wants it: not recorded
        storage::Store store(dbPath);
        storage::record_replay(store, storage::replay_record_of(r));
        deliver(job, [this, r = std::move(r)] {
            running_ = false;
            Q_EMIT finished(r);
        });
    } catch (const Cancelled&) {
        deliver(job, [this] {
            running_ = false;
            Q_EMIT cancelled();
        });
    } catch (const InputError& e) {
        fail("Cannot replay: bad input", e);
    } catch (const ModelError& e) {
        fail("Cannot replay: model error", e);
    } catch (const storage::StoreError& e) {
        fail("Cannot record the replay", e);
    } catch (const std::exception& e) {
        fail("Cannot replay", e);
    }
}

}  // namespace ampscope::ui
