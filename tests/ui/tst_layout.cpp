// SPDX-License-Identifier: MIT
// Layout of the charts (offscreen): every chart of every view — the main window's tabs with
// the demo runs (a demo:transformer comparison, a second one with an FP32 region, a demo
// training run, the two comparisons compared) and the Advise dialog with the advisor's result —
// rendered at the window's default size and at 1280 × 800. Qt Charts elides what does not fit
// ("..."): the test walks each chart's scene (title, axis titles, tick labels, legend labels)
// and fails on any elided text, and on any plot area under 200 pixels in height. The
// sensitivity chart names every module in full. The replay view (an original and its remedy
// side by side, long module names) at the same sizes: its charts (the original's beside the
// remedy's) as every chart, every table column as wide as its header and cells, every remedy
// button as wide as its text, each table at least a few rows high.
#include <QChart>
#include <QChartView>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTabBar>
#include <QTabWidget>
#include <QTableView>
#include <QToolButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <limits>
#include <memory>

#include "advisedialog.h"
#include "advisemodel.h"
#include "ampscope/engine/advise.h"
#include "ampscope/engine/train.h"
#include "ampscope/storage/replay_record.h"
#include "ampscope/storage/store.h"
#include "charts.h"
#include "errorreporter.h"
#include "mainwindow.h"
#include "replayview.h"

using namespace ampscope;
using namespace ampscope::ui;

