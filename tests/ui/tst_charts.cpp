// SPDX-License-Identifier: MIT
// What the flip, loss and scale charts show, from hand-made runs whose every value is known:
// point counts, the values of chosen points, axis ranges, and (rendered) each series' colour at
// the pixel its point maps to. The charts are driven by the item models: a model reset moves
// them. (The score-delta and layer charts: tst_ui.)
#include <QLogValueAxis>
#include <QValueAxis>
#include <QtTest>

#include <cmath>
#include <limits>
#include <memory>
#include <map>
#include <random>
#include <set>

#include "ampscope/engine/run.h"
#include "chart_probe.h"
#include "chartparts.h"
#include "charts.h"
#include "samplemodel.h"
#include "trainingstepmodel.h"

using namespace ampscope;
using namespace ampscope::ui;
using chart_probe::series;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Five samples; reference scores give margins 0.5, 0.01, 2, 0.1, 0.05; FP16 |Δ| 1e-3, 2e-2,
/// 1e-4, 5e-3, 3e-2; the decisions of s1 and s4 flip.
RunResult flipRun(int samples = 5) {
    RunResult r;
    r.criteria.atol = 1e-3;
    const float scores[5][2] = {{1.0f, 0.5f}, {0.3f, 0.29f}, {2.0f, 0.0f}, {0.6f, 0.5f}, {0.05f, 0.0f}};
    const double abs[5] = {1e-3, 2e-2, 1e-4, 5e-3, 3e-2};
    PassResult ref;
    ref.num_outputs = 2;
    Comparison c;
    c.precision = Precision::Fp16;
    for (int i = 0; i < samples; ++i) {
        r.samples.push_back({"s" + std::to_string(i), "ordinary"});
        ref.outputs.push_back(scores[i][0]);
        ref.outputs.push_back(scores[i][1]);
        SampleDelta d;
        d.sample = r.samples.back().id;
        d.tag = "ordinary";
        d.abs = abs[i];
        c.deltas.push_back(d);
        c.ref_decisions.push_back(0);
        c.amp_decisions.push_back(i == 1 || i == 4 ? 1 : 0);
    }
    r.passes.push_back(ref);
    r.comparisons.push_back(c);
    return r;
}

std::vector<TrainStep> steps() {
    const double ref[8] = {2.0, 1.8, 1.6, 1.4, 1.2, 1.0, 0.9, 0.8};
    const double amp[8] = {2.01, kNaN, 1.61, std::numeric_limits<double>::infinity(), 1.21, 1.01, 0.91, 0.81};
    const double scale[8] = {65536, 65536, 65536, 32768, 32768, 32768, 16384, 16384};
    std::vector<TrainStep> v;
    for (int i = 0; i < 8; ++i) {
        TrainStep s;
        s.step = i;
        s.loss_ref = ref[i];
        s.loss_amp = amp[i];
        s.scale = scale[i];
        s.skipped = s.found_inf = i == 2 || i == 5;
        v.push_back(s);
    }
    return v;
}

QList<QPointF> pointsOf(QChart* chart, const QString& name) {
    auto* s = series(chart, name);
    return s ? s->points() : QList<QPointF>{};
}

/// Equal within float precision (margins come from float scores).
bool close(double a, double b) {
    return std::abs(a - b) <= 1e-5 * std::max(std::abs(a), std::abs(b));
}

template <class Axis>
std::pair<double, double> range(QChart* chart, Qt::Orientation o) {
    auto* a = qobject_cast<Axis*>(chart->axes(o).value(0));
    return a ? std::make_pair(double(a->min()), double(a->max())) : std::make_pair(kNaN, kNaN);
}

/// A view that shows `chart` at a fixed size, rendered.
std::unique_ptr<QChartView> showIn(QChart* chart) {
    auto v = std::make_unique<QChartView>(chart);
    v->resize(700, 450);
    v->show();
    QCoreApplication::processEvents();
    return v;
}

