// SPDX-License-Identifier: MIT
#include "replayjob.h"

#include "uitext.h"
#include "ampscope/engine/errors.h"
#include "ampscope/storage/errors.h"
#include "ampscope/storage/replay_record.h"
#include "throttledprogress.h"

namespace ampscope::ui {

ReplayJob::ReplayJob(QObject* parent)
    : BackgroundJob(parent), engine_([](const ReplaySpec& s, ProgressObserver* p) { return run_replay(s, p); }) {}

ReplayJob::~ReplayJob() {
    stop();  // work() reads engine_
}

bool ReplayJob::start(const ReplaySpec& spec, const QString& dbPath) {
    return launch([this, spec, path = dbPath.toStdString()](quint64 job) { work(job, spec, path); });
}

void ReplayJob::work(quint64 job, const ReplaySpec& spec, const std::string& dbPath) {
    ThrottledProgress prog(cancelFlag(), [this, job](const std::string& stage, int done, int total) {
        deliver(job, [this, stage, done, total] { Q_EMIT progress(QString::fromStdString(stage), done, total); });
    });
    auto fail = [&](const char* title, const std::exception& e) {
        deliverEnd(job, [this, title = QString::fromUtf8(title), msg = errorText(e)] { Q_EMIT failed(title, msg); });
    };
    try {
        ReplayResult r = engine_(spec, &prog);
        r.spec.original_run_id = spec.original_run_id;
        if (cancelFlag()) throw Cancelled();  // replayed, but the user no longer wants it: not recorded
        storage::Store store(dbPath);
        storage::record_replay(store, storage::replay_record_of(r));
        deliverEnd(job, [this, r = std::move(r)] { Q_EMIT finished(r); });
    } catch (const Cancelled&) {
        deliverEnd(job, [this] { Q_EMIT cancelled(); });
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