namespace {

constexpr double kMinPlotHeight = 200;

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

/// The texts a chart shows: every visible text item of its scene (title, axis titles, tick
/// labels, legend labels), as drawn (elided or not).
QStringList shownTexts(QChartView* v) {
    QStringList out;
    for (QGraphicsItem* it : v->scene()->items()) {
        if (!it->isVisible()) continue;
        if (auto* t = dynamic_cast<QGraphicsTextItem*>(it))
            out << t->toPlainText();
        else if (auto* s = dynamic_cast<QGraphicsSimpleTextItem*>(it))
            out << s->text();
    }
    return out;
}

/// What is wrong with the layout of the chart in `v`: elided texts, a plot area too low.
QStringList chartProblems(QChartView* v, const QString& where) {
    QStringList problems;
    QChart* c = v->chart();
    const QString name = where + QStringLiteral(" / '") + c->title() + QStringLiteral("'");
    if (c->plotArea().height() < kMinPlotHeight)
        problems << QStringLiteral("%1: plot area %2 px high (chart %3 × %4)")
                        .arg(name)
                        .arg(c->plotArea().height())
                        .arg(c->size().width())
                        .arg(c->size().height());
    for (const QString& t : shownTexts(v))
        if (t.contains(QChar(0x2026)) || t.contains(QStringLiteral("...")))
            problems << QStringLiteral("%1: elided text '%2' (chart %3 × %4)")
                            .arg(name, t)
                            .arg(c->size().width())
                            .arg(c->size().height());
    return problems;
}

/// The chart views on screen under `w` whose charts are built (a hidden or empty ChartWidget
/// has none yet).
QList<QChartView*> shownCharts(QWidget* w) {
    QList<QChartView*> out;
    for (auto* v : w->findChildren<QChartView*>())
        if (v->isVisible() && v->chart() && !v->chart()->series().isEmpty()) out << v;
    return out;
}

/// What is wrong with a table's layout: a column narrower than its header or its cells (Qt
/// elides them), a viewport too small to read a few rows.
QStringList tableProblems(QTableView* t, const QString& where) {
    QStringList problems;
    if (!t->isVisible()) return problems;
    auto* h = t->horizontalHeader();
    for (int c = 0; c < t->model()->columnCount(); ++c) {
        if (t->isColumnHidden(c)) continue;
        const int need = std::max(static_cast<QAbstractItemView*>(t)->sizeHintForColumn(c), h->sectionSizeHint(c));
        if (t->columnWidth(c) < need)
            problems << QStringLiteral("%1: column '%2' %3 px wide, its text needs %4")
                            .arg(where, t->model()->headerData(c, Qt::Horizontal).toString())
                            .arg(t->columnWidth(c))
                            .arg(need);
    }
    const int rows = std::min(t->model()->rowCount(), 3);
    if (rows > 0 && t->viewport()->height() < rows * t->rowHeight(0))
        problems << QStringLiteral("%1: %2 px high, %3 rows need %4")
                        .arg(where)
                        .arg(t->viewport()->height())
                        .arg(rows)
                        .arg(rows * t->rowHeight(0));
    if (t->viewport()->width() < 200)
        problems << QStringLiteral("%1: %2 px wide").arg(where).arg(t->viewport()->width());
    return problems;
}

/// A replay with the shape of a real one: long module paths, large and non-finite figures.
ReplayResult layoutReplay(Precision p, const std::string& original) {
    ReplayResult r;
    r.run_id = make_uuid();
    r.started_at = r.finished_at = "2026-01-01T00:00:00Z";
    r.spec.model = "/home/user/projects/incident/model.pt2";
    r.spec.checkpoint = "/home/user/projects/incident/checkpoint-41200";
    r.spec.batch = "/home/user/projects/incident/batch-41200.pt";
    r.spec.precision = p;
    r.spec.original_run_id = original;
    r.checkpoint_format = "hf-trainer";
    r.optimizer = "adamw";
    if (p == Precision::Fp16)
        r.first_nonfinite = ReplayStage{
            0,          ReplayStageKind::Backward, ReplaySide::Amp, "encoder.layers.11.self_attention.out_proj",
            "aten::mm", "AddmmBackward0"};
    ReplayStep st;
    st.loss_ref = 2.718281828;
    st.loss_amp = p == Precision::Fp16 ? std::numeric_limits<double>::infinity() : 2.71875;
    st.scale = 65536;
    st.found_inf = st.skipped = p == Precision::Fp16;
    st.scale_after = 32768;
    st.growth_tracker = 0;
    for (int i = 0; i < 12; ++i) {
        const std::string m = "encoder.layers." + std::to_string(i) + ".self_attention.out_proj";
        st.activations.push_back(
            {m, "aten::linear", 61234.5 + i, 65504, 1234.567, 1234.5, i == 11 && p == Precision::Fp16 ? 4096 : 0, 17});
        st.params.push_back(
            {m + ".weight", 1.234e-3, std::numeric_limits<double>::quiet_NaN(), p != Precision::Fp16, true, "", ""});
    }
    r.steps = {st};
    return r;
}

void recordReplay(storage::Store& store, const ReplayResult& r) {
    storage::record_replay(store, {r.run_id, r.spec.model, r.spec.checkpoint, "", r.spec.batch, "", "cpu",
                                   "fp32," + to_string(r.spec.precision), r.started_at, r.finished_at,
                                   r.first_nonfinite ? "nonfinite" : "finite", storage::replay_to_json(r)});
}

/// Lets the queued chart builds and the layouts run.
void settle() {
    for (int i = 0; i < 20; ++i) {
        QCoreApplication::processEvents();
        QTest::qWait(10);
    }
}

/// Every page of `page` (each page of nested tab widgets in turn): its charts' problems.
/// `expected` counts the charts seen.
QStringList pageProblems(QWidget* page, const QString& where, int* seen) {
    QStringList problems;
    const auto inner = page->findChildren<QTabWidget*>();
    auto check = [&](const QString& at) {
        settle();
        for (auto* v : shownCharts(page)) {
            problems << chartProblems(v, at);
            ++*seen;
        }
    };
    if (inner.isEmpty()) check(where);
    for (auto* t : inner)
        for (int i = 0; i < t->count(); ++i) {
            if (!t->isTabVisible(i)) continue;  // a tab the run has nothing for (FP8 headroom of a non-FP8 pass)
            t->setCurrentIndex(i);
            check(where + QStringLiteral(" / ") + t->tabText(i));
        }
    return problems;
}

}  // namespace

class TstLayout : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir_;
    QString db_;
    QString demo_, fp32Embed_, train_, remedy_, ranked_;
    QStringList messages_;

    std::unique_ptr<MainWindow> window(QSize size) {
        auto w = std::make_unique<MainWindow>(std::make_unique<Recorder>(&messages_));
        if (!w->openDatabase(db_)) return nullptr;
        if (size.isValid()) w->resize(size);
        w->show();
        if (!QTest::qWaitForWindowExposed(w.get())) return nullptr;
        return w;
    }

    /// The views of the tabs in `tabs` of the run shown: their charts' problems.
    QStringList tabProblems(MainWindow& w, std::initializer_list<int> tabs, int* seen) {
        QStringList problems;
        for (int t : tabs) {
            w.tabs()->setCurrentIndex(t);
            problems << pageProblems(w.tabs()->widget(t), w.tabs()->tabText(t), seen);
        }
        return problems;
    }

    static void sizes() {
        QTest::addColumn<QSize>("size");
        QTest::newRow("default size") << QSize();
        QTest::newRow("1280x800") << QSize(1280, 800);
    }

