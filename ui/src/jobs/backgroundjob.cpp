// SPDX-License-Identifier: MIT
#include "backgroundjob.h"

#include <QMetaObject>
#include <QPointer>

namespace ampscope::ui {

BackgroundJob::BackgroundJob(QObject* parent) : QObject(parent) {}

BackgroundJob::~BackgroundJob() {
    stop();
}

void BackgroundJob::stop() {
    cancel_ = true;
    if (worker_.joinable()) worker_.join();
}

void BackgroundJob::cancel() {
    cancel_ = true;
}

bool BackgroundJob::launch(std::function<void(quint64 job)> work) {
    if (running_) return false;
    if (worker_.joinable()) worker_.join();
    cancel_ = false;
    running_ = true;
    const quint64 job = ++job_;
    Q_EMIT started(job);
    worker_ = std::thread([job, work = std::move(work)] { work(job); });
    return true;
}

void BackgroundJob::deliver(quint64 job, std::function<void()> fn) {
    QPointer<BackgroundJob> self(this);
    QMetaObject::invokeMethod(
        this,
        [self, job, fn = std::move(fn)] {
            if (self && self->job_ == job) fn();  // results of a stale job are dropped
        },
        Qt::QueuedConnection);
}

void BackgroundJob::deliverEnd(quint64 job, std::function<void()> fn) {
    deliver(job, [this, fn = std::move(fn)] {
        running_ = false;
        fn();
    });
}

}  // namespace ampscope::ui
