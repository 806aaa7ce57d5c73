// SPDX-License-Identifier: MIT
// GUI test of the built-in demo (`ampscope --demo`, offscreen) into a temporary database: a
// comparison run, a training run, and the built-in demo incident (engine demo_incident())
// replayed as its job ran and with its remedy (the module that broke kept in FP32), recorded
// as replays. The Replay tab then holds the original (FP16 overflows in embed at step 1, every
// step skipped) beside the remedy (finite throughout), in its tables and charts. With
// AMPSCOPE_SCREENSHOTS=DIR it writes docs/gui.md's Replay pictures there (replay.png,
// replay-steps.png, replay-parameters.png: resources/screenshots/).
#include <QChart>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <string>

#include "ampscope/engine/replay.h"
#include "ampscope/storage/replay_record.h"
#include "ampscope/storage/store.h"
#include "chart_probe.h"
#include "charts.h"
#include "errorreporter.h"
#include "mainwindow.h"
#include "replaymodel.h"
#include "replayview.h"
#include "runlistmodel.h"

using namespace ampscope;
using namespace ampscope::ui;

namespace {

class Recorder : public ErrorReporter {
public:
    explicit Recorder(QStringList* messages) : messages_(messages) {}
    void error(QWidget*, const QString& title, const QString& message) override {
        *messages_ << title + QStringLiteral(": ") + message;
    }
    bool confirm(QWidget*, const QString&, const QString&) override { return true; }

private:
    QStringList* messages_;
};

/// The chart `c` of `side` once built (its table tab shown).
QChart* shownChart(ReplayView* v, ReplayView::Side side, ReplayView::Charts c) {
    const int tab = c == ReplayView::kLayersChart   ? ReplayView::kLayersTable
                    : c == ReplayView::kParamsChart ? ReplayView::kParamsTable
                                                    : ReplayView::kStepsTable;
    v->tableTabs()->setCurrentIndex(tab);
    ChartWidget* w = v->chart(side, c);
    if (!w ||
        !QTest::qWaitFor([w] { return w->chart() && !w->chart()->series().isEmpty() && !w->showsEmptyState(); }, 5000))
        return nullptr;
    return w->chart();
}

int pointCount(QChart* chart, const char* name) {
    auto* s = chart ? chart_probe::series(chart, QString::fromUtf8(name)) : nullptr;
    return s ? int(s->count()) : -1;
}

}  // namespace