private Q_SLOTS:
    void initTestCase() {
        db_ = dir_.filePath(QStringLiteral("runs.sqlite"));
        storage::Store store(db_.toStdString());
        {
            storage::RunWriter w(store);
            RunSpec spec;  // the demo: demo:transformer, FP16 and BF16
            spec.device = "cpu";
            demo_ = QString::fromStdString(run_comparison(spec, &w).run_id);
        }
        {
            storage::RunWriter w(store);
            RunSpec spec;
            spec.device = "cpu";
            spec.keep_fp32 = {"embed"};
            fp32Embed_ = QString::fromStdString(run_comparison(spec, &w).run_id);
        }
        {
            // the demo run as 8 ranks under torchrun would have recorded it (issue 31)
            auto r = store.load_run(demo_.toStdString());
            r.run_id = make_uuid();
            const int n = int(r.samples.size());
            for (int k = 0; k < 8; ++k)
                r.ranks.push_back({k, "gpu-node-" + std::to_string(k / 4) + ".cluster.example.org",
                                   "cuda:" + std::to_string(k % 4), n * k / 8, n * (k + 1) / 8 - n * k / 8, 12.5 + k,
                                   4096});
            store.insert_run(r, "completed", "", {}, {});
            ranked_ = QString::fromStdString(r.run_id);
        }
        storage::TrainWriter tw(store);
        TrainSpec ts;  // the GUI demo's training run
        ts.device = "cpu";
        ts.steps = MainWindow::kDemoTrainingSteps;
        train_ = QString::fromStdString(run_training(ts, &tw).run_id);
        const auto original = layoutReplay(Precision::Fp16, "");
        const auto remedy = layoutReplay(Precision::Bf16, original.run_id);
        recordReplay(store, original);
        recordReplay(store, remedy);
        remedy_ = QString::fromStdString(remedy.run_id);
    }

    void init() { messages_.clear(); }

    void mainWindowChartsFit_data() { sizes(); }
    void mainWindowChartsFit() {
        QFETCH(QSize, size);
        auto w = window(size);
        QVERIFY(w);
        QStringList problems;
        int seen = 0;
        w->showRun(demo_);
        problems << tabProblems(*w, {MainWindow::kDeltasTab, MainWindow::kFlipsTab, MainWindow::kLayersTab}, &seen);
        QCOMPARE(seen, 4);  // per sample, histogram, flips, layers
        w->showRun(train_);
        problems << tabProblems(*w, {MainWindow::kTrainingTab}, &seen);
        QCOMPARE(seen, 8);  // loss, scale, updates, gradients
        w->compareRuns(demo_, fp32Embed_);
        problems << tabProblems(*w, {MainWindow::kCompareTab}, &seen);
        QCOMPARE(seen, 9);
        QVERIFY2(problems.isEmpty(), qPrintable(QStringLiteral("window %1 × %2:\n").arg(w->width()).arg(w->height()) +
                                                problems.join(QLatin1Char('\n'))));
        QVERIFY2(messages_.isEmpty(), qPrintable(messages_.join(QLatin1Char('\n'))));
    }

    /// A run under torchrun: the overview shows the time per rank, every rank's host (its short
    /// name) and device unelided; a single-process run's overview has no such chart.
    void rankChartFits_data() { sizes(); }
    void rankChartFits() {
        QFETCH(QSize, size);
        auto w = window(size);
        QVERIFY(w);
        w->showRun(demo_);
        w->tabs()->setCurrentIndex(MainWindow::kOverviewTab);
        settle();
        int seen = 0;
        QStringList problems =
            pageProblems(w->tabs()->widget(MainWindow::kOverviewTab), QStringLiteral("Overview"), &seen);
        QCOMPARE(seen, 0);  // no ranks, no chart
        w->showRun(ranked_);
        w->tabs()->setCurrentIndex(MainWindow::kOverviewTab);
        problems << pageProblems(w->tabs()->widget(MainWindow::kOverviewTab), QStringLiteral("Overview"), &seen);
        QCOMPARE(seen, 1);
        auto* view = shownCharts(w->tabs()->widget(MainWindow::kOverviewTab)).value(0);
        QVERIFY(view);
        const auto texts = shownTexts(view);
        QVERIFY2(texts.contains(QStringLiteral("rank 7 · gpu-node-1 · cuda:3")),
                 qPrintable(texts.join(QLatin1Char('|'))));
        QVERIFY2(problems.isEmpty(), qPrintable(QStringLiteral("window %1 × %2:\n").arg(w->width()).arg(w->height()) +
                                                problems.join(QLatin1Char('\n'))));
        QVERIFY2(messages_.isEmpty(), qPrintable(messages_.join(QLatin1Char('\n'))));
    }

    /// Every tab of the window (and of the replay view's tables) is on screen at 1280 × 800 and
    /// at the default size: no tab beyond the bar's edge, no scroll arrows.
    void everyTabReachableWithoutScrolling_data() { sizes(); }
    void everyTabReachableWithoutScrolling() {
        QFETCH(QSize, size);
        auto w = window(size);
        QVERIFY(w);
        w->showRun(remedy_);
        settle();
        for (QTabBar* bar : {w->tabs()->tabBar(), w->replayView()->tableTabs()->tabBar()}) {
            for (int t = 0; t < bar->count(); ++t)
                QVERIFY2(bar->rect().contains(bar->tabRect(t)),
                         qPrintable(QStringLiteral("window %1 × %2: tab '%3' at x %4..%5 of a bar %6 px wide")
                                        .arg(w->width())
                                        .arg(w->height())
                                        .arg(bar->tabText(t))
                                        .arg(bar->tabRect(t).left())
                                        .arg(bar->tabRect(t).right())
                                        .arg(bar->width())));
            for (auto* arrow : bar->findChildren<QToolButton*>()) QVERIFY2(!arrow->isVisible(), "scroll arrows shown");
        }
    }

    void replayViewFits_data() { sizes(); }
    void replayViewFits() {
        QFETCH(QSize, size);
        auto w = window(size);
        QVERIFY(w);
        w->showRun(remedy_);
        QCOMPARE(w->tabs()->currentIndex(), int(MainWindow::kReplayTab));
        ReplayView* v = w->replayView();
        QVERIFY(v->original() && v->remedy());
        QStringList problems;
        const QString at = QStringLiteral("window %1 × %2").arg(w->width()).arg(w->height());
        for (int t = 0; t < v->tableTabs()->count(); ++t) {
            v->tableTabs()->setCurrentIndex(t);
            settle();
            auto charts = [v] {
                return shownCharts(v->tableTabs()->currentWidget());
            };  // the original's beside the remedy's
            QTRY_COMPARE(charts().size(), t == ReplayView::kStepsTable ? 4 : 2);
            for (auto* c : charts())
                problems << chartProblems(c, at + QStringLiteral(", ") + v->tableTabs()->tabText(t));
            for (auto side : {ReplayView::Original, ReplayView::Remedied})
                problems << tableProblems(
                    v->table(side, ReplayView::Tables(t)),
                    QStringLiteral("%1, %2 table of the %3")
                        .arg(at, v->tableTabs()->tabText(t),
                             side == ReplayView::Original ? QStringLiteral("original") : QStringLiteral("remedy")));
        }
        for (const char* name : {"replayOriginal", "replayRemedy", "replayChange"}) {  // the verdicts in words, in full
            auto* l = v->findChild<QLabel*>(QString::fromUtf8(name));
            if (l && l->height() < l->heightForWidth(l->width()))
                problems << QStringLiteral("%1: %2 %3 px high, its text needs %4")
                                .arg(at, QString::fromUtf8(name))
                                .arg(l->height())
                                .arg(l->heightForWidth(l->width()));
        }
        for (int b = 0; b < int(ReplayView::Remedy::Count); ++b) {
            auto* button = v->remedyButton(ReplayView::Remedy(b));
            if (button->width() < button->sizeHint().width())
                problems << QStringLiteral("%1: button '%2' %3 px wide, needs %4")
                                .arg(at, button->text())
                                .arg(button->width())
                                .arg(button->sizeHint().width());
        }
        QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1Char('\n'))));
        QVERIFY2(messages_.isEmpty(), qPrintable(messages_.join(QLatin1Char('\n'))));
    }

    void adviseChartFits_data() { sizes(); }
    void adviseChartFits() {
        QFETCH(QSize, size);
        auto w = window(QSize());
        QVERIFY(w);
        w->showRun(demo_);
        AdviseDialog* d = w->openAdvisor();
        QVERIFY(d);
        if (size.isValid()) d->resize(size);
        QVERIFY(QTest::qWaitForWindowExposed(d));
        QSignalSpy ended(d, &AdviseDialog::ended);
        QVERIFY(d->start());
        QTRY_COMPARE_WITH_TIMEOUT(ended.count(), 1, 240000);
        QCOMPARE(ended[0][0].toString(), QStringLiteral("finished"));
        d->findChild<QTabWidget*>()->setCurrentIndex(AdviseDialog::kChartTab);
        settle();
        QTRY_VERIFY(d->chart()->chart() && !d->chart()->chart()->series().isEmpty());
        settle();
        QChartView* v = d->chart()->view();
        const QString where = QStringLiteral("advise %1 × %2").arg(d->width()).arg(d->height());
        QStringList problems = chartProblems(v, where);
        // every module named in full, on screen
        const QStringList shown = shownTexts(v);
        for (const auto& s : d->result()->sensitivity) {
            const QString module = QString::fromStdString(s.module);
            bool named = false;
            for (const auto& t : shown) named = named || t == module || t.startsWith(module + QLatin1Char(' '));
            if (!named)
                problems << QStringLiteral("%1: module '%2' not named (texts: %3)")
                                .arg(where, module, shown.join(QStringLiteral(" | ")));
        }
        QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1Char('\n'))));
        QVERIFY2(messages_.isEmpty(), qPrintable(messages_.join(QLatin1Char('\n'))));
    }

    void manyModulesScroll() {
        // 60 long module names at the dialog's default size: one row each, the chart scrolls
        auto w = window(QSize());
        QVERIFY(w);
        w->showRun(demo_);
        AdviseDialog* d = w->openAdvisor();
        QVERIFY(d);
        QVERIFY(QTest::qWaitForWindowExposed(d));
        std::vector<ModuleSensitivity> rows;
        QStringList names;
        for (int i = 0; i < 60; ++i) {
            ModuleSensitivity s;
            s.module = "encoder.layers." + std::to_string(i / 4) + ".self_attention.out_proj_" + std::to_string(i % 4);
            s.order = i;
            s.sqnr_db = 10 + i % 30;
            s.origin = i == 7;
            names << QString::fromStdString(s.module);
            rows.push_back(s);
        }
        d->sensitivityModel()->resetData(rows);
        d->findChild<QTabWidget*>()->setCurrentIndex(AdviseDialog::kChartTab);
        QTRY_VERIFY(d->chart()->chart() && !d->chart()->chart()->series().isEmpty());
        settle();
        QChartView* v = d->chart()->view();
        QStringList problems = chartProblems(v, QStringLiteral("advise, 60 modules"));
        const QStringList shown = shownTexts(v);
        for (const auto& n : names)
            if (!shown.contains(n) && std::none_of(shown.begin(), shown.end(), [&](const QString& t) {
                    return t.startsWith(n + QLatin1Char(' '));
                }))
                problems << QStringLiteral("module '%1' not named").arg(n);
        QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1Char('\n'))));
        QVERIFY2(v->chart()->plotArea().height() >= 60 * 18,
                 qPrintable(QStringLiteral("%1 px for 60 rows").arg(v->chart()->plotArea().height())));  // a row each
        QScrollArea* scroll = nullptr;
        for (QWidget* p = d->chart(); p && !scroll; p = p->parentWidget()) scroll = qobject_cast<QScrollArea*>(p);
        QVERIFY2(scroll, "the sensitivity chart is not in a scroll area");
        QVERIFY(scroll->verticalScrollBar()->maximum() > 0);  // taller than the dialog: it scrolls
    }
};

QTEST_MAIN(TstLayout)
#include "tst_layout.moc"
