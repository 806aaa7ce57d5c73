// SPDX-License-Identifier: MIT
// The training charts: one pass over the steps model per refresh (appended steps are drawn in
// batches, see follow()), so that a live run's cost grows with its steps, not their square.
#include <QChart>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPen>
#include <QScatterSeries>
#include <QValueAxis>

#include <cmath>
#include <memory>
#include <vector>

#include "chartparts.h"
#include "charts.h"
#include "trainingstepmodel.h"

namespace ampscope::ui {

using namespace parts;

namespace {

using T = TrainingStepModel;
using Keep = std::function<bool(const TrainingStepModel*, int)>;

/// A series' points from the steps model, kept as the rows arrive: each refresh reads only the
/// rows appended since the last one (a reset starts over), then hands the series the points
/// its plot's pixel columns need (thinToColumns: every minimum, maximum and skipped step kept).
struct StepPoints {
    QList<QPointF> all;       ///< every kept row's point, x = step
    std::vector<int> rows;    ///< the model row of each point of `all`
    std::vector<bool> marks;  ///< the row's step was skipped (never thinned away)
    std::vector<int> shown;   ///< the model row of each point the series shows (tool tips)
    int scanned = 0;          ///< model rows read so far
};

/// Pixel columns of the plot `s` is drawn in (before the first layout: a wide window's).
int plotColumns(QXYSeries* s) {
    const int w = s->chart() ? int(s->chart()->plotArea().width()) : 0;
    return w > 0 ? w : 1000;
}

/// Reads the rows appended since the last call into `p`, then refills `s` with its thinned points.
void refill(QXYSeries* s, StepPoints& p, TrainingStepModel* model, int column, bool positive, const Keep& also) {
    if (model->rowCount() < p.scanned) p = StepPoints{};
    for (int r = p.scanned; r < model->rowCount(); ++r) {
        const double v = model->value(r, column);
        if (!std::isfinite(v) || (positive && v <= 0) || (also && !also(model, r))) continue;
        p.all.append(QPointF(model->value(r, T::Step), v));
        p.rows.push_back(r);
        p.marks.push_back(model->value(r, T::Skipped) > 0);
    }
    p.scanned = model->rowCount();
    const auto keep = thinToColumns(p.all, plotColumns(s), p.marks);
    QList<QPointF> pts;
    pts.reserve(qsizetype(keep.size()));
    p.shown.clear();
    for (qsizetype i : keep) {
        pts.append(p.all[i]);
        p.shown.push_back(p.rows[size_t(i)]);
    }
    if (pts != s->points()) s->replace(pts);  // one re-layout per refresh (append would re-lay out per point)
}

/// A series of the steps whose `column` is finite (and > 0 for log axes, and kept by `also`),
/// x = step. Returns what refreshes its points from the model (the chart's update calls it); the
/// hovered point shows its step's summary.
std::function<void()> stepSeries(QXYSeries* s, TrainingStepModel* model, int column, bool positive, Keep also = {}) {
    auto p = std::make_shared<StepPoints>();
    QObject::connect(model, &QAbstractItemModel::modelReset, s,
                     [p] { *p = StepPoints{}; });  // before the chart's update
    tipOnHover(s, [model, p](qsizetype i) {
        if (size_t(i) >= p->shown.size() || p->shown[size_t(i)] >= model->rowCount()) return QString();
        return model->index(p->shown[size_t(i)], 0).data(T::SummaryRole).toString();
    });
    return [s, model, column, positive, also = std::move(also), p] { refill(s, *p, model, column, positive, also); };
}

/// Range of columns over the rows (finite values, > 0 when `positive`); {lo, hi} or {1, 0}.
std::pair<double, double> columnRange(const TrainingStepModel* m, std::initializer_list<int> columns, bool positive) {
    double lo = 1e300, hi = -1e300;
    for (int r = 0; r < m->rowCount(); ++r)
        for (int c : columns) {
            const double v = m->value(r, c);
            if (!std::isfinite(v) || (positive && v <= 0)) continue;
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
    return lo <= hi ? std::make_pair(lo, hi) : std::make_pair(1.0, 0.0);
}

QValueAxis* stepAxis(QChart* chart) {
    auto* x = new QValueAxis;
    x->setTitleText(QStringLiteral("iteration"));
    x->setLabelFormat(QStringLiteral("%d"));
    chart->addAxis(x, Qt::AlignBottom);
    return x;
}

void stepRange(QValueAxis* x, const TrainingStepModel* model) {
    const auto [lo, hi] = columnRange(model, {T::Step}, false);
    const double first = lo <= hi ? lo : 0, last = lo <= hi ? std::max(hi, lo + 1) : 1;
    x->setRange(first, last);
    // ticks on whole steps, at most about 8 (Qt's five fixed ticks over 4 steps read "1 1 2 3 4")
    x->setTickType(QValueAxis::TicksDynamic);
    x->setTickAnchor(first);
    x->setTickInterval(std::max(1.0, std::ceil((last - first) / 8)));
}

/// A value axis on the left: titled, labels in `format` when given.
QValueAxis* leftAxis(QChart* chart, const QString& title, const QString& format = {}) {
    auto* y = new QValueAxis;
    if (!title.isEmpty()) y->setTitleText(title);
    if (!format.isEmpty()) y->setLabelFormat(format);
    chart->addAxis(y, Qt::AlignLeft);
    return y;
}

QLineSeries* line(const QString& name) {
    auto* s = new QLineSeries;
    s->setName(name);
    return s;
}

}  // namespace

QChart* makeLossChart(TrainingStepModel* model) {
    auto* chart = titled(QStringLiteral("Loss: FP32 reference vs AMP"));
    auto* ref = line(QStringLiteral("reference (FP32)"));
    auto* amp = line(QStringLiteral("AMP"));
    auto fillRef = stepSeries(ref, model, T::LossRef, false);
    auto fillAmp = stepSeries(amp, model, T::LossAmp, false);
    auto* x = stepAxis(chart);
    auto* y = leftAxis(chart, QStringLiteral("loss"));
    follow(chart, model, [model, x, y, fillRef, fillAmp] {
        fillRef();
        fillAmp();
        stepRange(x, model);
        const auto [lo, hi] = columnRange(model, {T::LossRef, T::LossAmp}, false);
        y->setRange(std::min(0.0, lo <= hi ? lo : 0.0), lo <= hi && hi > 0 ? hi * 1.05 : 1);
    });
    return attach(chart, {ref, amp}, x, y);
}

QChart* makeScaleChart(TrainingStepModel* model) {
    auto* chart = titled(QStringLiteral("Loss scale (log2) with skipped steps"));
    auto* used = line(QStringLiteral("scale used"));
    auto* skipped = new QScatterSeries;
    skipped->setName(QStringLiteral("skipped step (inf/NaN gradients)"));
    skipped->setColor(QColor(220, 30, 30));
    skipped->setMarkerSize(10);
    auto fillUsed = stepSeries(used, model, T::Scale, true);
    auto fillSkipped = stepSeries(skipped, model, T::Scale, true,
                                  [](const TrainingStepModel* m, int r) { return m->value(r, T::Skipped) > 0; });
    auto* x = stepAxis(chart);
    auto* y = new QLogValueAxis;
    y->setBase(2);
    y->setLabelFormat(QStringLiteral("%g"));
    y->setTitleText(QStringLiteral("scale"));
    chart->addAxis(y, Qt::AlignLeft);
    follow(chart, model, [model, x, y, fillUsed, fillSkipped] {
        fillUsed();
        fillSkipped();
        stepRange(x, model);
        const auto [lo, hi] = columnRange(model, {T::Scale}, true);
        y->setRange(lo <= hi ? lo / 2 : 1, lo <= hi ? hi * 2 : 2);
    });
    return attach(chart, {used, skipped}, x, y);
}

QChart* makeUpdatesChart(TrainingStepModel* model) {
    auto* chart = titled(QStringLiteral("Effective updates vs iterations"));
    auto* eff = line(QStringLiteral("effective updates"));
    auto* it = line(QStringLiteral("iterations"));
    QPen pen(Qt::DashLine);
    pen.setColor(QColor(130, 130, 130));
    it->setPen(pen);
    auto fillEff = stepSeries(eff, model, T::Effective, false);
    auto* x = stepAxis(chart);
    auto* y = leftAxis(chart, QString(), QStringLiteral("%d"));
    follow(chart, model, [model, x, y, it, fillEff] {
        fillEff();
        stepRange(x, model);
        const auto [lo, hi] = columnRange(model, {T::Step}, false);
        it->clear();
        if (lo <= hi) it->append({QPointF(lo, lo + 1), QPointF(hi, hi + 1)});  // one update per iteration
        y->setRange(0, lo <= hi ? hi + 1 : 1);
    });
    return attach(chart, {it, eff}, x, y);
}

QChart* makeGradChart(TrainingStepModel* model) {
    auto* chart = titled(QStringLiteral("Unscaled gradient norm, weight divergence, and gradient underflow"));
    auto* gn = line(QStringLiteral("gradient norm (AMP)"));
    auto* dv = line(QStringLiteral("‖w_amp − w_ref‖ / ‖w_ref‖"));
    auto* uf = line(QStringLiteral("gradient elements lost to underflow"));
    QPen pen(QColor(200, 120, 30));
    pen.setStyle(Qt::DotLine);
    pen.setWidth(2);
    uf->setPen(pen);
    auto fills = {stepSeries(gn, model, T::GradNorm, true), stepSeries(dv, model, T::Divergence, true),
                  stepSeries(uf, model, T::Underflow, false)};
    auto* x = stepAxis(chart);
    auto* y = logAxis(QString(), 1e-6, 1);
    chart->addAxis(y, Qt::AlignLeft);
    auto* yu = new QValueAxis;
    yu->setTitleText(QStringLiteral("elements lost"));
    yu->setLabelFormat(QStringLiteral("%d"));
    chart->addAxis(yu, Qt::AlignRight);
    follow(chart, model, [model, x, y, yu, fills = std::vector<std::function<void()>>(fills)] {
        for (const auto& fill : fills) fill();
        stepRange(x, model);
        const auto [lo, hi] = columnRange(model, {T::GradNorm, T::Divergence}, true);
        y->setRange(std::max(kPlotFloor, (lo <= hi ? lo : 1e-6) / 2),
                    std::max((lo <= hi ? hi : 1) * 2, (lo <= hi ? lo : 1e-6) * 10));
        const auto [ulo, uhi] = columnRange(model, {T::Underflow}, false);
        yu->setRange(0, std::max(4.0, (ulo <= uhi ? uhi : 0) * 1.1));
        yu->applyNiceNumbers();
    });
    attach(chart, {gn, dv}, x, y);
    attach(chart, uf, x, yu);
    return chart;
}

}  // namespace ampscope::ui
