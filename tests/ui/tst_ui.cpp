// SPDX-License-Identifier: MIT
// GUI tests (offscreen): item models under QAbstractItemModelTester, every view rendered from
// a recorded database, a run started from the controller and cancelled with the UI responsive,
// criteria locked after start, live results appended as values with the user's selection left
// alone, dialogs that validate before closing, errors through the injected reporter, empty
// states, the demo, the run browser's columns.
#include <QAbstractItemModelTester>
#include <QChartView>
#include <QMenu>
#include <QScatterSeries>
#include <QElapsedTimer>
#include <QFile>
#include <QImage>
#include <QScopeGuard>
#include <QSortFilterProxyModel>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QLabel>
#include <QTimer>
#include <QHeaderView>
#include <QTableView>
#include <QtTest>

#include <chrono>
#include <cmath>
#include <thread>

#include <sqlite3.h>

#include "ampscope/engine/advise.h"
#include "ampscope/engine/replay.h"
#include "ampscope/engine/train.h"
#include "advisemodel.h"
#include "chart_probe.h"
#include "charts.h"
#include "ampscope/storage/store.h"
#include "mainwindow.h"
#include "comparemodel.h"
#include "flipmodel.h"
#include "layermodel.h"
#include "runlistmodel.h"
#include "samplemodel.h"
#include "trainingstepmodel.h"
#include "newrundialog.h"
#include "errorreporter.h"
#include "replaymodel.h"
#include "report.h"
#include "runcontroller.h"
#include "trainingdialog.h"

using namespace ampscope;
using namespace ampscope::ui;

namespace {

/// Runs SQL on a file the way a person editing it by hand would (sqlite3 shell).
void rawExec(const QString& path, const char* sql) {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
    const QString m = QString::fromUtf8(err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
    QVERIFY2(rc == SQLITE_OK, qPrintable(m));
}

/// Records what the window would tell the user (and answers its questions with `answer`).
class Recorder : public ErrorReporter {
public:
    explicit Recorder(QStringList* messages, bool answer = true) : messages_(messages), answer_(answer) {}
    void error(QWidget*, const QString& title, const QString& message) override {
        *messages_ << title + QStringLiteral(": ") + message;
    }
    bool confirm(QWidget*, const QString& title, const QString& question) override {
        *messages_ << title + QStringLiteral("? ") + question;
        return answer_;
    }

private:
    QStringList* messages_;
    bool answer_;
};

QString overviewText(MainWindow& w) {
    QWidget* tab = w.tabs()->widget(MainWindow::kOverviewTab);  // the overview, above a torchrun run's rank chart
    auto* text = qobject_cast<QTextBrowser*>(tab) ? qobject_cast<QTextBrowser*>(tab) : tab->findChild<QTextBrowser*>();
    return text ? text->toPlainText() : QString();
}

/// The chart views of `tab` that are on screen; each must draw every series with points where
/// its points map to (chart_probe.h). Returns how many there were; `why` names a failure.
int chartsDrawn(QWidget* tab, QString* why) {
    int n = 0;
    for (auto* v : tab->findChildren<QChartView*>()) {
        if (!v->isVisible() || !v->chart()) continue;
        if (!chart_probe::everySeriesDrawn(v, why)) return -1;
        ++n;
    }
    return n;
}

}  // namespace

class TstUi : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir_;
    QString db_;
    std::string uuid_;
    QStringList messages_;
    std::unique_ptr<ErrorReporter> recorder() { return std::make_unique<Recorder>(&messages_); }
    /// A window on `db` (the recorded database by default), 1280×820, shown.
    std::unique_ptr<MainWindow> shownWindow(const QString& db = {}) {
        auto w = std::make_unique<MainWindow>(recorder());
        if (!w->openDatabase(db.isEmpty() ? db_ : db)) return nullptr;
        w->resize(1280, 820);
        w->show();
        return w;
    }

private Q_SLOTS:
    void initTestCase() {
        db_ = dir_.filePath(QStringLiteral("runs.sqlite"));
        storage::Store store(db_.toStdString());
        storage::RunWriter w(store);
        RunSpec spec;
        spec.device = "cpu";
        uuid_ = run_comparison(spec, &w).run_id;
    }

    void modelsPassTheTester() {
        storage::Store store(db_.toStdString());
        const auto run = store.load_run(uuid_);
        RunListModel runs;
        QAbstractItemModelTester t1(&runs, QAbstractItemModelTester::FailureReportingMode::QtTest);
        runs.resetData(store.list_runs());
        QCOMPARE(runs.rowCount(), 1);
        SampleModel samples;
        QAbstractItemModelTester t2(&samples, QAbstractItemModelTester::FailureReportingMode::QtTest);
        samples.resetData(run);
        QCOMPARE(samples.rowCount(), 40);
        QCOMPARE(samples.columnCount(), 3 + 3 * 2);
        FlipModel flips;
        QAbstractItemModelTester t3(&flips, QAbstractItemModelTester::FailureReportingMode::QtTest);
        flips.resetData(run);
        QVERIFY(flips.rowCount() > 0);
        LayerModel layers;
        QAbstractItemModelTester t4(&layers, QAbstractItemModelTester::FailureReportingMode::QtTest);
        layers.resetData(run.passes[1]);
        QVERIFY(layers.rowCount() > 10);
        QCOMPARE(layers.index(0, LayerModel::State).data().toString(), QStringLiteral("origin"));
        QCOMPARE(layers.index(0, LayerModel::Module).data().toString(), QStringLiteral("embed"));
        QCOMPARE(layers.index(1, LayerModel::State).data().toString(), QStringLiteral("propagated"));
        runs.clearData();
        samples.clearData();
        flips.clearData();
        layers.clearData();
    }

