// SPDX-License-Identifier: MIT
#pragma once
// An incident replay off the UI thread: the engine's run_replay() on a worker (BackgroundJob:
// cancel, stale results dropped, the destructor cancels and joins), its progress, then the
// replay recorded in the database (kind "replay", storage::record_replay with the replay JSON
// as the CLI records it) and delivered to the UI thread as a value. A cancel or an error
// records nothing (the record is one insert, made only after a complete replay that was not
// cancelled).

#include <QString>

#include <functional>
#include <string>

#include "ampscope/engine/replay.h"
#include "backgroundjob.h"

namespace ampscope::ui {

class ReplayJob : public BackgroundJob {
    Q_OBJECT
public:
    /// What replays: the engine's run_replay(), unless a test installs another (setEngine).
    using Engine = std::function<ReplayResult(const ReplaySpec&, ProgressObserver*)>;

    explicit ReplayJob(QObject* parent = nullptr);
    ~ReplayJob() override;
    /// Replays `spec` and records it in the database at `dbPath`; false when a job is going.
    bool start(const ReplaySpec& spec, const QString& dbPath);
    void setEngine(Engine engine) { engine_ = std::move(engine); }

Q_SIGNALS:
    void progress(const QString& stage, int done, int total);
    /// Replayed and recorded (run id = result.run_id).
    void finished(const ampscope::ReplayResult& result);
    void cancelled();
    /// `title` names the kind of error (bad input, model error, cannot record); nothing recorded.
    void failed(const QString& title, const QString& message);

private:
    void work(quint64 job, const ReplaySpec& spec, const std::string& dbPath);
    Engine engine_;
};

}  // namespace ampscope::ui
