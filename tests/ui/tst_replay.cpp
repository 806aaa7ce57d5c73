// SPDX-License-Identifier: MIT
// GUI tests of File → Replay incident… (offscreen). The incident is planted by Python torch in
// the test run (tests/ui/replay_incident.py: the job of tests/cli/test_replay.py, a .pt2 model,
// the state of step K-1 in several formats, the batch of step K, and what Python's hooks and
// GradScaler say about step K). The replay dialog driven through the menu gives a replay whose
// view names the stage, module, op and autograd node Python's hooks name, the scale and skip
// GradScaler took, the first non-finite module's row highlighted; the BF16 remedy is shown
// beside the original with its own verdict (Python's BF16 step); replays are recorded (kind
// "replay") and reopen from the run browser side by side; a damaged checkpoint gives an error
// dialog naming the file and records nothing; a cancel records nothing; the advisor's set is
// read like the New-run dialog's Load FP32 regions….
#include <QAction>
#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include <fnmatch.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <thread>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/replay.h"
#include "ampscope/storage/replay_record.h"
#include "ampscope/storage/store.h"
#include "chart_probe.h"
#include "charts.h"
#include "errorreporter.h"
#include "mainwindow.h"
#include "runlistmodel.h"
#include "replaydialog.h"
#include "replayjob.h"
#include "replaymodel.h"
#include "replayview.h"

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

