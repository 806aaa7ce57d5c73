// SPDX-License-Identifier: MIT
#include "advisejob.h"

#include "uitext.h"
#include "ampscope/engine/errors.h"
#include "throttledprogress.h"

namespace ampscope::ui {

AdviseJob::AdviseJob(QObject* parent)
    : BackgroundJob(parent),
      engine_([](const AdviseSpec& s, ProgressObserver* p, AdviseResult* partial) { return advise(s, p, partial); }) {}

AdviseJob::~AdviseJob() {
    stop();  // work() reads engine_
}

bool AdviseJob::start(const AdviseSpec& spec) {
    return launch([this, spec](quint64 job) { work(job, spec); });
}

void AdviseJob::work(quint64 job, const AdviseSpec& spec) {
    ThrottledProgress prog(cancelFlag(), [this, job](const std::string& stage, int done, int total) {
        deliver(job, [this, stage, done, total] { Q_EMIT progress(QString::fromStdString(stage), done, total); });
    });
    AdviseResult partial;
    auto fail = [&](const char* title, const std::exception& e) {
        deliverEnd(job, [this, title = QString::fromUtf8(title), msg = errorText(e), partial] {
            Q_EMIT failed(title, msg, partial);
        });
    };
    try {
        AdviseResult r = engine_(spec, &prog, &partial);
        deliverEnd(job, [this, r = std::move(r)] { Q_EMIT finished(r); });
    } catch (const Cancelled&) {
        deliverEnd(job, [this, partial] { Q_EMIT cancelled(partial); });
    } catch (const InputError& e) {
        fail("Cannot advise: bad input", e);
    } catch (const ModelError& e) {
        fail("Cannot advise: model error", e);
    } catch (const std::exception& e) {
        fail("Cannot advise", e);
    }
}

}  // namespace ampscope::ui
