// SPDX-License-Identifier: MIT
// MainWindow: filling the views of one run (recorded: read from the database when selected),
// two runs compared, and exporting them.
#include <QComboBox>
#include <QFileDialog>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTextBrowser>

#include <QItemSelectionModel>

#include "ampscope/storage/json_io.h"
#include "charts.h"
#include "mainwindow.h"
#include "comparemodel.h"
#include "flipmodel.h"
#include "layermodel.h"
#include "runlistmodel.h"
#include "samplemodel.h"
#include "trainingstepmodel.h"
#include "replayview.h"
#include "report.h"
#include "tokenview.h"
#include "uitext.h"

namespace ampscope::ui {

void MainWindow::clearViews() {
    run_.reset();
    current_.clear();
    // an empty model is left alone: a reset costs its views a rebuild
    if (samples_->rowCount() || samples_->columnCount() > 3) samples_->clearData();
    if (flips_->rowCount()) flips_->clearData();
    if (layers_->rowCount()) layers_->clearData();
    if (steps_->rowCount()) steps_->clearData();
    tokens_->clear();
    replayView_->clear();
    {
        const QSignalBlocker block(passBox_);
        passBox_->clear();
    }
    keepButton_->setEnabled(false);
    updateAdviseAction();
    overview_->setHtml(QStringLiteral(
        "<h2>No run selected</h2><p>ampscope tells whether a model is safe to run in mixed precision (FP16, BF16): it "
        "runs an FP32 reference and AMP passes on probe samples, compares them against criteria fixed beforehand, and "
        "shows where NaN/Inf is born. Training runs put FP32 and AMP training side by side.</p>"
        "<p>Select a run in the run browser on the left, or start one: <b>File → New run…</b> (Ctrl+N) or "
        "<b>File → New training run…</b> (Ctrl+Shift+N). <code>ampscope --demo</code> records a demo of each.</p>"));
}

void MainWindow::showTrainingRun(const TrainResult& run, const QString& status) {
    auto header = run;  // the run's spec, backend and model as the training JSON, without its steps
    header.steps.clear();
    overview_->setHtml(
        QStringLiteral("<h2>Training run %1</h2><p>status <b>%2</b></p><p>%3 iterations, %4 effective updates, "
                       "%5 skipped</p><pre>%6</pre>")
            .arg(QString::fromStdString(run.run_id).left(8), status)
            .arg(run.steps.size())
            .arg(run.effective_updates)
            .arg(run.skipped)
            .arg(QString::fromStdString(json::train_to_json(header)).toHtmlEscaped()));
}

void MainWindow::showTraining(const QString& uuid) {
    const auto run = store_->load_training(uuid.toStdString());  // throws for a malformed run: showRun says so
    clearViews();
    setNotice(QString());
    current_ = uuid;
    steps_->resetData(run.steps);
    showTrainingRun(run, QString::fromStdString(store_->status(uuid.toStdString())));
    tabs_->setCurrentIndex(kTrainingTab);
}

void MainWindow::showUnreadable(const QString& uuid, const QString& message) {
    clearViews();
    current_ = uuid;
    overview_->setHtml(QStringLiteral("<h2>Run %1 cannot be read</h2><p style='color:#c82828'>%2</p>"
                                      "<p>The database file holds it, but its content is not what ampscope writes "
                                      "(edited by hand, or damaged). Other runs are not affected.</p>")
                           .arg(uuid.left(8), message.toHtmlEscaped()));
    setNotice(QStringLiteral("Run %1 cannot be read: %2").arg(uuid.left(8), message));
    tabs_->setCurrentIndex(kOverviewTab);
}

void MainWindow::showRun(const QString& uuid) {
    if (!store_ || uuid.isEmpty()) return;
    if (live_ && live_->uuid == uuid) {
        showLive();  // from the values the run delivered, not read back
        return;
    }
    std::vector<std::string> damaged;
    QString html;
    try {
        const auto id = uuid.toStdString();
        const auto kind = store_->kind(id);
        if (kind == "train" || kind == "replay") {
            kind == "train" ? showTraining(uuid) : showReplay(uuid);
            return;
        }
        run_ = store_->load_run(id, &damaged);
        html = overviewHtml(*run_, QString::fromStdString(store_->status(id)), store_->review(id),
                            store_->annotations(id), store_->benchmarks(id));
    } catch (const std::exception& e) {
        showUnreadable(uuid, QString::fromStdString(e.what()));
        return;
    }
    const RunResult run = *run_;
    showComparison(run, QString());
    if (tabs_->currentIndex() == kTrainingTab)
        tabs_->setCurrentIndex(kOverviewTab);  // a comparison run has no training view
    current_ = uuid;
    QString damage;
    for (const auto& d : damaged) damage += QStringLiteral("<li>%1</li>").arg(htmlText(d));
    if (!damage.isEmpty())
        html = QStringLiteral(
                   "<div style='color:#c82828'><h3>Damaged: parts of this run are left out</h3><ul>%1</ul></div>")
                   .arg(damage) +
               html;
    setNotice(damaged.empty() ? QString()
                              : QStringLiteral("Run %1 is damaged: %2 part(s) could not be read and are left out (%3)")
                                    .arg(uuid.left(8))
                                    .arg(damaged.size())
                                    .arg(storedText(damaged.front())));
    overview_->setHtml(html);
}

/// The comparison views from `run` (recorded, or a live run's values so far).
void MainWindow::showComparison(const RunResult& run, const QString& status) {
    const int previous = passBox_->currentIndex();
    const QString keep = current_;
    clearViews();
    current_ = keep;
    run_ = run;
    updateAdviseAction();
    if (!status.isEmpty()) overview_->setHtml(overviewHtml(run, status, {}, {}));
    samples_->resetData(run);
    flips_->resetData(run);
    tokens_->setRun(run);
    const QSignalBlocker block(passBox_);
    int preferred = -1;
    for (size_t i = 0; i < run.passes.size(); ++i) {
        passBox_->addItem(QString::fromStdString(to_string(run.passes[i].precision)));
        if (preferred < 0 && run.passes[i].origin) preferred = int(i);  // show where NaN is born
    }
    int pick = previous >= 0 && previous < passBox_->count() ? previous : (preferred >= 0 ? preferred : 0);
    if (previous < 0 && preferred >= 0) pick = preferred;
    passBox_->setCurrentIndex(pick);
    showLayersOf(pick);
}

void MainWindow::addPassChoice(const PassResult& pass) {
    const bool first = passBox_->count() == 0;
    passBox_->addItem(QString::fromStdString(to_string(pass.precision)));  // the user's choice stays
    if (first) showLayersOf(0);
}

void MainWindow::showLayersOf(int i) {
    if (!run_ || i < 0 || i >= int(run_->passes.size())) {
        layers_->clearData();
        return;
    }
    const auto& p = run_->passes[size_t(i)];
    layers_->resetData(p);  // the layer chart follows its model
    keepButton_->setEnabled(p.precision != Precision::Fp32);
    const bool fp8 = is_fp8(p.precision);
    keepButton_->setText(fp8 ? QStringLiteral("Keep selected module in BF16 and re-run")
                             : QStringLiteral("Keep selected module in FP32 and re-run"));
    keepButton_->setToolTip(
        fp8 ? QStringLiteral(
                  "Starts a run with the same model, probes and criteria, and the selected module left out of "
                  "FP8 in BF16 (Keep in BF16)")
            : QStringLiteral(
                  "Starts a run with the same model, probes and criteria, and the selected module as an FP32 "
                  "region"));
}

void MainWindow::compareSelected() {
    QStringList ids;
    for (const auto& i : runView_->selectionModel()->selectedRows()) ids << i.data(RunListModel::UuidRole).toString();
    if (ids.size() != 2) {
        error(QStringLiteral("Compare"), QStringLiteral("Select exactly two comparison runs in the run browser."));
        return;
    }
    compareRuns(ids[0], ids[1]);
}

void MainWindow::compareRuns(const QString& a, const QString& b) {
    if (!store_) return;
    RunResult ra, rb;
    try {
        ra = store_->load_run(a.toStdString());
        rb = store_->load_run(b.toStdString());
    } catch (const std::exception& e) {
        error(QStringLiteral("Compare"), QString::fromStdString(e.what()));
        return;
    }
    compareText_->setHtml(compareHtml(ra, rb));
    compare_->resetData(ra, rb);  // the chart and table follow the model
    tabs_->setCurrentIndex(kCompareTab);
}

void MainWindow::exportReport() {
    if (!run_) return;
    const auto path = QFileDialog::getSaveFileName(this, QStringLiteral("Export report"),
                                                   QStringLiteral("ampscope-%1.html").arg(current_.left(8)),
                                                   QStringLiteral("HTML (*.html)"));
    if (path.isEmpty()) return;
    const auto err =
        writeReport(*run_, QString::fromStdString(store_->status(current_.toStdString())),
                    store_->review(current_.toStdString()), store_->annotations(current_.toStdString()), path);
    if (!err.isEmpty())
        error(QStringLiteral("Cannot export report"), err);
    else
        statusBar()->showMessage(QStringLiteral("report written to %1").arg(path), 10000);
}

ChartWidget* MainWindow::currentChart() const {
    for (auto* c : tabs_->currentWidget()->findChildren<ChartWidget*>())
        if (c->isVisible()) return c;
    return nullptr;
}

void MainWindow::exportCurrentChart() {
    ChartWidget* c = currentChart();
    if (c) c->exportInteractively();
}

void MainWindow::exportCurrentTable() {
    QTableView* v = tabs_->currentIndex() == kReplayTab ? replayView_->currentTable() : tables_[tabs_->currentIndex()];
    const auto path = QFileDialog::getSaveFileName(this, QStringLiteral("Export table"), QStringLiteral("table.csv"),
                                                   QStringLiteral("CSV (*.csv)"));
    if (path.isEmpty()) return;
    const auto err = writeCsv(v->model(), path);
    if (!err.isEmpty()) error(QStringLiteral("Cannot export table"), err);
}

}  // namespace ampscope::ui
