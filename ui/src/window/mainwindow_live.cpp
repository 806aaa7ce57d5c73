// SPDX-License-Identifier: MIT
// MainWindow: a run started here, shown from the values the run controller delivers. They
// are kept (live_) and, while the user looks at that run, appended to the views' models; the
// database is not read back. The user's selection in the run browser is left alone.
#include <QComboBox>
#include <QItemSelectionModel>
#include <QSortFilterProxyModel>
#include <QTabWidget>
#include <QTableView>
#include <QTextBrowser>
#include <QTimer>

#include "ampscope/engine/rules.h"
#include "mainwindow.h"
#include "comparemodel.h"
#include "flipmodel.h"
#include "layermodel.h"
#include "runlistmodel.h"
#include "samplemodel.h"
#include "trainingstepmodel.h"
#include "report.h"
#include "runcontroller.h"
#include "tokenview.h"

namespace ampscope::ui {

bool MainWindow::showingLive() const {
    return live_ && current_ == live_->uuid;
}

void MainWindow::listLive(const QString& status, bool select) {
    if (!live_) return;
    storage::RunRow row;
    if (const auto* known = runs_->find(live_->uuid.toStdString()))
        row = *known;
    else {
        row.uuid = live_->uuid.toStdString();
        row.kind = live_->training ? "train" : "compare";
        row.model = live_->training ? live_->train.spec.model : live_->run.model.source;
        row.device = live_->training ? live_->train.backend.device : live_->run.backend.device;
        row.started_at = live_->training ? live_->train.started_at : live_->run.started_at;
        row.status = "running";
        if (!live_->training)
            for (auto p : live_->run.spec.precisions)
                row.precisions += (row.precisions.empty() ? "fp32," : ",") + to_string(p);
    }
    if (!status.isEmpty()) row.status = status.toStdString();
    runs_->upsert(row);
    if (!select) return;
    for (int r = 0; r < runsProxy_->rowCount(); ++r) {  // the user started it: it becomes the current run once
        const QModelIndex i = runsProxy_->index(r, 0);
        if (i.data(RunListModel::UuidRole).toString() == live_->uuid)
            runView_->selectionModel()->setCurrentIndex(
                i, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    }
}

void MainWindow::liveRunStarted(const RunResult& header) {
    live_ = Live{QString::fromStdString(header.run_id), false, header, {}};
    listLive(QString(), true);
}

void MainWindow::liveTrainingStarted(const TrainResult& header) {
    live_ = Live{QString::fromStdString(header.run_id), true, {}, header};
    listLive(QString(), true);
}

void MainWindow::showLive() {
    if (!live_) return;
    setNotice(QString());
    current_ = live_->uuid;
    if (live_->training) {
        const QString keep = current_;
        clearViews();
        current_ = keep;
        steps_->resetData(live_->train.steps);
        tabs_->setCurrentIndex(kTrainingTab);
    } else {
        showComparison(live_->run, QString());
    }
    showLiveOverview();
}

void MainWindow::showLiveOverview() {
    const auto* row = runs_->find(live_->uuid.toStdString());
    const QString status = row ? QString::fromStdString(row->status) : QStringLiteral("running");
    if (!live_->training) {
        overview_->setHtml(overviewHtml(live_->run, status, {}, {}));
        return;
    }
    TrainResult run = live_->train;
    const auto totals = training_totals(run.steps, run.spec.scaler);
    run.iterations = totals.iterations;
    run.effective_updates = totals.effective_updates;
    run.skipped = totals.skipped;
    showTrainingRun(run, status);
}

/// Keeps `value` in the live run (and in the shown run when the user looks at it); true when
/// the views must append it.
template <class T>
static bool keep(std::optional<RunResult>& shown, RunResult& live, bool showing, std::vector<T> RunResult::*list,
                 const T& value) {
    (live.*list).push_back(value);
    if (showing) ((*shown).*list).push_back(value);
    return showing;
}

void MainWindow::livePass(const PassResult& pass) {
    if (!live_ || live_->training || !keep(run_, live_->run, showingLive(), &RunResult::passes, pass)) return;
    samples_->addPass(pass);
    addPassChoice(pass);
    showLiveOverview();
}

void MainWindow::liveComparison(const Comparison& cmp) {
    if (!live_ || live_->training || !keep(run_, live_->run, showingLive(), &RunResult::comparisons, cmp)) return;
    samples_->addComparison(cmp);
    flips_->addComparison(cmp);
    if (cmp.tokens) tokens_->setRun(*run_);  // the run's sequence comparisons so far
    showLiveOverview();
}

void MainWindow::liveSteps(const std::vector<TrainStep>& steps) {
    if (!live_ || !live_->training) return;
    live_->train.steps.insert(live_->train.steps.end(), steps.begin(), steps.end());
    if (!showingLive()) return;
    steps_->appendSteps(steps);                                // the table and charts follow their model
    if (!overviewLater_->isActive()) overviewLater_->start();  // the totals, at most a few times a second
}

void MainWindow::liveEnded(const QString& uuid, const QString& status) {
    setRunning(false);
    overviewLater_->stop();
    if (live_ && live_->uuid == uuid) {
        listLive(status, false);
        if (showingLive()) {
            if (!live_->training) run_ = live_->run;  // with its verdict (runCompleted)
            showLiveOverview();
        }
        live_.reset();  // a recorded run from now on: read from the database when selected
    }
    updateAdviseAction();
    refreshRuns();  // the list as recorded; the selection stays
    // the demo's next run; its replays (stages 3 and 4) go on from ReplayJob's signals
    if (demoStage_ == 1 || demoStage_ == 2) demoStep(uuid);
}

void MainWindow::startDemo() {
    demoStage_ = 1;
    if (!startRun(RunSpec{})) demoStage_ = 0;  // demo:transformer on its own probe set
}

void MainWindow::demoStep(const QString& finished) {
    if (demoStage_ == 1 && !finished.isEmpty()) {
        demoRun_ = finished;
        demoStage_ = 2;
        TrainSpec t;  // demo:transformer on its own training set: a few seconds on a CPU
        t.steps = kDemoTrainingSteps;
        if (startTraining(t)) return;
    }
    if (demoStage_ == 2)
        demoReplay(nullptr);
    else
        endDemo();
}

void MainWindow::endDemo() {
    demoStage_ = 0;
    if (!demoRun_.isEmpty()) {
        selectRuns({demoRun_}, demoRun_);
        showRun(demoRun_);  // the comparison tells the demo's story
    }
    Q_EMIT demoFinished();
}

}  // namespace ampscope::ui