    /// A run under torchrun (issue 31): the samples table's last column is the rank that ran
    /// each sample, with its device (host in the tool tip); a live run's comparisons come before it.
    void samplesTableShowsTheRankOfEachSample() {
        storage::Store store(db_.toStdString());
        auto run = store.load_run(uuid_);
        QCOMPARE(run.samples.size(), size_t(40));
        run.ranks = {{0, "node-a", "cuda:0", 0, 24, 2.5, 0}, {1, "node-b", "cuda:1", 24, 16, 1.5, 640}};
        SampleModel samples;
        QAbstractItemModelTester tester(&samples, QAbstractItemModelTester::FailureReportingMode::QtTest);
        samples.resetData(run);
        const int last = 3 + 3 * 2;
        QCOMPARE(samples.columnCount(), last + 1);
        QCOMPARE(samples.headerData(last, Qt::Horizontal).toString(), QStringLiteral("Rank"));
        QCOMPARE(samples.index(0, last).data().toString(), QStringLiteral("0 (cuda:0)"));
        QCOMPARE(samples.index(23, last).data().toString(), QStringLiteral("0 (cuda:0)"));
        QCOMPARE(samples.index(24, last).data().toString(), QStringLiteral("1 (cuda:1)"));
        QVERIFY(samples.index(39, last).data(Qt::ToolTipRole).toString().contains(QStringLiteral("node-b")));
        QCOMPARE(samples.index(39, last).data(SampleModel::SortRole).toInt(), 1);
        // a live run: the comparison's columns go before the rank column
        auto live = run;
        live.comparisons.clear();
        samples.resetData(live);
        QCOMPARE(samples.columnCount(), 4);
        samples.addComparison(run.comparisons[0]);
        QCOMPARE(samples.columnCount(), 7);
        QCOMPARE(samples.headerData(6, Qt::Horizontal).toString(), QStringLiteral("Rank"));
        QVERIFY(samples.headerData(3, Qt::Horizontal).toString().endsWith(QStringLiteral("|Δ|")));
        QCOMPARE(samples.index(5, 6).data().toString(), QStringLiteral("0 (cuda:0)"));
        // a single-process run has no rank column
        samples.resetData(store.load_run(uuid_));
        QCOMPARE(samples.columnCount(), 3 + 3 * 2);
        QVERIFY(samples.headerData(samples.columnCount() - 1, Qt::Horizontal).toString() != QStringLiteral("Rank"));
    }