/// Passes progress on and holds the replay at its first step until the job asks to cancel.
class HoldUntilCancel : public ProgressObserver {
public:
    HoldUntilCancel(ProgressObserver* inner, std::atomic<bool>* held) : inner_(inner), held_(held) {}
    void progress(const std::string& stage, int done, int total) override {
        inner_->progress(stage, done, total);
        *held_ = true;
        for (int i = 0; i < 6000 && !inner_->cancel_requested(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    bool cancel_requested() const override { return inner_->cancel_requested(); }

private:
    ProgressObserver* inner_;
    std::atomic<bool>* held_;
};

/// Fills the replay dialog File → Replay incident… opens with `spec` and presses Start.
void answerReplayDialog(const ReplaySpec& spec) {
    auto* timer = new QTimer;
    timer->setInterval(20);
    QObject::connect(timer, &QTimer::timeout, [timer, spec] {
        for (auto* w : QApplication::topLevelWidgets()) {
            auto* d = qobject_cast<ReplayDialog*>(w);
            if (!d || !d->isVisible()) continue;
            timer->stop();
            timer->deleteLater();
            d->setSpec(spec);
            d->accept();
            return;
        }
    });
    timer->start();
}

QString cell(const QAbstractItemModel* m, int row, int column) {
    return m->index(row, column).data().toString();
}

/// The chart `c` of `side` once built (its table tab shown): its series by name.
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

/// The points of the series `name` of `chart` (none when it has no such series).
QList<QPointF> points(QChart* chart, const char* name) {
    auto* s = chart_probe::series(chart, QString::fromUtf8(name));
    return s ? s->points() : QList<QPointF>{};
}

/// The points every module's (or parameter's) row gives: (row, value), finite values only.
QList<QPointF> rowPoints(int rows, const std::function<double(int)>& value) {
    QList<QPointF> out;
    for (int r = 0; r < rows; ++r)
        if (std::isfinite(value(r))) out.append(QPointF(r, std::max(value(r), 1e-12)));
    return out;
}

/// The charts of one side show what its tables hold: each module's FP32 and AMP absmax against
/// the format's limit, the first non-finite module marked; loss and scale per step, skipped
/// steps marked; each parameter's gradient and update relative difference. "" or what differs.
QString chartsProblems(ReplayView* v, ReplayView::Side side, double limit) {
    QStringList out;
    const auto* layers = v->layerModel(side);
    const auto* params = v->paramModel(side);
    const ReplayResult& r = layers->replay();
    QChart* c = shownChart(v, side, ReplayView::kLayersChart);
    if (!c) return QStringLiteral("no activations chart");
    const int n = layers->rowCount();
    if (points(c, "FP32") != rowPoints(n, [&](int i) { return layers->layer(i).ref_absmax; }))
        out << QStringLiteral("FP32 absmax");
    if (points(c, "AMP") != rowPoints(n, [&](int i) { return layers->layer(i).amp_absmax; }))
        out << QStringLiteral("AMP absmax");
    const auto lim = points(c, r.spec.precision == Precision::Fp16 ? "FP16 max" : "BF16 max");
    if (lim.size() != 2 || lim[0].y() != limit || lim[1].y() != limit) out << QStringLiteral("limit line");
    const int first = layers->firstNonFiniteRow();
    const auto marked = points(c, "first NaN/Inf");
    if (first >= 0 ? (marked.size() != 1 || marked[0].x() != first) : !marked.isEmpty())
        out << QStringLiteral("first non-finite module marked at %1 points").arg(marked.size());
    c = shownChart(v, side, ReplayView::kLossChart);
    if (!c) return (out << QStringLiteral("no loss chart")).join(QStringLiteral(", "));
    const auto& st = r.steps;
    auto step1 = [](double y) { return std::isfinite(y) ? QList<QPointF>{QPointF(1, y)} : QList<QPointF>{}; };
    if (points(c, "reference (FP32)") != step1(st[0].loss_ref)) out << QStringLiteral("loss FP32");
    if (points(c, "AMP") != step1(st[0].loss_amp)) out << QStringLiteral("loss AMP");
    c = shownChart(v, side, ReplayView::kScaleChart);
    if (!c) return (out << QStringLiteral("no scale chart")).join(QStringLiteral(", "));
    if (points(c, "scale used") != step1(st[0].scale)) out << QStringLiteral("scale");
    if (points(c, "skipped step (inf/NaN gradients)").size() != (st[0].skipped ? 1 : 0))
        out << QStringLiteral("skipped step");
    c = shownChart(v, side, ReplayView::kParamsChart);
    if (!c) return (out << QStringLiteral("no parameters chart")).join(QStringLiteral(", "));
    if (points(c, "gradient") != rowPoints(params->rowCount(), [&](int i) { return params->param(i).grad_rel; }))
        out << QStringLiteral("gradient");
    if (points(c, "update") != rowPoints(params->rowCount(), [&](int i) { return params->param(i).update_rel; }))
        out << QStringLiteral("update");
    QString why;
    for (auto cc : {ReplayView::kLayersChart, ReplayView::kParamsChart})  // drawn where the points are
        if (shownChart(v, side, cc) && !chart_probe::everySeriesDrawn(v->chart(side, cc)->view(), &why)) out << why;
    return out.join(QStringLiteral(", "));
}

}  // namespace

class TstReplay : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir_;
    QString db_;
    QJsonObject oracle_;
    QStringList messages_;
    QString original_, remedy_;  ///< the replays recorded by the first test

    QString file(const char* name) const { return dir_.filePath(QString::fromUtf8(name)); }

    ReplaySpec incident() const {
        ReplaySpec s;
        s.model = file("model.pt2").toStdString();
        s.checkpoint = file("dict.pt").toStdString();
        s.batch = file("batch.pt").toStdString();
        s.device = "cpu";
        return s;
    }

    size_t recorded() const {
        storage::Store store(db_.toStdString());
        return store.list_runs().size();
    }

    std::unique_ptr<MainWindow> window() {
        auto w = std::make_unique<MainWindow>(std::make_unique<Recorder>(&messages_));
        if (!w->openDatabase(db_)) return nullptr;
        w->show();
        return w;
    }

    /// The incident replayed through File → Replay incident…; its run id.
    QString replayThroughMenu(MainWindow& w, const ReplaySpec& spec) {
        QSignalSpy done(w.replayJob(), &ReplayJob::finished);
        answerReplayDialog(spec);
        w.replayAction()->trigger();
        if (!QTest::qWaitFor([&] { return done.count() == 1; }, 120000)) return {};
        return QString::fromStdString(done[0][0].value<ReplayResult>().run_id);
    }

private Q_SLOTS:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        db_ = dir_.filePath(QStringLiteral("runs.sqlite"));
        QProcess py;
        py.setProcessChannelMode(QProcess::MergedChannels);
        py.start(QStringLiteral(AMPSCOPE_PYTHON),
                 {QStringLiteral("-W"), QStringLiteral("ignore"),
                  QStringLiteral(AMPSCOPE_TESTS_DIR "/ui/replay_incident.py"), dir_.path()});
        QVERIFY(py.waitForFinished(300000));
        QVERIFY2(py.exitCode() == 0, py.readAll().constData());
        QFile f(file("oracle.json"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        oracle_ = QJsonDocument::fromJson(f.readAll()).object();
        QCOMPARE(oracle_[QStringLiteral("fp16")][QStringLiteral("module")].toString(),
                 QStringLiteral("head"));  // as planted
        QVERIFY(oracle_[QStringLiteral("fp16")][QStringLiteral("skipped")].toBool());
    }

    void init() { messages_.clear(); }

    void dialogNamesMissingFiles() {
        ReplayDialog d;
        ReplaySpec s = incident();
        s.checkpoint = file("nowhere.pt").toStdString();
        d.setSpec(s);
        d.accept();
        QVERIFY2(d.errorText().contains(QStringLiteral("Checkpoint")) && d.errorText().contains(file("nowhere.pt")),
                 qPrintable(d.errorText()));
        s = incident();
        s.checkpoint = file("checkpoint-4").toStdString();  // a Trainer folder is a checkpoint
        s.scaler_state = file("no-scaler.pt").toStdString();
        d.setSpec(s);
        d.accept();
        QVERIFY2(d.errorText().contains(QStringLiteral("Scaler state")) && d.errorText().contains(file("no-scaler.pt")),
                 qPrintable(d.errorText()));
        s.scaler_state.clear();
        s.batch = dir_.path().toStdString();  // a folder is not a batch
        d.setSpec(s);
        d.accept();
        QVERIFY2(d.errorText().contains(QStringLiteral("Failing batch")), qPrintable(d.errorText()));
        s.batch = file("batch.pt").toStdString();
        d.setSpec(s);
        QCOMPARE(d.spec().checkpoint, file("checkpoint-4").toStdString());
        QCOMPARE(d.spec().optimizer_state, std::string());
    }

    void dialogKeepsTheJobsSettings() {
        ReplayDialog d;
        ReplaySpec s = incident();
        s.optimizer_kind = OptimizerKind::Adamw;
        s.clip_grad_norm = 0.5;
        s.clip_given = true;
        s.no_scaler = true;
        s.incident = ReplayIncident{dir_.path().toStdString(), "loss", "the loss is nan", "pytorch 2.11", 41200, 3, 8};
        d.setSpec(s);
        auto got = d.spec();
        QVERIFY(got.optimizer_kind == OptimizerKind::Adamw);
        QCOMPARE(got.clip_grad_norm, 0.5);
        QVERIFY(got.clip_given && got.no_scaler);
        QVERIFY(got.incident && got.incident->step == 41200 && got.incident->rank == 3);
        s.clip_given = false;
        s.clip_grad_norm = 0;
        s.param_groups = file("nowhere.json").toStdString();
        d.setSpec(s);
        d.accept();  // a groups file that is not there: named
        QVERIFY2(d.errorText().contains(QStringLiteral("Param groups")), qPrintable(d.errorText()));
        s.param_groups.clear();
        d.setSpec(s);
        QVERIFY(!d.spec().clip_given);  // not said: the Trainer's clipping is warned about
    }

    void openIncidentReplaysTheBundle() {
        auto w = window();
        QVERIFY(w);
        const size_t before = recorded();
        QTemporaryDir empty;
        w->openIncident(empty.path());  // not a bundle: an error naming incident.json, nothing recorded
        QVERIFY2(messages_.join(QLatin1Char('\n')).contains(QStringLiteral("incident.json")),
                 qPrintable(messages_.join(QLatin1Char('\n'))));
        QCOMPARE(recorded(), before);
        messages_.clear();
        QTemporaryDir bundle;  // the fixture's files as a bundle the capture package would write
        for (auto [from, to] :
             {std::pair{"model.pt2", "model.pt2"}, {"dict.pt", "checkpoint.pt"}, {"batch.pt", "batch.pt"}})
            QVERIFY(QFile::copy(file(from), bundle.filePath(QString::fromUtf8(to))));
        QFile j(bundle.filePath(QStringLiteral("incident.json")));
        QVERIFY(j.open(QIODevice::WriteOnly));
        j.write(R"({"format": "ampscope-incident", "version": 1, "created_at": "2026-12-02T17:00:00+00:00", "step": 4,
            "rank": 1, "local_rank": 1, "world_size": 2, "framework": {"name": "pytorch", "version": "2.11.0", "torch": "2.11.0"},
            "detected": {"what": "grad", "detail": "non-finite gradients"},
            "precision": {"dtype": "float16", "device_type": "cpu", "keep_fp32": []}, "loss": "ce", "clip_grad_norm": null,
            "accumulation_steps": 1, "optimizer": {"class": "torch.optim.adam.Adam", "kind": "adam", "fused": false, "foreach": null},
            "scaler": true, "files": {"model": "model.pt2", "checkpoint": "checkpoint.pt", "batch": "batch.pt"}, "export_error": null})");
        j.close();
        QSignalSpy done(w->replayJob(), &ReplayJob::finished);
        ReplaySpec seen;
        auto* timer = new QTimer;  // the dialog opens filled from the bundle: take what it shows, press Start
        timer->setInterval(20);
        QObject::connect(timer, &QTimer::timeout, [timer, &seen] {
            for (auto* tw : QApplication::topLevelWidgets())
                if (auto* d = qobject_cast<ReplayDialog*>(tw); d && d->isVisible()) {
                    timer->stop();
                    timer->deleteLater();
                    seen = d->spec();
                    d->accept();
                    return;
                }
        });
        timer->start();
        w->openIncident(bundle.path());
        QVERIFY(QTest::qWaitFor([&] { return done.count() == 1; }, 120000));
        QCOMPARE(seen.checkpoint, bundle.filePath(QStringLiteral("checkpoint.pt")).toStdString());
        QVERIFY(seen.incident && seen.incident->rank == 1 && seen.clip_given);
        const auto r = done[0][0].value<ReplayResult>();
        QVERIFY(r.first_nonfinite);  // the fixture's planted FP16 incident
        const QString said = w->replayView()->summaryText(ReplayView::Original);
        QVERIFY2(said.contains(QStringLiteral("on rank 1 of 2")) && said.contains(QStringLiteral("reproduces it")),
                 qPrintable(said));
        QCOMPARE(recorded(), before + 1);
    }

    void replayNamesPythonsOriginAndRemedyBf16() {
        const auto fp16 = oracle_[QStringLiteral("fp16")].toObject();
        const auto bf16 = oracle_[QStringLiteral("bf16")].toObject();
        auto w = window();
        QVERIFY(w);
        const size_t before = recorded();
        const QString original = replayThroughMenu(*w, incident());
        QVERIFY(!original.isEmpty());
        QCOMPARE(recorded(), before + 1);
        QVERIFY2(messages_.isEmpty(), qPrintable(messages_.join(QLatin1Char('\n'))));
        QVERIFY2(w->notice().isEmpty(), qPrintable(w->notice()));  // opened as a replay, not "cannot be read"
        QCOMPARE(w->currentRun(), original);
        QCOMPARE(w->tabs()->currentIndex(), int(MainWindow::kReplayTab));
        ReplayView* v = w->replayView();
        // the first non-finite stage as Python's hooks name it, in words
        const QString summary = v->summaryText(ReplayView::Original);
        for (const char* key : {"module", "op", "node"})
            QVERIFY2(summary.contains(fp16[QString::fromUtf8(key)].toString()), qPrintable(summary));
        QVERIFY2(summary.contains(QStringLiteral("in the backward pass at step 1, on the AMP side")),
                 qPrintable(summary));
        QVERIFY2(summary.contains(QStringLiteral("checkpoint format: dict")) &&
                     summary.contains(QStringLiteral("optimizer: adam")) &&
                     summary.contains(QStringLiteral("precision: fp16")) &&
                     summary.contains(QStringLiteral("GradScaler: enabled")),
                 qPrintable(summary));
        // the steps table: GradScaler's scale and skip
        const auto* steps = v->stepModel(ReplayView::Original);
        QCOMPARE(steps->rowCount(), 1);
        QCOMPARE(steps->replay().steps[0].scale, fp16[QStringLiteral("scale")].toDouble());
        QCOMPARE(cell(steps, 0, ReplayStepModel::Scale),
                 QString::number(fp16[QStringLiteral("scale")].toDouble(), 'g', 7));
        QCOMPARE(cell(steps, 0, ReplayStepModel::Skipped), QStringLiteral("yes"));
        QCOMPARE(steps->replay().steps[0].loss_amp, fp16[QStringLiteral("loss")].toDouble());
        // the activations: the first non-finite module's row highlighted
        const auto* layers = v->layerModel(ReplayView::Original);
        const int row = layers->firstNonFiniteRow();
        QVERIFY(row >= 0);
        QCOMPARE(cell(layers, row, ReplayLayerModel::Module), fp16[QStringLiteral("module")].toString());
        QVERIFY(layers->index(row, ReplayLayerModel::Module).data(Qt::BackgroundRole).isValid());
        QVERIFY(!layers->index(row == 0 ? 1 : 0, ReplayLayerModel::Module).data(Qt::BackgroundRole).isValid());
        QVERIFY(v->paramModel(ReplayView::Original)->rowCount() == 4);  // fc1 and head, weight and bias
        // the charts above the tables: the original's, the remedy's still empty
        QString problems = chartsProblems(v, ReplayView::Original, 65504);
        QVERIFY2(problems.isEmpty(), qPrintable(problems));
        QVERIFY(v->chart(ReplayView::Remedied, ReplayView::kLayersChart)->showsEmptyState());
        // a remedy one click away: BF16, beside the original with its own verdict
        QPushButton* bf = v->remedyButton(ReplayView::Remedy::Bf16);
        QVERIFY(bf->isEnabled());
        QCOMPARE(v->remedyButton(ReplayView::Remedy::KeepModule)->text(), QStringLiteral("Keep head in FP32"));
        QSignalSpy done(w->replayJob(), &ReplayJob::finished);
        bf->click();
        QVERIFY(!bf->isEnabled());  // while it replays
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 120000);
        QCOMPARE(recorded(), before + 2);
        const QString remedy = QString::fromStdString(done[0][0].value<ReplayResult>().run_id);
        QCOMPARE(w->currentRun(), remedy);
        QVERIFY(v->original() && QString::fromStdString(v->original()->run_id) == original);
        QVERIFY(v->remedy() && QString::fromStdString(v->remedy()->run_id) == remedy);
        const bool bfFinite =
            !bf16[QStringLiteral("found_inf")].toBool() && bf16[QStringLiteral("weights_finite")].toBool();
        QVERIFY(bfFinite);  // BF16 has FP32's range: Python's BF16 step stays finite
        QCOMPARE(
            v->changeLine(),
            QStringLiteral("FP16 → BF16: no non-finite values in 1 step; original: backward at step 1 in head (%1)")
                .arg(fp16[QStringLiteral("node")].toString()));
        QVERIFY2(v->summaryText(ReplayView::Remedied).contains(QStringLiteral("No non-finite values")),
                 qPrintable(v->summaryText(ReplayView::Remedied)));
        QVERIFY(v->summaryText(ReplayView::Remedied).contains(QStringLiteral("precision: bf16")));
        const auto* rsteps = v->stepModel(ReplayView::Remedied);
        QCOMPARE(rsteps->replay().steps[0].loss_amp, bf16[QStringLiteral("loss")].toDouble());
        QCOMPARE(cell(rsteps, 0, ReplayStepModel::Skipped), QStringLiteral("no"));
        QCOMPARE(v->layerModel(ReplayView::Remedied)->firstNonFiniteRow(), -1);
        problems = chartsProblems(v, ReplayView::Remedied, 3.3895313892515355e38);  // BF16's limit, nothing marked
        QVERIFY2(problems.isEmpty(), qPrintable(problems));
        problems = chartsProblems(v, ReplayView::Original, 65504);  // the original's still
        QVERIFY2(problems.isEmpty(), qPrintable(problems));
        // the remedy names its original in the record
        storage::Store store(db_.toStdString());
        const auto rec = storage::replay_from_json(storage::replay_json(store, remedy.toStdString()), "remedy");
        QCOMPARE(QString::fromStdString(rec.spec.original_run_id), original);
        QCOMPARE(rec.spec.precision, Precision::Bf16);
        QCOMPARE(rec.spec.device, std::string("cpu"));  // the inputs a remedy of a recorded replay reruns with
        QCOMPARE(rec.spec.steps, 1);
        QVERIFY2(messages_.isEmpty(), qPrintable(messages_.join(QLatin1Char('\n'))));
        remedy_ = remedy;
        original_ = original;
    }