class TstDemo : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void demoReplaysItsIncidentAndTheRemedy() {
        QStringList messages;
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("demo.sqlite"));
        MainWindow w(std::make_unique<Recorder>(&messages));
        QVERIFY(w.openDatabase(db));
        w.resize(1400, 1000);
        w.show();
        QSignalSpy demo(&w, &MainWindow::demoFinished);
        w.startDemo();
        QVERIFY(demo.wait(300000));
        QVERIFY2(messages.isEmpty(), qPrintable(messages.join(QLatin1Char('\n'))));

        // recorded: the comparison, the training, the incident's replay and its remedy
        storage::Store store(db.toStdString());
        QStringList kinds;
        QString remedy;
        for (const auto& r : store.list_runs()) {
            kinds << QString::fromStdString(r.kind + " " + r.status);
            if (r.kind == "replay") {
                const auto rec = storage::replay_from_json(storage::replay_json(store, r.uuid), "replay");
                if (!rec.spec.original_run_id.empty()) remedy = QString::fromStdString(r.uuid);
            }
        }
        kinds.sort();
        QCOMPARE(kinds, (QStringList{QStringLiteral("compare completed"), QStringLiteral("replay completed"),
                                     QStringLiteral("replay completed"), QStringLiteral("train completed")}));
        QVERIFY(!remedy.isEmpty());
        QCOMPARE(QString::fromStdString(w.runModel()->find(w.currentRun().toStdString())->kind),
                 QStringLiteral("compare"));  // the demo's story is shown first

        // the remedy from the run browser: beside its original in the Replay tab
        w.showRun(remedy);
        QCOMPARE(w.tabs()->currentIndex(), int(MainWindow::kReplayTab));
        ReplayView* v = w.replayView();
        QVERIFY(v->original() && v->remedy());
        QVERIFY(v->original()->first_nonfinite.has_value());
        QCOMPARE(QString::fromStdString(v->original()->first_nonfinite->module), QStringLiteral("embed"));
        QCOMPARE(QString::fromStdString(to_string(v->original()->first_nonfinite->stage)), QStringLiteral("forward"));
        QVERIFY(!v->remedy()->first_nonfinite.has_value());
        QCOMPARE(v->remedy()->spec.keep_fp32, std::vector<std::string>{"embed"});
        QVERIFY2(v->changeLine().startsWith(QStringLiteral("embed kept in FP32: no non-finite values in 4 steps")),
                 qPrintable(v->changeLine()));

        // the activations: embed the original's first non-finite row, none on the remedy side
        const auto* layers = v->layerModel(ReplayView::Original);
        const int row = layers->firstNonFiniteRow();
        QVERIFY(row >= 0);
        QCOMPARE(layers->index(row, ReplayLayerModel::Module).data().toString(), QStringLiteral("embed"));
        QVERIFY(layers->layer(row).amp_nonfinite > 0);
        QVERIFY(std::isfinite(layers->layer(row).ref_absmax) && layers->layer(row).ref_absmax > 65504);
        const auto* fixed = v->layerModel(ReplayView::Remedied);
        QVERIFY(fixed->rowCount() > 0);
        QCOMPARE(fixed->firstNonFiniteRow(), -1);
        for (int i = 0; i < fixed->rowCount(); ++i)
            QVERIFY2(fixed->layer(i).amp_nonfinite == 0 && std::isfinite(fixed->layer(i).amp_absmax),
                     qPrintable(QString::fromStdString(fixed->layer(i).module)));

        // the steps: GradScaler skips every step of the original and backs off; the remedy steps
        const auto* steps = v->stepModel(ReplayView::Original);
        const auto* rsteps = v->stepModel(ReplayView::Remedied);
        QCOMPARE(steps->rowCount(), 4);
        QCOMPARE(rsteps->rowCount(), 4);
        for (int i = 0; i < 4; ++i) {
            QVERIFY(steps->replay().steps[size_t(i)].skipped);
            QVERIFY(!rsteps->replay().steps[size_t(i)].skipped);
            QVERIFY(std::isfinite(rsteps->replay().steps[size_t(i)].loss_amp));
        }
        QCOMPARE(steps->replay().steps.back().scale_after, 64.0);
        QCOMPARE(rsteps->replay().steps.back().scale_after, 1024.0);

        // the charts: the original's first non-finite module marked, the remedy's not; AMP loss
        // points only where finite (the remedy's four); skipped steps marked on the original
        QChart* c = shownChart(v, ReplayView::Original, ReplayView::kLayersChart);
        QVERIFY(c);
        QCOMPARE(pointCount(c, "first NaN/Inf"), 1);
        QCOMPARE(chart_probe::series(c, QStringLiteral("first NaN/Inf"))->at(0).x(), double(row));
        c = shownChart(v, ReplayView::Remedied, ReplayView::kLayersChart);
        QVERIFY(c);
        QVERIFY(pointCount(c, "first NaN/Inf") <= 0);
        QCOMPARE(pointCount(c, "AMP"), fixed->rowCount());
        c = shownChart(v, ReplayView::Original, ReplayView::kLossChart);
        QVERIFY(c);
        QCOMPARE(pointCount(c, "reference (FP32)"), 4);
        QVERIFY(pointCount(c, "AMP") <= 0);
        c = shownChart(v, ReplayView::Remedied, ReplayView::kLossChart);
        QVERIFY(c);
        QCOMPARE(pointCount(c, "AMP"), 4);
        c = shownChart(v, ReplayView::Original, ReplayView::kScaleChart);
        QVERIFY(c);
        QCOMPARE(pointCount(c, "skipped step (inf/NaN gradients)"), 4);
        c = shownChart(v, ReplayView::Remedied, ReplayView::kParamsChart);
        QVERIFY(c);
        QCOMPARE(pointCount(c, "gradient"), v->paramModel(ReplayView::Remedied)->rowCount());

        const QString shots = qEnvironmentVariable("AMPSCOPE_SCREENSHOTS");
        if (!shots.isEmpty()) {
            for (auto [tab, name] : {std::pair{ReplayView::kLayersTable, "replay.png"},
                                     {ReplayView::kStepsTable, "replay-steps.png"},
                                     {ReplayView::kParamsTable, "replay-parameters.png"}}) {
                v->tableTabs()->setCurrentIndex(tab);
                QTest::qWait(300);
                QVERIFY(w.grab().save(shots + QLatin1Char('/') + QString::fromUtf8(name)));
            }
        }
        QVERIFY2(messages.isEmpty(), qPrintable(messages.join(QLatin1Char('\n'))));
    }
};

QTEST_MAIN(TstDemo)
#include "tst_demo.moc"
