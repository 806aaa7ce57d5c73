// SPDX-License-Identifier: MIT
// A sequence run (language model, compared per position) in the GUI, from hand-made runs whose
// every value is known (no engine run): the Tokens view's model, chart and pickers, the flips
// table's positions and token ids, the overview's per-token figures and criteria, the New-run
// dialog's sequence fields, and a run recorded in a database shown by the main window.
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QLogValueAxis>
#include <QSpinBox>
#include <QTableView>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QValueAxis>
#include <QtTest>

#include <cmath>
#include <limits>
#include <memory>

#include "ampscope/engine/run.h"
#include "ampscope/storage/store.h"
#include "chart_probe.h"
#include "charts.h"
#include "mainwindow.h"
#include "flipmodel.h"
#include "newrundialog.h"
#include "report.h"
#include "tokenmodel.h"
#include "tokenview.h"

using namespace ampscope;
using namespace ampscope::ui;
using chart_probe::series;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kLength = 6;

/// Three samples of 6 positions, vocabulary 50. FP16: s1 flips at positions 2 (17 → 23) and 3
/// (5 → 9), s0 at 1 (4 → 8); s1's positions 4 and 5 are masked (NaN KL). BF16: one flip, s2 at 0.
RunResult sequenceRun(bool labels = true) {
    RunResult r;
    r.run_id = "0123456789abcdef0123456789abcdef";
    r.started_at = "2026-12-01T10:00:00Z";
    r.finished_at = "2026-12-01T10:00:05Z";
    r.model.source = "gpt2.pt2";
    r.model.kind = "export";
    r.spec.precisions = {Precision::Fp16, Precision::Bf16};
    for (Precision p : {Precision::Fp32, Precision::Fp16, Precision::Bf16}) {
        PassResult pass;
        pass.precision = p;
        pass.num_outputs = kLength * 50;
        pass.output_shape = {kLength, 50};
        pass.outputs.assign(size_t(3 * pass.num_outputs), 0.f);
        r.passes.push_back(pass);
    }
    r.criteria.max_flip_rate = 0.01;
    r.criteria.max_mean_kld = 2e-3;
    r.criteria.min_same_top = 0.95;
    r.criteria.mask_input = "attention_mask";
    for (int i = 0; i < 3; ++i) r.samples.push_back({"s" + std::to_string(i), "ordinary"});
    auto comparison = [&](Precision p, std::vector<float> kld) {
        Comparison c;
        c.precision = p;
        TokenStats t;
        t.length = kLength;
        t.vocab = 50;
        t.positions = 16;
        t.masked = 2;
        t.mean_kld = 1.25e-3;
        t.p99_kld = 4.5e-2;
        t.max_kld = 5e-2;
        t.same_top = 0.8125;
        t.top5_overlap = 0.9375;
        t.rms_dp = 0.0123;
        if (labels)
            t.label_tokens = 15, t.ref_ce = 2.0, t.amp_ce = 2.1, t.ref_ppl = std::exp(2.0), t.amp_ppl = std::exp(2.1);
        t.kld = std::move(kld);
        t.boundary = {{"s1", 2, 0.01}, {"s0", 5, 0.02}};
        c.tokens = t;
        return c;
    };
    // clang-format off
    Comparison fp16 = comparison(Precision::Fp16, {1e-4f, 2e-3f, 3e-4f, 0.f,   1e-5f, 2e-4f,
                                                    1e-3f, 3e-4f, 5e-2f, 2e-2f, kNaN,  kNaN,
                                                    1e-4f, 1e-4f, 1e-4f, 1e-4f, 1e-4f, 1e-4f});
    // clang-format on
    fp16.flips = {{"s1", "ordinary", 17, 23, 0.01, 0.2, 2},
                  {"s1", "ordinary", 5, 9, 0.3, 0.1, 3},
                  {"s0", "ordinary", 4, 8, 0.05, 0.1, 1}};
    Comparison bf16 = comparison(Precision::Bf16, std::vector<float>(size_t(3 * kLength), 1e-3f));
    bf16.flips = {{"s2", "ordinary", 7, 3, 0.02, 0.1, 0}};
    r.comparisons = {fp16, bf16};
    return r;
}

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

