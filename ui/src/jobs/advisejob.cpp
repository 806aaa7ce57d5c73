// SPDX-License-Identifier: MIT
#include "advisejob.h"

#include <QMetaObject>
#include <QPointer>

#include "ampscope/engine/errors.h"
#include "throttledprogress.h"

namespace ampscope::ui {

AdviseJob::AdviseJob(QObject* parent)
    : QObject(parent), engine_([](const AdviseSpec& s, ProgressObserver* p, AdviseResult* partial) { return advise(s, p, partial); }) {}

AdviseJob::~AdviseJob() {
    cancel_ = true;
    if (worker_.joinable()) worker_.join();
}

void AdviseJob::deliver(quint64 job, std::function<void()> fn) {
    QPointer<AdviseJob> self(this);
    QMetaObject::invokeMethod(
        this,
        [self, job, fn = std::move(fn)] {
            if (self && self->job_ == job) fn();  // results of a stale job are dropped
        },
        Qt::QueuedConnection);
}

bool AdviseJob::start(const AdviseSpec& spec) {
    if (running_) return false;
    if (worker_.joinable()) worker_.join();
    cancel_ = false;
    running_ = true;
    const quint64 job = ++job_;
    worker_ = std::thread([this, job, spec] { work(job, spec); });
    return true;
}

void AdviseJob::cancel() {
    cancel_ = true;
}

void AdviseJob::work(quint64 job, const AdviseSpec& spec) {
    ThrottledProgress prog(cancel_, [this, job](const std::string& stage, int done, int total) {
        deliver(job, [this, stage, done, total] { Q_EMIT progress(QString::fromStdString(stage), done, total); });
    });
    AdviseResult partial;
    auto fail = [&](const char* title, const std::exception& e) {
        deliver(job, [this, title = QString::fromUtf8(title), msg = QString::fromStdString(e.what()), partial] {
            running_ = false;
            Q_EMIT failed(title, msg, partial);
        });
    };
    try {
        AdviseResult r = engine_(spec, &prog, &partial);
        deliver(job, [this, r = std::move(r)] {
            running_ = false;
            Q_EMIT finished(r);
        });
    } catch (const Cancelled&) {
        deliver(job, [this, partial] {
            running_ = false;
            Q_EMIT cancelled(partial);
        });
    } catch (const InputError& e) {
        fail("Cannot advise: bad input", e);
    } catch (const ModelError& e) {
        fail("Cannot advise: model error", e);
    } catch (const std::exception& e) {
        fail("Cannot advise", e);
    }
}

}  // namespace ampscope::ui