    void recordedReplaysReopenFromTheBrowser() {
        QVERIFY(!remedy_.isEmpty());
        auto w = window();
        QVERIFY(w);
        auto select = [&](const QString& uuid) {
            auto* view = w->runView();
            for (int r = 0; r < view->model()->rowCount(); ++r) {
                const QModelIndex i = view->model()->index(r, 0);
                if (i.data(RunListModel::UuidRole).toString() == uuid) {
                    view->setCurrentIndex(i);  // as a click in the run browser
                    return true;
                }
            }
            return false;
        };
        QVERIFY(select(remedy_));
        QCOMPARE(w->currentRun(), remedy_);
        QVERIFY2(w->notice().isEmpty(), qPrintable(w->notice()));
        QCOMPARE(w->tabs()->currentIndex(), int(MainWindow::kReplayTab));
        ReplayView* v = w->replayView();
        QVERIFY(v->original() && QString::fromStdString(v->original()->run_id) == original_);
        QVERIFY(v->remedy() && QString::fromStdString(v->remedy()->run_id) == remedy_);
        QVERIFY(v->changeLine().startsWith(
            QStringLiteral("FP16 → BF16: no non-finite values in 1 step; original: backward at step 1 in head")));
        QVERIFY(v->summaryText(ReplayView::Original).contains(QStringLiteral("aten::mm")));
        QVERIFY(select(original_));  // the original alone, remedies one click away
        QVERIFY(v->original() && QString::fromStdString(v->original()->run_id) == original_);
        QVERIFY(!v->remedy());
        QVERIFY(v->remedyButton(ReplayView::Remedy::Bf16)->isEnabled());
        QVERIFY2(messages_.isEmpty(), qPrintable(messages_.join(QLatin1Char('\n'))));
    }