    /// The advisor's and the replay's models, on values made here (the advisor and the replay
    /// themselves are driven in tst_advise and tst_replay): non-finite figures, a stored name with
    /// a control character, the first non-finite module's row, then cleared.
    void sensitivityAndReplayModelsPassTheTester() {
        SensitivityModel sensitivity;
        QAbstractItemModelTester t1(&sensitivity, QAbstractItemModelTester::FailureReportingMode::QtTest);
        ModuleSensitivity fine;
        fine.module = "embed";
        fine.sqnr_db = 31.5;
        fine.rel_error = 0.03;
        fine.elements = 64;
        ModuleSensitivity overflowing = fine;
        overflowing.module = "head";
        overflowing.order = 2;
        overflowing.sqnr_db = -INFINITY;
        overflowing.overflow = 3;
        overflowing.origin = true;
        ModuleSensitivity equal = fine;
        equal.module = "fc\x1b";
        equal.precision = Precision::Bf16;
        equal.order = 1;
        equal.sqnr_db = INFINITY;
        sensitivity.resetData({fine, overflowing, equal});
        QCOMPARE(sensitivity.rowCount(), 3);
        QCOMPARE(sensitivity.index(0, SensitivityModel::Module).data().toString(),
                 QStringLiteral("head"));  // overflow ranks first
        sensitivity.clearData();
        QCOMPARE(sensitivity.rowCount(), 0);

        ReplayResult r;
        r.first_nonfinite = ReplayStage{0, ReplayStageKind::Forward, ReplaySide::Amp, "head", "linear", ""};
        for (int k = 0; k < 2; ++k) {
            ReplayStep st;
            st.step = k;
            st.loss_ref = 2.5;
            st.loss_amp = k == 0 ? NAN : 2.5;
            st.scale = 65536;
            st.found_inf = st.skipped = k == 0;
            st.scale_after = k == 0 ? 32768 : 65536;
            st.growth_tracker = k == 0 ? 0 : -1;
            st.activations = {{"embed", "embedding", 3, 3, 1, 1, 0, 0},
                              {"head", "linear", 7e4, INFINITY, 10, NAN, 4, 2}};
            st.params = {{"embed.weight", 1e-3, 2e-3, true, true, "", ""},
                         {"head\nweight", NAN, INFINITY, false, false, "", ""}};
            r.steps.push_back(st);
        }
        ReplayStepModel steps;
        ReplayLayerModel layers;
        ReplayParamModel params;
        QAbstractItemModelTester t2(&steps, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester t3(&layers, QAbstractItemModelTester::FailureReportingMode::QtTest);
        ReplayTrainingModel training;  // the steps as training steps, for the loss and scale charts
        QAbstractItemModelTester t4(&params, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester t5(&training, QAbstractItemModelTester::FailureReportingMode::QtTest);
        for (ReplayTableModel* m : std::initializer_list<ReplayTableModel*>{&steps, &layers, &params}) m->resetData(r);
        training.resetData(r);
        QCOMPARE(training.rowCount(), 2);
        QCOMPARE(training.index(0, TrainingStepModel::Step).data().toInt(), 1);  // counted from 1
        QVERIFY(
            training.index(0, 0).data(TrainingStepModel::SummaryRole).toString().contains(QStringLiteral("skipped")));
        QCOMPARE(steps.rowCount(), 2);
        QCOMPARE(steps.index(0, ReplayStepModel::LossAmp).data().toString(), QStringLiteral("NaN"));
        QCOMPARE(layers.rowCount(), 4);
        QCOMPARE(layers.firstNonFiniteRow(), 1);
        QCOMPARE(params.rowCount(), 4);
        QCOMPARE(params.index(1, ReplayParamModel::Name).data().toString(),
                 QStringLiteral("head\\x0aweight"));  // shown, not acted on
        for (ReplayTableModel* m : std::initializer_list<ReplayTableModel*>{&steps, &layers, &params}) m->clearData();
        training.clearData();
        QCOMPARE(training.rowCount(), 0);
        QCOMPARE(layers.rowCount(), 0);
        QCOMPARE(layers.firstNonFiniteRow(), -1);
    }

    /// A run's tables open in the model's order, which is execution order (the layers by op
    /// index, ascending), until the user sorts; the run browser keeps the newest run first.
    void tablesOpenInExecutionOrder() {
        auto w = shownWindow();
        QVERIFY(w);
        w->showRun(QString::fromStdString(uuid_));
        for (int tab : {MainWindow::kDeltasTab, MainWindow::kFlipsTab, MainWindow::kLayersTab}) {
            auto* view = w->tabs()->widget(tab)->findChild<QTableView*>();
            QVERIFY(view);
            auto* proxy = qobject_cast<QSortFilterProxyModel*>(view->model());
            QVERIFY(proxy && proxy->rowCount() > 1);
            for (int r = 0; r < proxy->rowCount(); ++r)
                QVERIFY2(proxy->mapToSource(proxy->index(r, 0)).row() == r,
                         qPrintable(QStringLiteral("tab %1, row %2 shows row %3")
                                        .arg(tab)
                                        .arg(r)
                                        .arg(proxy->mapToSource(proxy->index(r, 0)).row())));
        }
        auto* layers = w->tabs()->widget(MainWindow::kLayersTab)->findChild<QTableView*>()->model();
        QVERIFY(layers->index(0, LayerModel::Index).data().toInt() <
                layers->index(1, LayerModel::Index).data().toInt());
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("two.sqlite"));
        QVERIFY(QFile::copy(db_, db));
        std::string newer;
        {
            storage::Store store(db.toStdString());
            storage::RunWriter writer(store);
            RunSpec spec;
            spec.device = "cpu";
            newer = run_comparison(spec, &writer).run_id;
        }
        QVERIFY(w->openDatabase(db));
        QTableView* browser = nullptr;
        for (auto* v : w->findChildren<QTableView*>())
            if (auto* p = qobject_cast<QSortFilterProxyModel*>(v->model());
                p && qobject_cast<RunListModel*>(p->sourceModel()))
                browser = v;
        QVERIFY(browser && browser->model()->rowCount() == 2);
        QCOMPARE(browser->model()->index(0, 0).data(RunListModel::UuidRole).toString(), QString::fromStdString(newer));
    }

    /// The overview's criteria say "no threshold set" where no quality threshold was given, not
    /// "threshold 0"; a threshold given is named.
    void qualityLineSaysNoThresholdSet() {
        RunResult run = storage::Store(db_.toStdString()).load_run(uuid_);
        run.criteria.quality_threshold = 0;
        run.criteria.quality_threshold_set = false;
        QString h = overviewHtml(run, QStringLiteral("completed"), {}, {});
        QVERIFY2(h.contains(QStringLiteral("quality accuracy, no threshold set")),
                 qPrintable(h.mid(h.indexOf(QStringLiteral("quality ")), 80)));
        QVERIFY(!h.contains(QStringLiteral("threshold 0")));
        run.criteria.quality_threshold = 0.75;
        run.criteria.quality_threshold_set = true;
        h = overviewHtml(run, QStringLiteral("completed"), {}, {});
        QVERIFY2(h.contains(QStringLiteral("quality accuracy threshold 0.75")),
                 qPrintable(h.mid(h.indexOf(QStringLiteral("quality ")), 80)));
    }

    void everyViewRendersFromARecordedDatabase() {
        MainWindow w(recorder());
        QVERIFY(w.openDatabase(db_));
        w.resize(1280, 820);
        w.show();
        w.showRun(QString::fromStdString(uuid_));
        const QString out = QStringLiteral(AMPSCOPE_TEST_OUTPUT_DIR);
        for (int t = 0; t < w.tabs()->count(); ++t) {
            w.tabs()->setCurrentIndex(t);
            QCoreApplication::processEvents();
            const QImage img = w.grab().toImage();
            const QString file = out + QStringLiteral("/view-%1.png").arg(t);
            QVERIFY(img.save(file));
            // what the view shows: the charts of this run's views draw each series where its points are
            if (t != MainWindow::kDeltasTab && t != MainWindow::kFlipsTab && t != MainWindow::kLayersTab) continue;
            QString why;
            const int charts = chartsDrawn(w.tabs()->widget(t), &why);
            QVERIFY2(
                charts > 0,
                qPrintable(QStringLiteral("tab %1: %2").arg(t).arg(charts < 0 ? why : QStringLiteral("no chart"))));
        }
        const QString overview = overviewText(w);
        QVERIFY2(
            overview.startsWith(QStringLiteral("Run %1 — rejected").arg(QString::fromStdString(uuid_.substr(0, 8)))),
            qPrintable(overview));
        QVERIFY(overview.contains(
            QStringLiteral("NaN/Inf born at forward op #0 aten::matmul in module embed for 8 samples")));
        QVERIFY(w.layerModel()->rowCount() > 0);
        QVERIFY(w.flipModel()->rowCount() > 0);
    }

    void chartsNameWhatIsHovered() {
        storage::Store store(db_.toStdString());
        const auto run = store.load_run(uuid_);
        SampleModel sampleModel;
        sampleModel.resetData(run);
        std::unique_ptr<QChart> deltas(makeDeltaChart(&sampleModel));
        bool found = false;
        for (auto* s : deltas->series()) {
            auto* xy = qobject_cast<QScatterSeries*>(s);
            if (!xy || xy->count() == 0) continue;
            const QPointF p = xy->at(xy->count() - 1);
            Q_EMIT xy->hovered(p, true);
            const QString tip = xy->property("ampscopeTip").toString();
            const int i = int(std::lround(p.x()));
            QVERIFY2(tip.startsWith(QString::fromStdString(run.samples[size_t(i)].id) + QStringLiteral(" (")),
                     qPrintable(tip));
            QVERIFY(tip.contains(QStringLiteral("|Δ|")));
            found = true;
        }
        QVERIFY(found);
        LayerModel model;
        model.resetData(run.passes[1]);
        std::unique_ptr<QChart> layers(makeLayerChart(&model));
        bool origin = false;
        for (auto* s : layers->series()) {
            auto* xy = qobject_cast<QScatterSeries*>(s);
            if (!xy || xy->name() != QStringLiteral("origin of NaN/Inf") || xy->count() == 0) continue;
            Q_EMIT xy->hovered(xy->at(0), true);
            const QString tip = xy->property("ampscopeTip").toString();
            QVERIFY2(tip.contains(QStringLiteral("NaN/Inf born here")) && tip.contains(QStringLiteral("embed")),
                     qPrintable(tip));
            origin = true;
        }
        QVERIFY(origin);
        // the chart is driven by the model: another pass in the model, other points
        int before = 0;
        for (auto* s : layers->series())
            if (s->name() == QStringLiteral("absmax")) before = static_cast<QXYSeries*>(s)->count();
        QCOMPARE(before, int(run.passes[1].layers.size()));
        PassResult fewer = run.passes[1];
        fewer.layers.resize(3);
        model.resetData(fewer);
        for (auto* s : layers->series())
            if (s->name() == QStringLiteral("absmax")) QCOMPARE(static_cast<QXYSeries*>(s)->count(), 3);
        layers.reset();  // before the model it reads
    }

    void recentDatabasesAreOffered() {
        MainWindow w(recorder());
        QVERIFY(w.openDatabase(db_));
        auto* menu = w.findChild<QMenu*>(QStringLiteral("recentMenu"));
        QVERIFY(menu);
        Q_EMIT menu->aboutToShow();
        bool listed = false;
        for (auto* a : menu->actions()) listed = listed || a->data().toString() == db_;
        QVERIFY(listed);
    }

    void darkPaletteDarkensTheCharts() {
        QPalette dark;
        dark.setColor(QPalette::Window, QColor(30, 30, 30));
        dark.setColor(QPalette::Base, QColor(20, 20, 20));
        dark.setColor(QPalette::WindowText, QColor(230, 230, 230));
        dark.setColor(QPalette::Text, QColor(230, 230, 230));
        const QPalette before = QApplication::palette();
        QApplication::setPalette(dark);
        const auto restore = qScopeGuard([&] { QApplication::setPalette(before); });  // also when a check fails
        MainWindow w(recorder());
        QVERIFY(w.openDatabase(db_));
        w.resize(1280, 820);
        w.show();
        w.showRun(QString::fromStdString(uuid_));
        w.tabs()->setCurrentIndex(MainWindow::kDeltasTab);
        QCoreApplication::processEvents();
        QChartView* view = nullptr;  // the chart on screen (the histogram waits in another sub-tab)
        for (auto* v : w.tabs()->currentWidget()->findChildren<QChartView*>())
            if (!view && v->isVisible()) view = v;
        QVERIFY(view && view->chart());
        QCOMPARE(view->chart()->backgroundBrush().color(), QColor(20, 20, 20));
        const QImage img = view->grab().toImage();
        QVERIFY(qGray(img.pixel(5, 5)) < 80);  // the frame is dark, not the default white
        QString why;
        QVERIFY2(chart_probe::everySeriesDrawn(view, &why), qPrintable(why));  // and the data drawn on it
    }

    void trainingRunStartedFromTheGui() {
        // The dialog's spec, run by the controller on its worker: steps recorded, the run
        // listed as a training run, the UI thread never blocked for long.
        TrainingDialog dlg;
        TrainSpec want;
        want.model = "demo:mlp";
        want.steps = 8;
        want.batch_size = 8;
        want.scaler.enabled = false;  // isolation: autocast only
        want.keep_fp32 = {"out"};     // demo:mlp names fc1, act1, fc2, act2, out
        want.device = "cpu";
        dlg.setSpec(want);
        const TrainSpec got = dlg.spec();
        QCOMPARE(got.model, want.model);
        QCOMPARE(got.steps, 8);
        QVERIFY(!got.scaler.enabled && got.autocast);
        QCOMPARE(got.keep_fp32, want.keep_fp32);
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("gui-train.sqlite"));
        { storage::Store s(db.toStdString()); }
        RunController c;
        QSignalSpy done(&c, &RunController::finished);
        QSignalSpy failed(&c, &RunController::failed);
        QElapsedTimer beat;
        qint64 worst = 0;
        QTimer hb;
        connect(&hb, &QTimer::timeout, [&] { worst = std::max(worst, beat.restart()); });
        beat.start();
        hb.start(10);
        QVERIFY(c.startTraining(got, db));
        QTRY_VERIFY_WITH_TIMEOUT(done.count() + failed.count() > 0, 60000);
        QVERIFY2(failed.isEmpty(), qPrintable(failed.isEmpty() ? QString() : failed.at(0).at(1).toString()));
        QVERIFY2(worst < 100, qPrintable(QStringLiteral("UI thread blocked %1 ms").arg(worst)));
        const auto uuid = done.at(0).at(0).toString().toStdString();
        QVERIFY(done.at(0).at(1).toString().contains(QStringLiteral("of 8 updates")));
        storage::Store s(db.toStdString());
        QCOMPARE(s.kind(uuid), std::string("train"));
        QCOMPARE(int(s.training_steps(uuid).size()), 8);
    }