/// `run` recorded in a new database at `path` as the run writer records one while it runs.
void record(const QString& path, RunResult run) {
    storage::Store store(path.toStdString());
    storage::RunWriter w(store);
    RunResult header = run;
    header.passes.clear();
    header.comparisons.clear();
    w.run_started(header);
    for (const auto& p : run.passes) w.pass_finished(p);
    for (const auto& c : run.comparisons) w.comparison_finished(c);
    w.run_finished(run);
}

QString cell(const QAbstractItemModel& m, int row, int column) {
    return m.index(row, column).data().toString();
}

}  // namespace

class TestTokens : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void modelShowsOneSamplesPositions() {
        TokenModel m;
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.resetData(sequenceRun());
        QCOMPARE(m.comparison(), 0);
        QCOMPARE(m.sample(), 1);  // the sample with most flips first
        QCOMPARE(m.rowCount(), kLength);
        QCOMPARE(cell(m, 2, TokenModel::Position), QStringLiteral("2"));
        QCOMPARE(cell(m, 2, TokenModel::Kld), QStringLiteral("0.05"));
        QCOMPARE(cell(m, 2, TokenModel::State), QStringLiteral("flip"));
        QCOMPARE(cell(m, 2, TokenModel::RefToken), QStringLiteral("17"));
        QCOMPARE(cell(m, 2, TokenModel::AmpToken), QStringLiteral("23"));
        QCOMPARE(cell(m, 2, TokenModel::RefMargin), QStringLiteral("0.01"));
        QCOMPARE(cell(m, 3, TokenModel::RefToken), QStringLiteral("5"));
        QCOMPARE(cell(m, 3, TokenModel::AmpToken), QStringLiteral("9"));
        QCOMPARE(cell(m, 0, TokenModel::State), QString());
        for (int r : {4, 5}) {  // masked: excluded, no KL shown
            QVERIFY(m.excluded(r));
            QCOMPARE(cell(m, r, TokenModel::State), QStringLiteral("excluded"));
            QCOMPARE(cell(m, r, TokenModel::Kld), QStringLiteral("-"));
        }
        QVERIFY(m.index(2, TokenModel::Kld)
                    .data(TokenModel::SummaryRole)
                    .toString()
                    .contains(QStringLiteral("17 → AMP token 23")));
        m.select(0, 0);
        QCOMPARE(cell(m, 1, TokenModel::State), QStringLiteral("flip"));
        QCOMPARE(cell(m, 1, TokenModel::RefToken), QStringLiteral("4"));
        QCOMPARE(cell(m, 5, TokenModel::State), QStringLiteral("boundary"));
        QCOMPARE(cell(m, 5, TokenModel::RefMargin), QStringLiteral("0.02"));
        QCOMPARE(cell(m, 3, TokenModel::Kld), QStringLiteral("0"));
        m.select(1, 2);  // BF16
        QCOMPARE(cell(m, 0, TokenModel::RefToken), QStringLiteral("7"));
        QCOMPARE(cell(m, 1, TokenModel::RefToken), QString());
        m.resetData(sequenceRun());  // the same run again: the choice stays
        QCOMPARE(m.comparison(), 1);
        QCOMPARE(m.sample(), 2);
        RunResult plain = sequenceRun();  // a classifier run: no positions
        for (auto& c : plain.comparisons) c.tokens.reset();
        m.resetData(plain);
        QCOMPARE(m.rowCount(), 0);
    }

    void chartMarksFlipsAndExcludedPositions() {
        TokenView view;
        view.resize(1280, 800 - 60);  // the tab's share of a 1280 × 800 window
        view.setRun(sequenceRun());
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        QTRY_VERIFY(view.chart()->chart() && !view.chart()->showsEmptyState());
        QChart* chart = view.chart()->chart();
        QTRY_COMPARE(series(chart, QStringLiteral("compared positions"))->count(), 4);
        const auto line = series(chart, QStringLiteral("compared positions"))->points();
        QCOMPARE(line[2], QPointF(2, double(5e-2f)));
        QCOMPARE(line[3], QPointF(3, double(2e-2f)));
        const auto flips = series(chart, QStringLiteral("flip (top-1 token changed)"))->points();
        QCOMPARE(flips.size(), 2);
        QCOMPARE(flips[0].x(), 2.0);
        QCOMPARE(flips[1].x(), 3.0);
        const auto excluded = series(chart, QStringLiteral("excluded (masked; at the bottom)"))->points();
        QCOMPARE(excluded.size(), 2);
        QCOMPARE(excluded[0].x(), 4.0);
        QCOMPARE(excluded[1].x(), 5.0);
        auto* y = qobject_cast<QLogValueAxis*>(chart->axes(Qt::Vertical).value(0));
        QVERIFY(y);
        for (const auto& p : excluded)
            QVERIFY(p.y() < 1e-4 && p.y() >= y->min());  // below every compared position, on the chart
        QVERIFY(y->max() >= 5e-2);
        // readable at 1280 × 800: plot area at least 200 px high, titles not elided
        QVERIFY2(chart->plotArea().height() >= 200, qPrintable(QString::number(chart->plotArea().height())));
        const QFontMetricsF fm(chart->titleFont());
        QVERIFY(fm.horizontalAdvance(chart->title()) < chart->size().width() - 40);
        QVERIFY(view.summaryText().contains(QStringLiteral("4 positions compared, 2 excluded")));
        QVERIFY(view.summaryText().contains(QStringLiteral("2 flips")));
        // the rendered markers: a flip's red square where its point maps to
        QString why;
        QVERIFY2(chart_probe::drawnAtItsPoints(chart_probe::render(view.chart()->view()), view.chart()->view(),
                                               series(chart, QStringLiteral("flip (top-1 token changed)")), &why),
                 qPrintable(why));
    }

    void pickersChooseSampleAndPrecision() {
        TokenView view;
        view.setRun(sequenceRun());
        QCOMPARE(view.precisionBox()->count(), 2);
        QCOMPARE(view.sampleBox()->count(), 3);
        QCOMPARE(view.sampleBox()->currentText(), QStringLiteral("s1 (2 flips)"));
        QCOMPARE(view.sampleBox()->itemText(0), QStringLiteral("s0 (1 flip)"));
        view.sampleBox()->setCurrentIndex(0);
        QCOMPARE(view.model()->sample(), 0);
        QCOMPARE(cell(*view.model(), 1, TokenModel::State), QStringLiteral("flip"));
        view.precisionBox()->setCurrentIndex(1);
        QCOMPARE(view.model()->comparison(), 1);
        QCOMPARE(view.sampleBox()->itemText(2), QStringLiteral("s2 (1 flip)"));
        QCOMPARE(view.sampleBox()->itemText(1), QStringLiteral("s1"));
    }

    void flipTableShowsPositionsAndTokens() {
        FlipModel flips;
        QAbstractItemModelTester tester(&flips, QAbstractItemModelTester::FailureReportingMode::QtTest);
        flips.resetData(sequenceRun());
        QVERIFY(flips.sequence());
        QCOMPARE(flips.rowCount(), 4);
        QCOMPARE(flips.headerData(FlipModel::Position, Qt::Horizontal).toString(), QStringLiteral("Position"));
        QCOMPARE(flips.headerData(FlipModel::Ref, Qt::Horizontal).toString(), QStringLiteral("Reference token"));
        QCOMPARE(flips.headerData(FlipModel::Amp, Qt::Horizontal).toString(), QStringLiteral("AMP token"));
        QCOMPARE(flips.headerData(FlipModel::RefMargin, Qt::Horizontal).toString(),
                 QStringLiteral("Reference top-2 margin"));
        QCOMPARE(cell(flips, 0, FlipModel::Sample), QStringLiteral("s1"));
        QCOMPARE(cell(flips, 0, FlipModel::Position), QStringLiteral("2"));
        QCOMPARE(cell(flips, 0, FlipModel::Ref), QStringLiteral("17"));
        QCOMPARE(cell(flips, 0, FlipModel::Amp), QStringLiteral("23"));
        QCOMPARE(cell(flips, 0, FlipModel::RefMargin), QStringLiteral("0.01"));
        QCOMPARE(cell(flips, 3, FlipModel::Position), QStringLiteral("0"));
        RunResult plain = sequenceRun();
        for (auto& c : plain.comparisons) {
            c.tokens.reset();
            for (auto& f : c.flips) f.position = -1;
        }
        flips.resetData(plain);
        QVERIFY(!flips.sequence());
        QCOMPARE(flips.headerData(FlipModel::Ref, Qt::Horizontal).toString(), QStringLiteral("Reference class"));
        QCOMPARE(cell(flips, 0, FlipModel::Position), QString());
    }

    void overviewShowsTokenFiguresAndCriteria() {
        const QString h = overviewHtml(sequenceRun(), QStringLiteral("completed"), {}, {});
        for (const char* want :
             {"per position: flip rate ≤ 0.01, mean KL(ref ‖ amp) ≤ 0.002, same top-1 ≥ 0.95; mask input "
              "attention_mask",
              "16 positions compared, 2 excluded by the mask",
              "KL(ref ‖ amp) mean / p99 / max</td><td>0.00125 / 0.045 / 0.05", "same top-1</td><td>81.25 %",
              "top-5 overlap</td><td>93.75 %", "RMS Δp (reference's top token)</td><td>1.23 %",
              "flips</td><td>3 (18.75 %)", "perplexity reference / AMP</td><td>7.389 / 8.166 (15 labels",
              "s1@2 (0.01) s0@5 (0.02)"})
            QVERIFY2(h.contains(QString::fromUtf8(want)), want);
        QVERIFY(!overviewHtml(sequenceRun(false), QStringLiteral("completed"), {}, {})
                     .contains(QStringLiteral("perplexity reference")));
        RunResult plain = sequenceRun();
        for (auto& c : plain.comparisons) c.tokens.reset();
        const QString p = overviewHtml(plain, QStringLiteral("completed"), {}, {});
        QVERIFY(!p.contains(QStringLiteral("per position")) && !p.contains(QStringLiteral("Per token")));
    }

    void newRunDialogCarriesSequenceCriteria() {
        NewRunDialog d;
        auto* rate = d.findChild<QDoubleSpinBox*>(QStringLiteral("maxFlipRate"));
        auto* kld = d.findChild<QDoubleSpinBox*>(QStringLiteral("maxMeanKld"));
        auto* top = d.findChild<QDoubleSpinBox*>(QStringLiteral("minSameTop"));
        auto* mask = d.findChild<QLineEdit*>(QStringLiteral("maskInput"));
        auto* axis = d.findChild<QSpinBox*>(QStringLiteral("sequenceAxis"));
        QVERIFY(rate && kld && top && mask && axis);
        const Criteria defaults;
        QCOMPARE(d.spec().criteria.max_mean_kld, defaults.max_mean_kld);
        QCOMPARE(d.spec().criteria.sequence_axis, -1);
        rate->setValue(0.02);
        kld->setValue(5e-3);
        top->setValue(0.9);
        mask->setText(QStringLiteral("mask"));
        axis->setValue(2);
        const RunSpec s = d.spec();
        QCOMPARE(s.criteria.max_flip_rate, 0.02);
        QCOMPARE(s.criteria.max_mean_kld, 5e-3);
        QCOMPARE(s.criteria.min_same_top, 0.9);
        QCOMPARE(s.criteria.mask_input, std::string("mask"));
        QCOMPARE(s.criteria.sequence_axis, 2);
        NewRunDialog again;
        again.setSpec(s);
        QCOMPARE(again.spec().criteria.max_flip_rate, 0.02);
        QCOMPARE(again.spec().criteria.mask_input, std::string("mask"));
        QCOMPARE(again.spec().criteria.sequence_axis, 2);
        again.lockCriteria();
        QVERIFY(!again.findChild<QDoubleSpinBox*>(QStringLiteral("maxFlipRate"))->isEnabled());
    }

    /// The incident itself: the AMP pass's cross-entropy NaN, the reference's perplexity beyond a
    /// double. Recorded and read back, the overview says nan and inf (NULL was read as 0: 1.0).
    void nonFinitePerplexityShownAsSuch() {
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("nan.sqlite"));
        RunResult run = sequenceRun();
        for (auto& c : run.comparisons) {
            c.tokens->ref_ce = 2e5;
            c.tokens->amp_ce = std::numeric_limits<double>::quiet_NaN();
            c.tokens->ref_ppl = std::exp(c.tokens->ref_ce);
            c.tokens->amp_ppl = std::exp(c.tokens->amp_ce);
        }
        record(db, run);
        const RunResult back = storage::Store(db.toStdString(), storage::Store::Mode::ReadOnly).load_run(run.run_id);
        const QString h = overviewHtml(back, QStringLiteral("completed"), {}, {});
        QVERIFY2(h.contains(QStringLiteral(
                     "perplexity reference / AMP</td><td>inf / nan (15 labels; cross-entropy 2e+05 / nan")),
                 qPrintable(h.mid(h.indexOf(QStringLiteral("perplexity reference")), 120)));
    }

    void recordedRunShownFromDatabase() {
        QTemporaryDir dir;
        const QString db = dir.filePath(QStringLiteral("lm.sqlite"));
        record(db, sequenceRun());
        QStringList messages;
        MainWindow w(std::make_unique<Recorder>(&messages));
        QVERIFY(w.openDatabase(db));
        w.resize(1280, 800);
        w.show();
        w.showRun(QStringLiteral("0123456789abcdef0123456789abcdef"));
        QVERIFY2(messages.isEmpty() && w.notice().isEmpty(), qPrintable(messages.join(QLatin1Char('\n')) + w.notice()));
        QWidget* tab = w.tabs()->widget(MainWindow::kOverviewTab);
        auto* overview =
            qobject_cast<QTextBrowser*>(tab) ? qobject_cast<QTextBrowser*>(tab) : tab->findChild<QTextBrowser*>();
        const QString html = overview ? overview->toHtml() : QString();
        QVERIFY2(html.contains(QStringLiteral("0.00125 / 0.045 / 0.05")), qPrintable(html.left(400)));
        QVERIFY(html.contains(QStringLiteral("s1@2 (0.01)")));
        // the flips table: positions shown and read back
        auto* flipsView = w.tabs()->widget(MainWindow::kFlipsTab)->findChild<QTableView*>();
        QVERIFY(flipsView && !flipsView->isColumnHidden(FlipModel::Position));
        QCOMPARE(cell(*w.flipModel(), 0, FlipModel::Position), QStringLiteral("2"));
        QCOMPARE(cell(*w.flipModel(), 0, FlipModel::Ref), QStringLiteral("17"));
        // the Tokens tab: the recorded per-position KL, the masked positions excluded
        w.tabs()->setCurrentIndex(MainWindow::kTokensTab);
        TokenModel* m = w.tokenView()->model();
        QCOMPARE(m->rowCount(), kLength);
        QCOMPARE(m->sample(), 1);
        QCOMPARE(cell(*m, 2, TokenModel::Kld), QStringLiteral("0.05"));
        QCOMPARE(cell(*m, 2, TokenModel::AmpToken), QStringLiteral("23"));
        QVERIFY(m->excluded(4) && m->excluded(5) && !m->excluded(3));
        for (int r = 0; r < kLength; ++r)  // positions in order until the user sorts
            QCOMPARE(w.tokenView()->table()->model()->index(r, TokenModel::Position).data().toString(),
                     QString::number(r));
        QTRY_VERIFY(w.currentChart() == w.tokenView()->chart() && w.currentChart()->chart());
        QTRY_VERIFY(series(w.currentChart()->chart(), QStringLiteral("excluded (masked; at the bottom)")));
        QTRY_COMPARE(series(w.currentChart()->chart(), QStringLiteral("excluded (masked; at the bottom)"))->count(), 2);
        QVERIFY2(w.currentChart()->chart()->plotArea().height() >= 200,
                 qPrintable(QString::number(w.currentChart()->chart()->plotArea().height())));
        // a classifier run afterwards: no Tokens rows, no position column
        RunResult plain = sequenceRun();
        plain.run_id = "fedcba9876543210fedcba9876543210";
        for (auto& c : plain.comparisons) {
            c.tokens.reset();
            for (auto& f : c.flips) f.position = -1;
        }
        record(dir.filePath(QStringLiteral("plain.sqlite")), plain);
        QVERIFY(w.openDatabase(dir.filePath(QStringLiteral("plain.sqlite"))));
        w.showRun(QStringLiteral("fedcba9876543210fedcba9876543210"));
        QCOMPARE(m->rowCount(), 0);
        QVERIFY(flipsView->isColumnHidden(FlipModel::Position));
    }
};

QTEST_MAIN(TestTokens)
#include "tst_tokens.moc"