    void damagedCheckpointIsNamedAndNothingRecorded() {
        auto w = window();
        QVERIFY(w);
        const size_t before = recorded();
        QSignalSpy failed(w->replayJob(), &ReplayJob::failed);
        ReplaySpec s = incident();
        s.checkpoint = file("damaged.pt").toStdString();
        answerReplayDialog(s);
        w->replayAction()->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 120000);
        QCOMPARE(messages_.size(), 1);
        QVERIFY2(messages_[0].contains(file("damaged.pt")) &&
                     messages_[0].startsWith(QStringLiteral("Cannot replay: bad input")),
                 qPrintable(messages_[0]));
        QVERIFY(messages_[0].contains(QStringLiteral("Nothing was recorded")));
        QCOMPARE(recorded(), before);
        QVERIFY(!w->replayView()->cancelButton()->isVisible());
    }

    void cancelRecordsNothing() {
        auto w = window();
        QVERIFY(w);
        const size_t before = recorded();
        std::atomic<bool> held{false};
        w->replayJob()->setEngine([&held](const ReplaySpec& s, ProgressObserver* p) {
            HoldUntilCancel hold(p, &held);
            return run_replay(s, &hold);
        });
        QSignalSpy cancelled(w->replayJob(), &ReplayJob::cancelled);
        ReplaySpec s = incident();
        s.steps = 3;
        QVERIFY(w->startReplay(s, QStringLiteral("the incident")));
        QTRY_VERIFY_WITH_TIMEOUT(held.load(), 60000);
        QVERIFY(w->replayView()->cancelButton()->isVisible());
        w->replayView()->cancelButton()->click();
        QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 1, 60000);
        QCOMPARE(recorded(), before);
        QVERIFY(!w->replayView()->cancelButton()->isVisible());
        // a cancel that lands after the last step, before the record: nothing recorded either
        w->replayJob()->setEngine([&held](const ReplaySpec& s, ProgressObserver* p) {
            auto r = run_replay(s, nullptr);
            HoldUntilCancel hold(p, &held);
            hold.progress("replay", 1, 1);
            return r;
        });
        held = false;
        QVERIFY(w->startReplay(incident(), QStringLiteral("the incident")));
        QTRY_VERIFY_WITH_TIMEOUT(held.load(), 60000);
        w->replayView()->cancelButton()->click();
        QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 2, 60000);
        QCOMPARE(recorded(), before);
        QVERIFY2(messages_.isEmpty(), qPrintable(messages_.join(QLatin1Char('\n'))));
    }

    void keepModuleRemedyMatchesTheModuleAlone() {
        // a ModuleDict key holds glob characters: the remedy kept "blocks[0]" as a glob, which matches
        // "blocks0" and never the module itself
        ReplayResult r;
        r.spec.keep_fp32 = {"embed"};
        r.first_nonfinite = ReplayStage{0, ReplayStageKind::Forward, ReplaySide::Amp, "blocks[0]", "aten::linear", ""};
        const auto s = ReplayView::remedySpec(r, ReplayView::Remedy::KeepModule);
        QCOMPARE(s.keep_fp32, (std::vector<std::string>{"embed", "blocks\\[0\\]"}));
        QCOMPARE(fnmatch(s.keep_fp32[1].c_str(), "blocks[0]", 0), 0);
        QVERIFY(fnmatch(s.keep_fp32[1].c_str(), "blocks0", 0) != 0);
        // the advisor's set arrives as globs already (its file reader matches each module alone)
        const auto a = ReplayView::remedySpec(r, ReplayView::Remedy::AdvisorSet, 0, {"head\\[1\\]"});
        QCOMPARE(a.keep_fp32, (std::vector<std::string>{"embed", "head\\[1\\]"}));
    }

    void advisorsSetIsReadLikeLoadFp32Regions() {
        auto w = window();
        QVERIFY(w);
        QVERIFY(!original_.isEmpty());
        w->showRun(original_);
        ReplayView* v = w->replayView();
        QVERIFY(v->original());
        const QString bad = file("unverified.json"), good = file("advise.json");
        for (const auto& [path, text] :
             {std::pair{bad, QByteArray(R"({"keep_fp32": ["head"], "outcome": "unverified"})")},
              std::pair{good, QByteArray(R"({"keep_fp32": ["head", "fc1"], "outcome": "found"})")}}) {
            QFile f(path);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(text);
        }
        QSignalSpy asked(v, &ReplayView::remedyRequested);
        QVERIFY(!v->requestAdvisorSet(bad));  // refused as Load FP32 regions… refuses it
        QCOMPARE(asked.count(), 0);
        QCOMPARE(messages_.size(), 1);
        QVERIFY2(messages_[0].contains(bad) && messages_[0].contains(QStringLiteral("unverified")),
                 qPrintable(messages_[0]));
        messages_.clear();
        const size_t before = recorded();
        QSignalSpy done(w->replayJob(), &ReplayJob::finished);
        QVERIFY(v->requestAdvisorSet(good));
        QCOMPARE(asked.count(), 1);
        QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 120000);
        QCOMPARE(recorded(), before + 1);
        QVERIFY(v->remedy());
        QCOMPARE(v->remedy()->spec.keep_fp32, (std::vector<std::string>{"head", "fc1"}));
        QVERIFY2(v->changeLine().startsWith(QStringLiteral("head, fc1 kept in FP32: ")), qPrintable(v->changeLine()));
        QVERIFY2(messages_.isEmpty(), qPrintable(messages_.join(QLatin1Char('\n'))));
    }
};

QTEST_MAIN(TstReplay)
#include "tst_replay.moc"