    void trainingRunRendersInTheTrainingView() {
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("train.sqlite"));
        std::string uuid;
        {
            storage::Store store(db.toStdString());
            storage::TrainWriter w(store);
            TrainSpec spec;
            spec.device = "cpu";
            spec.steps = 12;
            uuid = run_training(spec, &w).run_id;
        }
        MainWindow w(recorder());
        QVERIFY(w.openDatabase(db));
        w.resize(1280, 820);
        w.show();
        w.showRun(QString::fromStdString(uuid));
        QCOMPARE(w.tabs()->tabText(w.tabs()->currentIndex()), QStringLiteral("Training"));
        QTRY_COMPARE(chartsDrawn(w.tabs()->currentWidget(), nullptr),
                     4);  // charts shown together are built one per event-loop turn
        const QImage img = w.grab().toImage();
        QVERIFY(img.save(QStringLiteral(AMPSCOPE_TEST_OUTPUT_DIR) + QStringLiteral("/view-training.png")));
        QString why;
        QVERIFY2(chartsDrawn(w.tabs()->currentWidget(), &why) == 4,
                 qPrintable(why));  // loss, scale, updates, gradients
        // the underflow measured per step (guards on) is plotted beside the gradient norm
        storage::Store store(db.toStdString());
        const auto steps = store.training_steps(uuid);
        for (const auto& st : steps)  // measured on every step (-1: not measured)
            QVERIFY2(st.grad_underflow != -1,
                     qPrintable(QStringLiteral("step %1 has no underflow count").arg(st.step)));
        TrainingStepModel stepModel;
        QAbstractItemModelTester tester(&stepModel, QAbstractItemModelTester::FailureReportingMode::QtTest);
        stepModel.resetData(steps);
        QCOMPARE(stepModel.rowCount(), 12);
        std::unique_ptr<QChart> grad(makeGradChart(&stepModel));
        auto* underflow = chart_probe::series(grad.get(), QStringLiteral("gradient elements lost to underflow"));
        QVERIFY(underflow);
        QCOMPARE(underflow->count(), int(steps.size()));
        for (int i = 0; i < underflow->count(); ++i) {  // each step's count, at its step
            QCOMPARE(underflow->at(i).x(), double(steps[size_t(i)].step));
            QCOMPARE(underflow->at(i).y(), double(steps[size_t(i)].grad_underflow));
        }
        // driven by the model: fewer steps in it, fewer points
        stepModel.resetData(std::vector<TrainStep>(steps.begin(), steps.begin() + 5));
        for (auto* s : grad->series())
            if (s->name() == QStringLiteral("gradient elements lost to underflow"))
                QCOMPARE(static_cast<QXYSeries*>(s)->count(), 5);
        grad.reset();
    }

    void compareViewShowsTwoRuns() {
        storage::Store store(db_.toStdString());
        storage::RunWriter writer(store);
        RunSpec spec;
        spec.device = "cpu";
        spec.precisions = {Precision::Fp16};
        spec.keep_fp32 = {"embed"};
        const auto second = run_comparison(spec, &writer).run_id;
        MainWindow w(recorder());
        QVERIFY(w.openDatabase(db_));
        w.resize(1280, 820);
        w.show();
        w.compareRuns(QString::fromStdString(uuid_), QString::fromStdString(second));
        QCOMPARE(w.tabs()->tabText(w.tabs()->currentIndex()), QStringLiteral("Compare"));
        QCoreApplication::processEvents();
        const QImage img = w.grab().toImage();
        QVERIFY(img.save(QStringLiteral(AMPSCOPE_TEST_OUTPUT_DIR) + QStringLiteral("/view-compare.png")));
        QString why;
        QVERIFY2(chartsDrawn(w.tabs()->currentWidget(), &why) > 0, qPrintable(why));
    }

    void cancelKeepsTheUiResponsive() {
        MainWindow w(recorder());
        QVERIFY(w.openDatabase(db_));
        QSignalSpy cancelled(w.controller(), &RunController::cancelled);
        QElapsedTimer since;
        qint64 worst = 0;
        QTimer heartbeat;
        heartbeat.setInterval(10);
        QObject::connect(&heartbeat, &QTimer::timeout, [&] { worst = std::max(worst, since.restart()); });
        bool asked = false;
        QObject::connect(w.controller(), &RunController::progress, [&](const QString& stage, int permille) {
            if (!asked && stage == QStringLiteral("pass fp16") && permille > 100) {
                asked = true;
                w.controller()->cancel();
            }
        });
        RunSpec spec;
        spec.device = "cpu";
        spec.batch_size = 1;  // many small batches: cancel lands mid-pass
        since.start();
        heartbeat.start();
        QVERIFY(w.startRun(spec));
        QVERIFY(!w.controller()->start(spec, db_));  // one run at a time
        QVERIFY(cancelled.wait(60000));
        heartbeat.stop();
        QVERIFY2(worst < 100, qPrintable(QStringLiteral("UI thread stalled %1 ms").arg(worst)));
        const QString uuid = cancelled.at(0).at(0).toString();
        QVERIFY(!uuid.isEmpty());
        storage::Store store(db_.toStdString());
        QCOMPARE(QString::fromStdString(store.status(uuid.toStdString())), QStringLiteral("cancelled"));
        QVERIFY(store.load_run(uuid.toStdString()).passes.size() >= 1);  // the reference pass is kept
    }

    void criteriaAreLockedAfterStart() {
        NewRunDialog d;
        RunSpec spec;
        spec.criteria.atol = 0.25;
        spec.criteria.max_flips = 3;
        d.setSpec(spec);
        QCOMPARE(d.spec().criteria.atol, 0.25);
        QVERIFY(!d.criteriaLocked());
        d.lockCriteria();
        QVERIFY(d.criteriaLocked());
        RunController c;
        QSignalSpy finished(&c, &RunController::finished);
        RunSpec s2 = d.spec();
        s2.device = "cpu";
        s2.inspect = false;
        QVERIFY(c.start(s2, db_));
        QCOMPARE(c.spec().criteria.max_flips, 3);  // the frozen copy
        QVERIFY(finished.wait(60000));
        storage::Store store(db_.toStdString());
        const auto run = store.load_run(finished.at(0).at(0).toString().toStdString());
        QCOMPARE(run.criteria.max_flips, 3);
        QVERIFY(!run.criteria.fixed_at.empty());
    }

    // ---- live runs: values appended, selection left alone ----------------------------------

    /// A comparison "engine" that replays the recorded run through the sink (a new run id).
    RunController::ComparisonEngine replay() {
        storage::Store store(db_.toStdString());
        const RunResult recorded = store.load_run(uuid_);
        return [recorded](const RunSpec&, RunSink* sink, ProgressObserver*) {
            RunResult r = recorded;
            r.run_id = make_uuid();
            r.spec.precisions.clear();  // as recorded (the spec read back may list them twice: see the report)
            for (const auto& c : r.comparisons) r.spec.precisions.push_back(c.precision);
            RunResult header = r;
            header.passes.clear();
            header.comparisons.clear();
            sink->run_started(header);
            for (const auto& p : r.passes) sink->pass_finished(p);
            for (const auto& c : r.comparisons) sink->comparison_finished(c);
            sink->run_finished(r);
            return r;
        };
    }

    /// A training "engine" producing `n` steps, `pause` apart.
    static RunController::TrainingEngine fakeTraining(int n, std::chrono::milliseconds pause) {
        return [n, pause](const TrainSpec& spec, TrainSink* sink, ProgressObserver*) {
            TrainResult r;
            r.run_id = make_uuid();
            r.spec = spec;
            r.started_at = now_iso8601();
            sink->train_started(r);
            for (int i = 0; i < n; ++i) {
                TrainStep st;
                st.step = i;
                st.loss_ref = 2.0 / (1 + i);
                st.loss_amp = st.loss_ref * 1.01;
                st.scale = 65536;
                st.effective_updates = i + 1;
                st.grad_norm = 1;
                st.divergence = 1e-4;
                r.steps.push_back(st);
                sink->step_finished(st);
                std::this_thread::sleep_for(pause);
            }
            r.iterations = r.effective_updates = n;
            r.finished_at = now_iso8601();
            sink->train_finished(r);
            return r;
        };
    }

    void liveComparisonIsAppendedAsValues() {
        MainWindow w(recorder());
        QVERIFY(w.openDatabase(db_));
        w.controller()->setEngines(replay(), {});
        QSignalSpy started(w.controller(), &RunController::started);
        QSignalSpy done(w.controller(), &RunController::finished);
        int resets = 0, columnsAdded = 0, flipsAdded = 0;
        bool live = false;
        connect(
            w.controller(), &RunController::runStarted, &w, [&] { live = true; }, Qt::QueuedConnection);
        connect(w.sampleModel(), &QAbstractItemModel::modelReset, [&] { resets += live; });
        connect(w.sampleModel(), &QAbstractItemModel::columnsInserted, [&] { ++columnsAdded; });
        connect(w.flipModel(), &QAbstractItemModel::rowsInserted, [&] { ++flipsAdded; });
        QVERIFY(w.startRun(RunSpec{}));
        QVERIFY(done.wait(30000));
        const QString uuid = done.at(0).at(0).toString();
        QCOMPARE(w.currentRun(), uuid);  // the run the user started is shown
        QCOMPARE(columnsAdded, 2);       // fp16 and bf16 arrived as values and were appended
        QVERIFY(flipsAdded > 0);
        QCOMPARE(resets, 0);  // no reload after the start
        QCOMPARE(w.sampleModel()->columnCount(), 3 + 3 * 2);
        QVERIFY(w.layerModel()->rowCount() > 0);
        QVERIFY2(overviewText(w).contains(QStringLiteral("rejected")), qPrintable(overviewText(w)));
        QVERIFY(overviewText(w).contains(QStringLiteral("completed")));
    }

    void selectionStaysDuringALiveRun() {
        auto w = shownWindow();
        QVERIFY(w);
        w->controller()->setEngines({}, fakeTraining(120, std::chrono::milliseconds(4)));
        QSignalSpy done(w->controller(), &RunController::finished);
        int batches = 0, resets = 0;
        connect(w->controller(), &RunController::stepsFinished, [&] { ++batches; });
        TrainSpec spec;
        spec.model = "demo:mlp";
        QVERIFY(w->startTraining(spec));
        QTRY_VERIFY_WITH_TIMEOUT(batches > 0, 10000);
        // the live run is shown, its steps appended (no reload)
        QCOMPARE(w->tabs()->currentIndex(), int(MainWindow::kTrainingTab));
        connect(w->stepModel(), &QAbstractItemModel::modelReset, [&] { ++resets; });
        QTRY_VERIFY_WITH_TIMEOUT(w->stepModel()->rowCount() > 20, 10000);
        QCOMPARE(resets, 0);
        // the user picks a recorded run while the live one goes on
        const QString recorded = QString::fromStdString(uuid_);
        auto* proxy = w->runView()->model();
        for (int r = 0; r < proxy->rowCount(); ++r)
            if (proxy->index(r, 0).data(RunListModel::UuidRole).toString() == recorded)
                w->runView()->selectionModel()->setCurrentIndex(
                    proxy->index(r, 0), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
        QCOMPARE(w->currentRun(), recorded);
        QVERIFY(done.wait(30000));
        QCoreApplication::processEvents();
        QCOMPARE(w->currentRun(), recorded);  // nothing jumped back to the live run
        QCOMPARE(w->runView()->currentIndex().data(RunListModel::UuidRole).toString(), recorded);
        const auto rows = w->runView()->selectionModel()->selectedRows();
        QCOMPARE(rows.size(), 1);
        QCOMPARE(rows.front().data(RunListModel::UuidRole).toString(), recorded);
        QCOMPARE(w->sampleModel()->rowCount(), 40);
        QCOMPARE(w->stepModel()->rowCount(), 0);
        const auto* row = w->runModel()->find(done.at(0).at(0).toString().toStdString());
        QVERIFY(row);
        QCOMPARE(row->status, std::string("completed"));
        // selected again, the finished run is read from the database
        w->showRun(done.at(0).at(0).toString());
        QCOMPARE(w->stepModel()->rowCount(), 120);
    }

    void liveTrainingChartsFollowTheAppendedSteps() {
        auto w = shownWindow();
        QVERIFY(w);
        w->controller()->setEngines({}, fakeTraining(50, std::chrono::milliseconds(1)));
        QSignalSpy done(w->controller(), &RunController::finished);
        TrainSpec spec;
        QVERIFY(w->startTraining(spec));
        QVERIFY(done.wait(30000));
        QCOMPARE(w->stepModel()->rowCount(), 50);
        auto* loss = w->currentChart();
        QVERIFY(loss && loss->chart());
        auto* amp = chart_probe::series(loss->chart(), QStringLiteral("AMP"));
        QVERIFY(amp);
        QTRY_COMPARE(amp->count(), 50);  // drawn in batches, at most kLiveRefreshMs late
        QCOMPARE(amp->at(49).y(), 2.0 / 50 * 1.01);
        QVERIFY2(overviewText(*w).contains(QStringLiteral("50 iterations, 50 effective updates")),
                 qPrintable(overviewText(*w)));
    }

    // ---- dialogs, errors, views --------------------------------------------------------------

    void dialogsValidateBeforeClosing() {
        NewRunDialog d;
        RunSpec spec;
        spec.precisions = {};
        d.setSpec(spec);
        d.show();
        d.accept();
        QVERIFY(d.isVisible());  // still open, saying why
        QVERIFY(d.result() != QDialog::Accepted);
        QVERIFY2(d.errorText().contains(QStringLiteral("AMP passes")), qPrintable(d.errorText()));
        spec.precisions = {Precision::Bf16};
        d.setSpec(spec);
        d.accept();
        QCOMPARE(d.result(), int(QDialog::Accepted));
        QVERIFY(d.errorText().isEmpty());
        TrainingDialog t;
        TrainSpec ts;
        ts.model = "";
        t.setSpec(ts);
        t.show();
        t.accept();
        QVERIFY(t.isVisible());
        QVERIFY2(t.errorText().contains(QStringLiteral("Model")), qPrintable(t.errorText()));
    }

    void errorsGoToTheInjectedReporter() {
        messages_.clear();
        MainWindow w(recorder());
        QVERIFY(w.openDatabase(db_));
        w.compareSelected();  // nothing selected
        QCOMPARE(messages_.size(), 1);
        QVERIFY2(messages_.front().startsWith(QStringLiteral("Compare: Select exactly two")),
                 qPrintable(messages_.front()));
        const QString foreign = dir_.filePath(QStringLiteral("foreign-reported.sqlite"));
        rawExec(foreign, "CREATE TABLE people(name TEXT)");
        QVERIFY(!w.openDatabase(foreign));
        QCOMPARE(messages_.size(), 2);
        QVERIFY2(messages_.back().startsWith(QStringLiteral("Cannot open database: ")), qPrintable(messages_.back()));
        // a question is asked through it too, and a "no" is obeyed
        QStringList asked;
        MainWindow no(std::make_unique<Recorder>(&asked, false));
        const QString empty = dir_.filePath(QStringLiteral("empty-refused.sqlite"));
        QFile f(empty);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.close();
        QVERIFY(!no.openDatabase(empty));
        QCOMPARE(asked.size(), 1);
        QVERIFY(asked.front().startsWith(QStringLiteral("Empty file? ")));
        QCOMPARE(QFileInfo(empty).size(), 0);
    }

    void compareModelPairsTheSamplesOfTwoRuns() {
        storage::Store store(db_.toStdString());
        const RunResult a = store.load_run(uuid_);
        RunResult b = a;
        b.run_id = "b";
        b.comparisons.resize(1);  // fp16 only
        b.samples.push_back({"only-b", "edge"});
        b.comparisons[0].deltas.push_back(SampleDelta{});
        b.comparisons[0].deltas.back().sample = "only-b";
        b.comparisons[0].deltas.back().abs = 0.5;
        CompareModel m;
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.resetData(a, b);
        QCOMPARE(m.rowCount(), 41);
        QCOMPARE(m.columnCount(), 2 + 2 + 1);
        QCOMPARE(m.headerData(2, Qt::Horizontal).toString(), QStringLiteral("A fp16 |Δ|"));
        QCOMPARE(m.headerData(4, Qt::Horizontal).toString(), QStringLiteral("B fp16 |Δ|"));
        QCOMPARE(m.index(40, 0).data().toString(), QStringLiteral("only-b"));
        QVERIFY(!m.index(40, 2).data(CompareModel::PlotRole).isValid());  // A has no such sample
        QCOMPARE(m.index(40, 4).data(CompareModel::PlotRole).toDouble(), 0.5);
        QCOMPARE(m.index(3, 4).data(CompareModel::SortRole),
                 m.index(3, 2).data(CompareModel::SortRole));  // same fp16 deltas
        std::unique_ptr<QChart> chart(makeCompareChart(&m));
        QStringList names;
        for (auto* s : chart->series()) names << s->name();
        QCOMPARE(names, (QStringList{QStringLiteral("A fp16"), QStringLiteral("A bf16"), QStringLiteral("B fp16")}));
        QCOMPARE(chart_probe::series(chart.get(), QStringLiteral("B fp16"))->count(), 41);
        QCOMPARE(chart_probe::series(chart.get(), QStringLiteral("A bf16"))->count(), 40);
        chart.reset();
    }

    void everyViewSaysHowToFillIt() {
        QTemporaryDir dir;
        auto w = shownWindow(dir.filePath(QStringLiteral("new.sqlite")));
        QVERIFY(w);
        QVERIFY(overviewText(*w).contains(QStringLiteral("No run selected")));
        QVERIFY(overviewText(*w).contains(QStringLiteral("File → New run…")));
        for (int t = MainWindow::kDeltasTab; t < MainWindow::NUM_TABS; ++t) {
            w->tabs()->setCurrentIndex(t);
            QCoreApplication::processEvents();
            QLabel* shown = nullptr;
            for (auto* l : w->tabs()->currentWidget()->findChildren<QLabel*>(QStringLiteral("emptyState")))
                if (l->isVisible()) shown = l;
            QVERIFY2(shown, qPrintable(QStringLiteral("tab %1 shows no empty state").arg(w->tabs()->tabText(t))));
            QVERIFY2(shown->text().contains(QStringLiteral("This view shows")) &&
                         shown->text().contains(QStringLiteral(" → ")),
                     qPrintable(shown->text()));
            QVERIFY(!w->currentChart());  // no chart frames without data
        }
        QVERIFY(w->openDatabase(db_));
        w->showRun(QString::fromStdString(uuid_));
        w->tabs()->setCurrentIndex(MainWindow::kDeltasTab);
        QCoreApplication::processEvents();
        QVERIFY(w->currentChart());  // a run: its chart instead
    }

    void chartWidgetExportsItsChart() {
        auto w = shownWindow();
        QVERIFY(w);
        w->showRun(QString::fromStdString(uuid_));
        w->tabs()->setCurrentIndex(MainWindow::kLayersTab);
        QCoreApplication::processEvents();
        ChartWidget* c = w->currentChart();
        QVERIFY(c);
        QTemporaryDir dir;
        const QString png = dir.filePath(QStringLiteral("layers.png")),
                      svg = dir.filePath(QStringLiteral("layers.svg"));
        QCOMPARE(c->exportTo(png), QString());
        QImage img(png);
        QVERIFY(!img.isNull());
        QCOMPARE(img.size(), c->view()->size() * c->view()->devicePixelRatio());
        QCOMPARE(c->exportTo(svg), QString());
        QFile f(svg);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QVERIFY(f.readAll().contains("absmax per op"));
        QVERIFY(!c->exportTo(dir.filePath(QStringLiteral("no/such/dir/x.png"))).isEmpty());
    }

    void runBrowserColumnsFitAt1280() {
        QTemporaryDir empty;
        auto w = shownWindow(empty.filePath(QStringLiteral("none-yet.sqlite")));  // runs arrive after the window is up
        QVERIFY(w);
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        QVERIFY(w->openDatabase(db_));
        QCoreApplication::processEvents();
        QVERIFY(w->runModel()->rowCount() > 0);
        auto* v = w->runView();
        int total = 0;
        for (int c = 0; c < v->model()->columnCount(); ++c) {
            if (v->isColumnHidden(c)) continue;  // behind the header's menu
            const int need = std::max(static_cast<QAbstractItemView*>(v)->sizeHintForColumn(c),
                                      v->horizontalHeader()->sectionSizeHint(c));
            QVERIFY2(v->columnWidth(c) >= need,
                     qPrintable(QStringLiteral("column %1 (%2): %3 px for %4 px of content")
                                    .arg(c)
                                    .arg(v->model()->headerData(c, Qt::Horizontal).toString())
                                    .arg(v->columnWidth(c))
                                    .arg(need)));
            total += v->columnWidth(c);
        }
        QVERIFY2(total <= v->viewport()->width(),
                 qPrintable(QStringLiteral("%1 px of columns in a %2 px view").arg(total).arg(v->viewport()->width())));
        QString widths;
        for (int c = 0; c < v->model()->columnCount(); ++c) widths += QStringLiteral(" %1").arg(v->columnWidth(c));
        QVERIFY2(w->tabs()->width() >= 700,
                 qPrintable(QStringLiteral("views %1 px; columns%2")
                                .arg(w->tabs()->width())
                                .arg(widths)));  // and the views keep room
    }

    void demoRecordsAComparisonAndATrainingRun() {
        QTemporaryDir dir;
        MainWindow w(recorder());
        QVERIFY(w.openDatabase(dir.filePath(QStringLiteral("demo.sqlite"))));
        QSignalSpy demo(&w, &MainWindow::demoFinished);
        w.startDemo();
        QVERIFY(demo.wait(240000));
        storage::Store store(dir.filePath(QStringLiteral("demo.sqlite")).toStdString());
        const auto runs = store.list_runs();
        QCOMPARE(int(runs.size()), 4);  // and the demo incident's replay and remedy (tst_demo)
        QStringList kinds;
        std::string train;
        for (const auto& r : runs) {
            kinds << QString::fromStdString(r.kind + " " + r.status);
            if (r.kind == "train") train = r.uuid;
        }
        kinds.sort();
        QCOMPARE(kinds, (QStringList{QStringLiteral("compare completed"), QStringLiteral("replay completed"),
                                     QStringLiteral("replay completed"), QStringLiteral("train completed")}));
        QCOMPARE(int(store.training_steps(train).size()), MainWindow::kDemoTrainingSteps);
        QCOMPARE(w.runModel()->find(w.currentRun().toStdString())->kind,
                 std::string("compare"));  // the demo's story is shown
        w.showRun(QString::fromStdString(train));
        QCOMPARE(w.stepModel()->rowCount(), MainWindow::kDemoTrainingSteps);
    }

    /// A copy of the recorded database to damage.
    QString copyOfDatabase(const QString& name) {
        rawExec(db_, "PRAGMA wal_checkpoint(TRUNCATE)");
        const QString copy = dir_.filePath(name);
        QFile::remove(copy);
        if (!QFile::copy(db_, copy)) return {};
        return copy;
    }

    void unreadableRunIsAVisibleMessage() {
        const QString db = copyOfDatabase(QStringLiteral("unreadable.sqlite"));
        QVERIFY(!db.isEmpty());
        rawExec(db, "DROP TRIGGER runs_criteria_immutable; UPDATE runs SET header_json='{not json'");
        MainWindow w(recorder());
        QVERIFY(w.openDatabase(db));
        QVERIFY(w.notice().isEmpty());
        w.showRun(QString::fromStdString(uuid_));
        QVERIFY2(w.notice().contains(QStringLiteral("cannot be read")), qPrintable(w.notice()));
        QVERIFY2(w.notice().contains(QStringLiteral("runs.header_json")), qPrintable(w.notice()));
        QVERIFY(w.findChild<QLabel*>(QStringLiteral("runNotice"))->isVisibleTo(&w));
        QVERIFY(overviewText(w).contains(QStringLiteral("cannot be read")));
        QCOMPARE(w.sampleModel()->rowCount(), 0);  // nothing of another run stays on screen
        QCOMPARE(w.tabs()->currentIndex(), int(MainWindow::kOverviewTab));
    }

    void damagedRunShowsWhatIsIntact() {
        const QString db = copyOfDatabase(QStringLiteral("damaged.sqlite"));
        QVERIFY(!db.isEmpty());
        const std::string damage =
            "UPDATE layer_chunks SET data=X'00' WHERE pass_id=(SELECT max(p.id) FROM passes p "
            "JOIN runs r ON r.id=p.run_id WHERE r.uuid='" +
            uuid_ + "')";
        rawExec(db, damage.c_str());
        MainWindow w(recorder());
        QVERIFY(w.openDatabase(db));
        w.showRun(QString::fromStdString(uuid_));
        QVERIFY2(w.notice().contains(QStringLiteral("damaged")), qPrintable(w.notice()));
        QVERIFY(w.findChild<QLabel*>(QStringLiteral("runNotice"))->isVisibleTo(&w));
        QVERIFY(overviewText(w).contains(QStringLiteral("Damaged")));
        QCOMPARE(w.sampleModel()->rowCount(), 40);  // deltas, flips and the intact passes are shown
        QVERIFY(w.flipModel()->rowCount() > 0);
        QVERIFY(w.layerModel()->rowCount() > 0);  // the fp16 pass (first NaN) is intact
        w.showRun(QString::fromStdString(uuid_));
        QVERIFY(!w.notice().isEmpty());
    }

    void emptyFileSaysItBecomesANewDatabase() {
        const QString path = dir_.filePath(QStringLiteral("empty.sqlite"));
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.close();
        MainWindow w(recorder());
        QVERIFY(w.openDatabase(path));
        QVERIFY2(w.notice().contains(QStringLiteral("empty file")), qPrintable(w.notice()));
        QVERIFY(w.notice().contains(QStringLiteral("new ampscope run database")));
        QVERIFY(w.findChild<QLabel*>(QStringLiteral("runNotice"))->isVisibleTo(&w));
        QCOMPARE(w.runModel()->rowCount(), 0);
        QVERIFY(w.openDatabase(db_));  // an ordinary database: no notice
        QVERIFY(w.notice().isEmpty());
    }

    void foreignDatabaseIsNotWritten() {
        const QString path = dir_.filePath(QStringLiteral("people.sqlite"));
        rawExec(path, "CREATE TABLE people(name TEXT)");
        const auto before = QFileInfo(path).size();
        MainWindow w(recorder());
        QVERIFY(!w.openDatabase(path));
        QCOMPARE(QFileInfo(path).size(), before);
        QVERIFY(!QFileInfo::exists(path + QStringLiteral("-wal")));
    }
};

QTEST_MAIN(TstUi)
#include "tst_ui.moc"
