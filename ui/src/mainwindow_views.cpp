// SPDX-License-Identifier: MIT
// MainWindow: filling the views of one run, and exporting them.
#include <QChart>
#include <QChartView>
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
#include "models.h"
#include "report.h"

namespace ampscope::ui {

namespace {
void setChart(QChartView* view, QChart* chart) {
    QChart* old = view->chart();
    applyPalette(chart, view->palette());
    view->setChart(chart);
    delete old;
}
}  // namespace

void MainWindow::showTraining(const QString& uuid) {
    const auto run = store_->load_training(uuid.toStdString());  // throws for a malformed run: showRun says so
    const auto& steps = run.steps;
    setNotice(QString());
    run_.reset();
    current_ = uuid;
    samples_->clearData();
    flips_->clearData();
    layers_->clearData();
    steps_->resetData(steps);
    if (!lossChart_->chart() || !lossChart_->chart()->property("ampscopeSteps").toBool()) {
        // built once: the charts follow steps_ (the table's model) from then on
        setChart(lossChart_, makeLossChart(steps_));
        setChart(scaleChart_, makeScaleChart(steps_));
        setChart(updatesChart_, makeUpdatesChart(steps_));
        setChart(gradChart_, makeGradChart(steps_));
        lossChart_->chart()->setProperty("ampscopeSteps", true);
    }
    auto header = run;  // the run's spec, backend and model as the training JSON, without its steps
    header.steps.clear();
    const auto status = QString::fromStdString(store_->status(uuid.toStdString()));
    QString html = QStringLiteral("<h2>Training run %1</h2><p>status <b>%2</b></p><p>%3 iterations, %4 effective updates, "
                                  "%5 skipped</p><pre>%6</pre>")
                       .arg(uuid.left(8), status).arg(steps.size())
                       .arg(run.effective_updates).arg(run.skipped)
                       .arg(QString::fromStdString(json::train_to_json(header)).toHtmlEscaped());
    overview_->setHtml(html);
    tabs_->setCurrentIndex(kTrainingTab);
}

void MainWindow::showUnreadable(const QString& uuid, const QString& message) {
    run_.reset();
    current_ = uuid;
    samples_->clearData();
    flips_->clearData();
    layers_->clearData();
    steps_->clearData();
    {
        const QSignalBlocker block(passBox_);
        passBox_->clear();
    }
    keepButton_->setEnabled(false);
    overview_->setHtml(QStringLiteral("<h2>Run %1 cannot be read</h2><p style='color:#c82828'>%2</p>"
                                      "<p>The database file holds it, but its content is not what ampscope writes "
                                      "(edited by hand, or damaged). Other runs are not affected.</p>")
                           .arg(uuid.left(8), message.toHtmlEscaped()));
    setNotice(QStringLiteral("Run %1 cannot be read: %2").arg(uuid.left(8), message));
    tabs_->setCurrentIndex(kOverviewTab);
}

void MainWindow::showRun(const QString& uuid) {
    if (!store_ || uuid.isEmpty()) return;
    std::vector<std::string> damaged;
    QString html;
    try {
        const auto id = uuid.toStdString();
        if (store_->kind(id) == "train") {
            showTraining(uuid);
            return;
        }
        run_ = store_->load_run(id, &damaged);
        html = overviewHtml(*run_, QString::fromStdString(store_->status(id)), store_->review(id), store_->annotations(id),
                            store_->benchmarks(id));
    } catch (const std::exception& e) {
        showUnreadable(uuid, QString::fromStdString(e.what()));
        return;
    }
    current_ = uuid;
    QString damage;
    for (const auto& d : damaged) damage += QStringLiteral("<li>%1</li>").arg(QString::fromStdString(d).toHtmlEscaped());
    if (!damage.isEmpty())
        html = QStringLiteral("<div style='color:#c82828'><h3>Damaged: parts of this run are left out</h3><ul>%1</ul></div>")
                   .arg(damage) + html;
    setNotice(damaged.empty() ? QString()
                              : QStringLiteral("Run %1 is damaged: %2 part(s) could not be read and are left out (%3)")
                                    .arg(uuid.left(8)).arg(damaged.size()).arg(QString::fromStdString(damaged.front())));
    overview_->setHtml(html);
    samples_->resetData(*run_);
    flips_->resetData(*run_);
    setChart(deltaChart_, makeDeltaChart(samples_));  // its series follow samples_ (the table's model)
    setChart(histChart_, makeDeltaHistogram(*run_));
    setChart(flipChart_, makeFlipChart(samples_));
    const QSignalBlocker block(passBox_);
    const int previous = passBox_->currentIndex();
    passBox_->clear();
    int preferred = -1;
    for (size_t i = 0; i < run_->passes.size(); ++i) {
        passBox_->addItem(QString::fromStdString(to_string(run_->passes[i].precision)));
        if (preferred < 0 && run_->passes[i].origin) preferred = int(i);  // show where NaN is born
    }
    int pick = previous >= 0 && previous < passBox_->count() ? previous : (preferred >= 0 ? preferred : 0);
    if (previous < 0 && preferred >= 0) pick = preferred;
    passBox_->setCurrentIndex(pick);
    showLayersOf(pick);
}

void MainWindow::showLayersOf(int i) {
    if (!run_ || i < 0 || i >= int(run_->passes.size())) {
        layers_->clearData();
        return;
    }
    const auto& p = run_->passes[size_t(i)];
    layers_->resetData(p);
    setChart(layerChart_, makeLayerChart(layers_));  // its series follow layers_ (the table's model)
    keepButton_->setEnabled(p.precision != Precision::Fp32);
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
    auto cell = [](const RunResult& r, Precision p, int what) -> QString {
        for (size_t i = 0; i < r.comparisons.size(); ++i) {
            const auto& c = r.comparisons[i];
            if (c.precision != p) continue;
            if (i + 1 >= r.passes.size()) break;  // a file edited by hand: no pass for this comparison
            const auto& pass = r.passes[i + 1];
            switch (what) {
            case 0: return QString::fromStdString(to_string(c.verdict));
            case 1: return QString::number(c.max_abs_delta, 'g', 3);
            case 2: return QString::number(c.flips.size());
            case 3: return QString::number(pass.nonfinite_samples.size());
            case 4: return pass.origin ? QString::fromStdString(pass.origin->module + " " + pass.origin->op) : QStringLiteral("-");
            case 5: {
                QStringList k;
                for (const auto& g : pass.keep_fp32) k << QString::fromStdString(g);
                return k.isEmpty() ? QStringLiteral("-") : k.join(QStringLiteral(", "));
            }
            }
        }
        return QStringLiteral("—");
    };
    QString h = QStringLiteral("<h2>Compare A = %1 and B = %2</h2>").arg(a.left(8), b.left(8));
    const bool same_inputs = ra.model.weights_sha256 == rb.model.weights_sha256 && ra.probes.sha256 == rb.probes.sha256;
    h += same_inputs ? QStringLiteral("<p>Same model weights and probe set: the differences come from the precision policy.</p>")
                     : QStringLiteral("<p style='color:#c82828'>Different model weights or probe sets: compare with care.</p>");
    h += QStringLiteral("<table border=1 cellspacing=0 cellpadding=4><tr><th></th><th>A %1</th><th>B %2</th></tr>").arg(a.left(8), b.left(8));
    h += QStringLiteral("<tr><td>model</td><td>%1</td><td>%2</td></tr>").arg(QString::fromStdString(ra.model.source).toHtmlEscaped(),
                                                                           QString::fromStdString(rb.model.source).toHtmlEscaped());
    h += QStringLiteral("<tr><td>verdict</td><td>%1</td><td>%2</td></tr>").arg(QString::fromStdString(to_string(ra.verdict)),
                                                                             QString::fromStdString(to_string(rb.verdict)));
    static const char* rows[] = {"verdict", "max |delta|", "flips", "non-finite samples", "NaN/Inf born at", "FP32 regions"};
    for (auto p : {Precision::Fp16, Precision::Bf16})
        for (int w = 0; w < 6; ++w)
            h += QStringLiteral("<tr><td>%1 %2</td><td>%3</td><td>%4</td></tr>")
                     .arg(QString::fromStdString(to_string(p)), QString::fromLatin1(rows[w]), cell(ra, p, w), cell(rb, p, w));
    h += QStringLiteral("</table>");
    compareText_->setHtml(h);
    // |Δ| of both runs, per sample, on one chart
    RunResult merged = ra;
    merged.comparisons.clear();
    for (const auto* r : {&ra, &rb}) {
        for (auto c : r->comparisons) {
            for (auto& d : c.deltas) d.tag = (r == &ra ? "A " : "B ") + d.tag;
            merged.comparisons.push_back(c);
        }
    }
    if (merged.samples.size() < rb.samples.size()) merged.samples = rb.samples;
    compareSamples_->resetData(merged);
    setChart(compareChart_, makeDeltaChart(compareSamples_));
    tabs_->setCurrentIndex(kCompareTab);
}

void MainWindow::exportReport() {
    if (!run_) return;
    const auto path = QFileDialog::getSaveFileName(this, QStringLiteral("Export report"),
                                                   QStringLiteral("ampscope-%1.html").arg(current_.left(8)),
                                                   QStringLiteral("HTML (*.html)"));
    if (path.isEmpty()) return;
    const auto err = writeReport(*run_, QString::fromStdString(store_->status(current_.toStdString())),
                                 store_->review(current_.toStdString()), store_->annotations(current_.toStdString()), path);
    if (!err.isEmpty()) error(QStringLiteral("Cannot export report"), err);
    else statusBar()->showMessage(QStringLiteral("report written to %1").arg(path), 10000);
}

void MainWindow::exportCurrentChart() {
    QChartView* views[] = {nullptr, deltaChart_, flipChart_, layerChart_};
    const int t = tabs_->currentIndex();
    QChartView* v = t >= 0 && t < 4 ? views[t] : nullptr;
    if (!v) return;
    const auto path = QFileDialog::getSaveFileName(this, QStringLiteral("Export chart"), QStringLiteral("chart.png"),
                                                   QStringLiteral("PNG (*.png);;SVG (*.svg)"));
    if (path.isEmpty()) return;
    const auto err = exportImage(v, path);
    if (!err.isEmpty()) error(QStringLiteral("Cannot export chart"), err);
}

void MainWindow::exportCurrentTable() {
    QTableView* views[] = {runView_, sampleView_, flipView_, layerView_};
    const int t = tabs_->currentIndex();
    QTableView* v = t >= 0 && t < 4 ? views[t] : runView_;
    const auto path = QFileDialog::getSaveFileName(this, QStringLiteral("Export table"), QStringLiteral("table.csv"),
                                                   QStringLiteral("CSV (*.csv)"));
    if (path.isEmpty()) return;
    const auto err = writeCsv(v->model(), path);
    if (!err.isEmpty()) error(QStringLiteral("Cannot export table"), err);
}

}  // namespace ampscope::ui