/// `n` steps of a long run: noisy losses with one spike, a loss scale that halves on each
/// skipped step (every 37th from step 11) and grows back, NaN AMP losses on the skipped steps.
std::vector<TrainStep> longRun(int n) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> noise(-0.05, 0.05);
    std::vector<TrainStep> v;
    double scale = 65536;
    for (int i = 0; i < n; ++i) {
        TrainStep s;
        s.step = i;
        s.skipped = s.found_inf = i % 37 == 11;
        s.loss_ref = 2.0 / (1 + 0.001 * i) + noise(rng);
        s.loss_amp = s.skipped ? kNaN : i == n / 3 ? 40.0 : s.loss_ref + noise(rng);
        scale = s.skipped ? scale / 2 : std::min(65536.0, scale * 1.02);
        s.scale = scale;
        s.effective_updates = i + 1;
        v.push_back(s);
    }
    return v;
}

/// The pixel column of `x` when [x0, x1] is split in `columns` equal parts (thinToColumns').
int columnOf(double x, double x0, double x1, int columns) {
    return x1 > x0 ? std::min(columns - 1, int((x - x0) / (x1 - x0) * columns)) : 0;
}

/// Empty when `kept` (indices into `pts`) holds, per pixel column, a point at that column's
/// minimum and one at its maximum, and every index `marked`; else what is missing.
QString missingExtremes(const QList<QPointF>& pts, const std::vector<qsizetype>& kept, int columns,
                        const std::vector<bool>& marked) {
    const std::set<qsizetype> in(kept.begin(), kept.end());
    std::map<int, std::pair<double, double>> want, got;  // column: {min y, max y}
    const double x0 = pts.front().x(), x1 = pts.back().x();
    auto widen = [](std::map<int, std::pair<double, double>>& m, int c, double y) {
        auto [it, fresh] = m.try_emplace(c, y, y);
        if (!fresh) it->second = {std::min(it->second.first, y), std::max(it->second.second, y)};
    };
    for (qsizetype i = 0; i < pts.size(); ++i) {
        widen(want, columnOf(pts[i].x(), x0, x1, columns), pts[i].y());
        if (in.count(i)) widen(got, columnOf(pts[i].x(), x0, x1, columns), pts[i].y());
        if (size_t(i) < marked.size() && marked[size_t(i)] && !in.count(i))
            return QStringLiteral("marked point %1 dropped").arg(i);
    }
    for (const auto& [c, mm] : want)
        if (!got.count(c) || got[c] != mm)
            return QStringLiteral("column %1: min/max %2/%3, kept %4/%5")
                .arg(c)
                .arg(mm.first)
                .arg(mm.second)
                .arg(got.count(c) ? got[c].first : kNaN)
                .arg(got.count(c) ? got[c].second : kNaN);
    return {};
}

}  // namespace

class TstCharts : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void flipChartPlacesFlipsAtTheirMargin() {
        SampleModel model;
        model.resetData(flipRun());
        auto* chart = makeFlipChart(&model);
        const auto flipped = pointsOf(chart, QStringLiteral("fp16 flipped"));
        const auto same = pointsOf(chart, QStringLiteral("fp16 same decision"));
        QCOMPARE(flipped.size(), 2);
        QCOMPARE(same.size(), 3);
        // x = the reference margin (top-1 − top-2), y = |Δ|, in row order
        QVERIFY2(close(flipped[0].x(), 0.01) && close(flipped[0].y(), 2e-2),
                 qPrintable(QStringLiteral("%1 %2").arg(flipped[0].x()).arg(flipped[0].y())));
        QVERIFY(close(flipped[1].x(), 0.05) && close(flipped[1].y(), 3e-2));
        QVERIFY(close(same[1].x(), 2.0) && close(same[1].y(), 1e-4));
        // axes: margins 0.01..2 widened by 2 each way; |Δ| 1e-4..3e-2 (>= atol) widened by 2 and 8
        const auto x = range<QLogValueAxis>(chart, Qt::Horizontal), y = range<QLogValueAxis>(chart, Qt::Vertical);
        QVERIFY2(close(x.first, 0.005) && close(x.second, 4.0),
                 qPrintable(QStringLiteral("%1..%2").arg(x.first).arg(x.second)));
        QVERIFY2(close(y.first, 5e-5) && close(y.second, 0.24),
                 qPrintable(QStringLiteral("%1..%2").arg(y.first).arg(y.second)));
        // rendered: each series' colour where its points are
        auto view = showIn(chart);
        const QImage img = chart_probe::render(view.get());
        for (const auto& name : {QStringLiteral("fp16 flipped"), QStringLiteral("fp16 same decision")}) {
            auto* s = series(chart, name);
            QString why;
            QVERIFY2(chart_probe::drawnAtItsPoints(img, view.get(), s, &why), qPrintable(why));
        }
        QCOMPARE(chart_probe::colourAt(img, view.get(), series(chart, QStringLiteral("fp16 flipped")), flipped[1]),
                 QColor(220, 50, 50));
        // driven by the model: the first three samples only, one flip left, ranges follow
        model.resetData(flipRun(3));
        QCOMPARE(pointsOf(chart, QStringLiteral("fp16 flipped")).size(), 1);
        QCOMPARE(pointsOf(chart, QStringLiteral("fp16 same decision")).size(), 2);
        QVERIFY(close(range<QLogValueAxis>(chart, Qt::Vertical).second, 0.16));
        view.reset();  // the chart before the model it reads
    }

    void lossChartLeavesNonFiniteLossesOut() {
        TrainingStepModel model;
        model.resetData(steps());
        auto* chart = makeLossChart(&model);
        const auto ref = pointsOf(chart, QStringLiteral("reference (FP32)"));
        const auto amp = pointsOf(chart, QStringLiteral("AMP"));
        QCOMPARE(ref.size(), 8);
        QCOMPARE(amp.size(), 6);  // the NaN of step 1 and the inf of step 3 are not drawn as numbers
        QCOMPARE(amp[1], QPointF(2, 1.61));
        QCOMPARE(amp[2], QPointF(4, 1.21));
        QCOMPARE(ref[7], QPointF(7, 0.8));
        const auto x = range<QValueAxis>(chart, Qt::Horizontal), y = range<QValueAxis>(chart, Qt::Vertical);
        QCOMPARE(x, std::make_pair(0.0, 7.0));
        QVERIFY2(y.first == 0 && close(y.second, 2.01 * 1.05),
                 qPrintable(QStringLiteral("%1..%2").arg(y.first).arg(y.second)));
        const auto all = steps();
        model.resetData(std::vector<TrainStep>(all.begin() + 4, all.end()));
        QCOMPARE(pointsOf(chart, QStringLiteral("AMP")).size(), 4);
        QCOMPARE(range<QValueAxis>(chart, Qt::Horizontal), std::make_pair(4.0, 7.0));
        QVERIFY(close(range<QValueAxis>(chart, Qt::Vertical).second, 1.21 * 1.05));
        delete chart;
    }

    /// Step axes tick on whole steps: 4 steps read "1 2 3 4", not the default five ticks'
    /// "1 1 2 3 4" (%d of 1.75); a long run keeps at most about 8 ticks.
    void stepAxesTickOnWholeSteps() {
        auto ticks = [](QChart* chart) {
            auto* x = qobject_cast<QValueAxis*>(chart->axes(Qt::Horizontal).first());
            QList<double> out;
            if (x->tickType() == QValueAxis::TicksDynamic)
                for (double t = x->tickAnchor(); t <= x->max() + 1e-9; t += x->tickInterval())
                    if (t >= x->min() - 1e-9) out.append(t);
            if (x->tickType() == QValueAxis::TicksFixed)
                for (int i = 0; i < x->tickCount(); ++i)
                    out.append(x->min() + (x->max() - x->min()) * i / std::max(1, x->tickCount() - 1));
            return out;
        };
        const auto all = steps();
        TrainingStepModel model;
        std::vector<TrainStep> four(all.begin(), all.begin() + 4);
        for (size_t i = 0; i < four.size(); ++i) four[i].step = int(i) + 1;
        model.resetData(four);
        for (auto* chart : {makeLossChart(&model), makeScaleChart(&model), makeUpdatesChart(&model)}) {
            QCOMPARE(ticks(chart), (QList<double>{1, 2, 3, 4}));
            model.resetData(longRun(300));
            const auto many = ticks(chart);
            QVERIFY2(many.size() >= 4 && many.size() <= 9, qPrintable(QString::number(many.size())));
            for (double t : many) QCOMPARE(t, std::round(t));
            model.resetData(four);
            delete chart;
        }
    }

    /// The table says what the chart leaves out: a NaN or infinite loss is shown as nan / inf (a
    /// training incident is one; it was '-', and 0 when read back from a database).
    void stepTableShowsNonFiniteLossesAsSuch() {
        TrainingStepModel model;
        model.resetData(steps());
        auto shown = [&](int row, int column) { return model.index(row, column).data(Qt::DisplayRole).toString(); };
        QCOMPARE(shown(1, TrainingStepModel::LossAmp), QStringLiteral("nan"));
        QCOMPARE(shown(3, TrainingStepModel::LossAmp), QStringLiteral("inf"));
        QCOMPARE(shown(0, TrainingStepModel::LossAmp), QStringLiteral("2.01"));
        QVERIFY(model.index(1, 0).data(TrainingStepModel::SummaryRole).toString().contains(QStringLiteral("AMP nan")));
    }

    /// fp8-delayed training: the values each step's casts clamped beyond the stale scales, with the
    /// first tensor that had one; "-" for a step of another precision.
    void stepTableShowsFp8DelayedClamping() {
        auto s = steps();
        s[0].fp8_saturated = 0;
        s[1].fp8_saturated = 12;
        s[1].fp8_saturated_at = "fc1/input";
        TrainingStepModel model;
        model.resetData(s);
        auto shown = [&](int row) {
            return model.index(row, TrainingStepModel::Fp8Clamped).data(Qt::DisplayRole).toString();
        };
        QCOMPARE(model.headerData(TrainingStepModel::Fp8Clamped, Qt::Horizontal).toString(),
                 QStringLiteral("FP8 clamped"));
        QCOMPARE(shown(0), QStringLiteral("0"));
        QCOMPARE(shown(1), QStringLiteral("12 (first fc1/input)"));
        QCOMPARE(shown(2), QStringLiteral("-"));
        QCOMPARE(model.value(1, TrainingStepModel::Fp8Clamped), 12.0);
        QVERIFY(std::isnan(model.value(2, TrainingStepModel::Fp8Clamped)));
    }

    void scaleChartMarksTheSkippedSteps() {
        TrainingStepModel model;
        model.resetData(steps());
        auto* chart = makeScaleChart(&model);
        QCOMPARE(pointsOf(chart, QStringLiteral("scale used")).size(), 8);
        const auto skipped = pointsOf(chart, QStringLiteral("skipped step (inf/NaN gradients)"));
        QCOMPARE(skipped, (QList<QPointF>{{2, 65536}, {5, 32768}}));
        const auto y = range<QLogValueAxis>(chart, Qt::Vertical);
        QCOMPARE(y, std::make_pair(8192.0, 131072.0));  // 16384..65536, one doubling of room each way
        QCOMPARE(range<QValueAxis>(chart, Qt::Horizontal), std::make_pair(0.0, 7.0));
        auto view = showIn(chart);
        const QImage img = chart_probe::render(view.get());
        auto* marks = series(chart, QStringLiteral("skipped step (inf/NaN gradients)"));
        QCOMPARE(chart_probe::colourAt(img, view.get(), marks, skipped[1]), QColor(220, 30, 30));
        // a step that was not skipped has no red marker at its place
        QVERIFY(!chart_probe::near(chart_probe::colourAt(img, view.get(), marks, QPointF(4, 32768)),
                                   QColor(220, 30, 30), 60));
        const auto all = steps();
        model.resetData(std::vector<TrainStep>(all.begin(), all.begin() + 4));
        QCOMPARE(pointsOf(chart, QStringLiteral("skipped step (inf/NaN gradients)")), (QList<QPointF>{{2, 65536}}));
        QCOMPARE(range<QLogValueAxis>(chart, Qt::Vertical), std::make_pair(16384.0, 131072.0));
        view.reset();
    }
    void thinningKeepsEveryMinimumMaximumAndMark() {
        // 20 000 noisy points with isolated spikes up and down, on 600 columns; marks on points
        // that are neither (e.g. skipped steps in the middle of a column)
        std::mt19937 rng(3);
        std::uniform_real_distribution<double> noise(0, 1);
        QList<QPointF> pts;
        std::vector<bool> marked;
        for (int i = 0; i < 20000; ++i) {
            const double y = i % 997 == 5 ? 50.0 : i % 1301 == 7 ? -50.0 : noise(rng);
            pts.append(QPointF(i * 0.5, y));
            marked.push_back(i % 409 == 200);
        }
        const int columns = 600;
        const auto kept = parts::thinToColumns(pts, columns, marked);
        QVERIFY(std::is_sorted(kept.begin(), kept.end()));
        QVERIFY(std::adjacent_find(kept.begin(), kept.end()) == kept.end());
        QCOMPARE(kept.front(), qsizetype(0));
        QCOMPARE(kept.back(), pts.size() - 1);
        const QString missing = missingExtremes(pts, kept, columns, marked);
        QVERIFY2(missing.isEmpty(), qPrintable(missing));
        const auto marks = std::count(marked.begin(), marked.end(), true);
        QVERIFY2(qsizetype(kept.size()) <= 2 * columns + marks + 2, qPrintable(QString::number(kept.size())));
        // few points: all of them
        const QList<QPointF> few = pts.mid(0, 2 * columns);
        QCOMPARE(qsizetype(parts::thinToColumns(few, columns).size()), few.size());
    }

    void longRunChartsAreThinnedToThePlotKeepingSpikesAndSkippedSteps() {
        TrainingStepModel model;
        const auto run = longRun(6000);
        model.resetData(run);
        auto* loss = makeLossChart(&model);
        auto* scale = makeScaleChart(&model);
        auto lossView = showIn(loss), scaleView = showIn(scale);
        model.resetData(run);  // refreshed with the plots laid out (their pixel width known)
        QCoreApplication::processEvents();
        const int columns = int(loss->plotArea().width());
        QVERIFY(columns > 100);
        // the AMP loss: thinned, its spike kept
        const auto amp = pointsOf(loss, QStringLiteral("AMP"));
        QVERIFY2(amp.size() < 3000 && amp.size() > columns, qPrintable(QString::number(amp.size())));
        QVERIFY(amp.contains(QPointF(2000, 40.0)));
        // every drawn pixel column shows the same minimum and maximum as all the steps
        QList<QPointF> all;
        std::vector<bool> skipped;
        for (const auto& st : run)
            if (std::isfinite(st.loss_amp)) all.append(QPointF(st.step, st.loss_amp));
        std::vector<qsizetype> kept;
        for (const auto& p : amp) kept.push_back(all.indexOf(p));
        QString missing = missingExtremes(all, kept, columns, {});
        QVERIFY2(missing.isEmpty(), qPrintable(missing));
        // the loss scale line keeps every skipped step (the marker series has each of them)
        const auto used = pointsOf(scale, QStringLiteral("scale used"));
        const auto marks = pointsOf(scale, QStringLiteral("skipped step (inf/NaN gradients)"));
        QCOMPARE(marks.size(),
                 qsizetype(std::count_if(run.begin(), run.end(), [](const TrainStep& st) { return st.skipped; })));
        QVERIFY(used.size() < qsizetype(run.size()));
        for (const auto& m : marks)
            QVERIFY2(used.contains(m), qPrintable(QStringLiteral("skipped step %1 not on the line").arg(m.x())));
        lossView.reset();
        scaleView.reset();
    }

    void chartsStreamWithoutAntialiasingThenSettle() {
        // a live run's rows: the chart is drawn without antialiasing while they arrive (its
        // repaints held up the UI thread, bench/README.md), and antialiased once they stop
        TrainingStepModel model;
        const auto run = longRun(400);
        ChartWidget w(
            &model, [&model] { return makeGradChart(&model); }, QStringLiteral("empty"));
        w.resize(640, 400);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QVERIFY(w.view()->renderHints().testFlag(QPainter::Antialiasing));
        for (size_t b = 0; b < run.size(); b += 100) {
            model.appendSteps(std::vector<TrainStep>(run.begin() + long(b), run.begin() + long(b + 100)));
            QCoreApplication::processEvents();
            QVERIFY2(!w.view()->renderHints().testFlag(QPainter::Antialiasing), "antialiased while rows stream in");
        }
        QTRY_VERIFY_WITH_TIMEOUT(w.view()->renderHints().testFlag(QPainter::Antialiasing), 3000);
    }
};

QTEST_MAIN(TstCharts)
#include "tst_charts.moc"
