// SPDX-License-Identifier: MIT
#include "charts.h"

#include "models.h"

#include <QBarCategoryAxis>
#include <QIdentityProxyModel>
#include <QRegularExpression>
#include <QSortFilterProxyModel>
#include <QVXYModelMapper>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QLegend>
#include <QPalette>
#include <QCursor>
#include <QToolTip>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPainter>
#include <QPixmap>
#include <QScatterSeries>
#include <QSvgGenerator>
#include <QValueAxis>
#include <QWidget>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

namespace ampscope::ui {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }
constexpr double kFloor = kPlotFloor;

QColor tagColor(const std::string& tag, Precision p) {
    const bool bf = p == Precision::Bf16;
    QColor c;
    if (tag.find("edge") != std::string::npos) c = bf ? QColor(150, 60, 160) : QColor(220, 50, 50);
    else if (tag.find("boundary") != std::string::npos) c = bf ? QColor(30, 130, 130) : QColor(240, 150, 20);
    else c = bf ? QColor(40, 90, 200) : QColor(90, 160, 90);
    return tag.rfind("B ", 0) == 0 ? c.darker(170) : c;  // second run of a comparison
}

QLogValueAxis* logAxis(const QString& title, double lo, double hi) {
    auto* a = new QLogValueAxis;
    a->setTitleText(title);
    a->setBase(10);
    a->setLabelFormat(QStringLiteral("%.0e"));
    a->setRange(std::max(kFloor, lo / 2), std::max(hi * 2, lo * 10));
    return a;
}

}  // namespace

void applyPalette(QChart* chart, const QPalette& pal) {
    // Colours of the chart's frame from the widget palette (light or dark); the series keep
    // their colours (QChart::setTheme would reset them).
    const QColor text = pal.color(QPalette::WindowText), base = pal.color(QPalette::Base);
    const QColor grid = pal.color(QPalette::Mid);
    chart->setBackgroundBrush(base);
    chart->setPlotAreaBackgroundVisible(false);
    chart->setTitleBrush(text);
    chart->legend()->setLabelColor(text);
    for (auto* a : chart->axes()) {
        a->setLabelsColor(text);
        a->setTitleBrush(text);
        a->setGridLineColor(grid);
        a->setLinePenColor(grid);
    }
}

QChart* makeDeltaHistogram(const RunResult& run) {
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Histogram of log10 |Δ|"));
    const int lo = -10, hi = 2;
    QStringList cats;
    for (int b = lo; b < hi; ++b) cats << QStringLiteral("1e%1").arg(b);
    cats << QStringLiteral("non-finite");
    auto* series = new QBarSeries;
    int maxc = 1;
    for (const auto& c : run.comparisons) {
        auto* set = new QBarSet(qs(to_string(c.precision)));
        std::vector<int> counts(size_t(hi - lo + 1), 0);
        for (const auto& d : c.deltas) {
            if (!d.finite) { counts.back()++; continue; }
            const int b = std::clamp(int(std::floor(std::log10(std::max(d.abs, 1e-10)))), lo, hi - 1);
            counts[size_t(b - lo)]++;
        }
        for (int v : counts) { *set << v; maxc = std::max(maxc, v); }
        series->append(set);
    }
    chart->addSeries(series);
    auto* x = new QBarCategoryAxis;
    x->append(cats);
    auto* y = new QValueAxis;
    y->setRange(0, maxc);
    y->setTitleText(QStringLiteral("samples"));
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    series->attachAxis(x);
    series->attachAxis(y);
    return chart;
}

namespace {

/// Presents a model's plot role as DisplayRole, which is what QVXYModelMapper reads.
class PlotProxy : public QIdentityProxyModel {
public:
    PlotProxy(int role, QObject* parent) : QIdentityProxyModel(parent), role_(role) {}
    QVariant data(const QModelIndex& idx, int role) const override {
        return QIdentityProxyModel::data(idx, role == Qt::DisplayRole ? role_ : role);
    }

private:
    int role_;
};

/// Series points = rows of `rows` (x and y columns through `role`), kept in step with the
/// model by the mapper; the hovered point shows the row's SummaryRole.
void mapSeries(QXYSeries* s, QAbstractItemModel* rows, int role, int x, int y, int summaryRole, int summaryColumn = 0) {
    auto* plot = new PlotProxy(role, s);
    plot->setSourceModel(rows);
    auto* mapper = new QVXYModelMapper(s);
    mapper->setXColumn(x);
    mapper->setYColumn(y);
    mapper->setSeries(s);
    mapper->setModel(plot);
    QObject::connect(s, &QXYSeries::hovered, s, [s, rows, summaryRole, summaryColumn](const QPointF& p, bool on) {
        if (!on) {
            QToolTip::hideText();
            return;
        }
        const auto& pts = s->points();
        qsizetype best = -1;
        double bd = 0;
        for (qsizetype i = 0; i < pts.size(); ++i) {
            const double d = std::abs(pts[i].x() - p.x()) + std::abs(std::log10(std::max(pts[i].y(), kFloor)) - std::log10(std::max(p.y(), kFloor)));
            if (best < 0 || d < bd) { best = i; bd = d; }
        }
        if (best < 0 || best >= rows->rowCount()) return;
        const QString tip = rows->index(int(best), summaryColumn).data(summaryRole).toString();
        s->setProperty("ampscopeTip", tip);
        QToolTip::showText(QCursor::pos(), tip);
    });
}

void attach(QChart* c, QAbstractSeries* s, QAbstractAxis* x, QAbstractAxis* y) {
    c->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
}

/// Calls `update` now and whenever the model is reset (axis ranges follow the data).
void follow(QChart* chart, QAbstractItemModel* model, std::function<void()> update) {
    update();
    QObject::connect(model, &QAbstractItemModel::modelReset, chart, update);
}

QSortFilterProxyModel* rowsWhere(QAbstractItemModel* model, int column, const QString& regex, QObject* parent) {
    auto* f = new QSortFilterProxyModel(parent);
    f->setSourceModel(model);
    f->setFilterKeyColumn(column);
    f->setFilterRegularExpression(QRegularExpression(regex));
    return f;
}

}  // namespace

QChart* makeDeltaChart(SampleModel* model) {
    const RunResult& run = model->run();
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Per-sample |Δ| vs FP32 reference (non-finite samples drawn at the top)"));
    auto* x = new QValueAxis;
    x->setTitleText(QStringLiteral("sample"));
    x->setLabelFormat(QStringLiteral("%d"));
    auto* y = logAxis(QStringLiteral("max |amp − ref| over scores"), model->plotLow(), model->plotHigh() * 4);
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    auto ranges = [model, x, y] {
        x->setRange(0, std::max<double>(1, model->rowCount()));
        y->setRange(std::max(kFloor, model->plotLow() / 2), std::max(model->plotHigh() * 8, model->plotLow() * 10));
    };
    follow(chart, model, ranges);
    // One series per precision and tag: rows of that tag, x = sample index, y = that precision's |Δ|.
    std::vector<std::string> tags;
    for (const auto& smp : run.samples)
        if (std::find(tags.begin(), tags.end(), smp.tag) == tags.end()) tags.push_back(smp.tag);
    for (size_t c = 0; c < run.comparisons.size(); ++c) {
        const Precision p = run.comparisons[c].precision;
        for (const auto& tag : tags) {
            auto* s = new QScatterSeries;
            s->setName(qs(to_string(p) + " " + tag));
            s->setMarkerSize(p == Precision::Bf16 ? 7 : 9);
            s->setMarkerShape(p == Precision::Bf16 ? QScatterSeries::MarkerShapeRectangle : QScatterSeries::MarkerShapeCircle);
            s->setColor(tagColor(tag, p));
            s->setBorderColor(Qt::transparent);
            const int col = SampleModel::deltaColumn(int(c));
            mapSeries(s, rowsWhere(model, 1, QStringLiteral("^%1$").arg(QRegularExpression::escape(qs(tag))), chart),
                      SampleModel::PlotRole, 0, col, SampleModel::SummaryRole, col);
            attach(chart, s, x, y);
        }
    }
    auto* tol = new QLineSeries;
    tol->setName(QStringLiteral("atol %1").arg(run.criteria.atol));
    tol->append(0, std::max(run.criteria.atol, kFloor));
    tol->append(std::max<double>(1, double(run.samples.size())), std::max(run.criteria.atol, kFloor));
    QPen pen(Qt::DashLine);
    pen.setColor(QColor(120, 120, 120));
    tol->setPen(pen);
    attach(chart, tol, x, y);
    return chart;
}

QChart* makeFlipChart(SampleModel* model) {
    const RunResult& run = model->run();
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Decision flips against the reference margin (top-1 − top-2)"));
    auto* x = logAxis(QStringLiteral("reference margin"), 1e-3, 1);
    auto* y = logAxis(QStringLiteral("|Δ|"), model->plotLow(), model->plotHigh() * 4);
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    auto ranges = [model, x, y] {
        double lo = 1e300, hi = 0;
        for (int r = 0; r < model->rowCount(); ++r) {
            const double m = model->index(r, SampleModel::kMarginColumn).data(SampleModel::PlotRole).toDouble();
            lo = std::min(lo, m);
            hi = std::max(hi, m);
        }
        if (hi == 0) { lo = 1e-3; hi = 1; }
        x->setRange(std::max(kFloor, lo / 2), std::max(hi * 2, lo * 10));
        y->setRange(std::max(kFloor, model->plotLow() / 2), std::max(model->plotHigh() * 8, model->plotLow() * 10));
    };
    follow(chart, model, ranges);
    // Per precision: samples whose decision flipped (the decision column shows "a → b"), and the rest.
    for (size_t c = 0; c < run.comparisons.size(); ++c) {
        const Precision p = run.comparisons[c].precision;
        for (bool flip : {false, true}) {
            auto* s = new QScatterSeries;
            s->setName(qs(to_string(p)) + (flip ? QStringLiteral(" flipped") : QStringLiteral(" same decision")));
            s->setMarkerSize(flip ? 11 : 6);
            s->setColor(flip ? (p == Precision::Bf16 ? QColor(150, 60, 160) : QColor(220, 50, 50))
                             : (p == Precision::Bf16 ? QColor(120, 150, 220) : QColor(150, 190, 150)));
            s->setBorderColor(Qt::transparent);
            const int col = SampleModel::deltaColumn(int(c));
            mapSeries(s, rowsWhere(model, SampleModel::decisionColumn(int(c)), flip ? QStringLiteral("→") : QStringLiteral("^[^→]*$"), chart),
                      SampleModel::PlotRole, SampleModel::kMarginColumn, col, SampleModel::SummaryRole, col);
            attach(chart, s, x, y);
        }
    }
    return chart;
}

QChart* makeLayerChart(LayerModel* model) {
    auto* chart = new QChart;
    const bool bf = model->precision() == Precision::Bf16;
    const double limit = model->formatLimit();
    chart->setTitle(QStringLiteral("absmax per op, %1 pass, against the %2 limit")
                        .arg(qs(to_string(model->precision())), bf ? QStringLiteral("BF16") : QStringLiteral("FP16")));
    auto* x = new QValueAxis;
    x->setTitleText(QStringLiteral("op index (execution order)"));
    x->setLabelFormat(QStringLiteral("%d"));
    auto* y = logAxis(QStringLiteral("absmax"), 1e-3, limit * 4);
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    auto* lim = new QLineSeries;
    lim->setName(bf ? QStringLiteral("BF16 max") : QStringLiteral("FP16 max 65504"));
    QPen pen(Qt::DashLine);
    pen.setColor(QColor(200, 40, 40));
    lim->setPen(pen);
    // Axis ranges and the limit line follow the model.
    auto ranges = [model, x, y, lim, limit] {
        double lo = 1e300;
        const int n = model->rowCount();
        for (int r = 0; r < n; ++r) {
            const double v = model->index(r, LayerModel::Absmax).data(LayerModel::SortRole).toDouble();
            if (v > 0) lo = std::min(lo, v);
        }
        x->setRange(-1, std::max<double>(1, n));
        y->setRange(std::max(kFloor, std::min(lo, limit) / 2), limit * 4);
        lim->replace(QList<QPointF>{{-1, limit}, {double(std::max(1, n)), limit}});
    };
    follow(chart, model, ranges);
    auto* line = new QLineSeries;
    line->setName(QStringLiteral("absmax"));
    auto* finite = new QScatterSeries;
    finite->setName(QStringLiteral("finite"));
    finite->setMarkerSize(6);
    auto* prop = new QScatterSeries;
    prop->setName(QStringLiteral("non-finite (propagated)"));
    prop->setColor(QColor(240, 150, 20));
    prop->setMarkerSize(8);
    auto* origin = new QScatterSeries;
    origin->setName(QStringLiteral("origin of NaN/Inf"));
    origin->setColor(QColor(220, 30, 30));
    origin->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    origin->setMarkerSize(14);
    using L = LayerModel;
    mapSeries(line, model, L::PlotRole, L::Index, L::Absmax, L::SummaryRole);
    mapSeries(finite, rowsWhere(model, L::State, QStringLiteral("^$"), chart), L::MarkRole, L::Index, L::Absmax, L::SummaryRole);
    mapSeries(prop, rowsWhere(model, L::State, QStringLiteral("^propagated$"), chart), L::MarkRole, L::Index, L::Absmax, L::SummaryRole);
    mapSeries(origin, rowsWhere(model, L::State, QStringLiteral("^origin$"), chart), L::MarkRole, L::Index, L::Absmax, L::SummaryRole);
    for (QAbstractSeries* s : {static_cast<QAbstractSeries*>(line), static_cast<QAbstractSeries*>(finite),
                               static_cast<QAbstractSeries*>(prop), static_cast<QAbstractSeries*>(origin),
                               static_cast<QAbstractSeries*>(lim)})
        attach(chart, s, x, y);
    return chart;
}

namespace {

/// Rows of `src` that `keep` accepts (e.g. finite values for a line, skipped steps for markers).
class RowsIf : public QSortFilterProxyModel {
public:
    RowsIf(QAbstractItemModel* src, std::function<bool(const QAbstractItemModel*, int)> keep, QObject* parent)
        : QSortFilterProxyModel(parent), keep_(std::move(keep)) {
        setSourceModel(src);
    }

protected:
    bool filterAcceptsRow(int row, const QModelIndex&) const override { return keep_(sourceModel(), row); }

private:
    std::function<bool(const QAbstractItemModel*, int)> keep_;
};

using T = TrainingStepModel;

double plotted(const QAbstractItemModel* m, int row, int column) {
    return m->index(row, column).data(T::PlotRole).toDouble();
}

/// A series of the steps whose `column` is finite (and > 0 for log axes), x = step.
void stepSeries(QXYSeries* s, TrainingStepModel* model, int column, bool positive, QObject* owner,
                std::function<bool(const QAbstractItemModel*, int)> also = {}) {
    auto* rows = new RowsIf(model, [column, positive, also](const QAbstractItemModel* m, int r) {
        const double v = plotted(m, r, column);
        return std::isfinite(v) && (!positive || v > 0) && (!also || also(m, r));
    }, owner);
    mapSeries(s, rows, T::PlotRole, T::Step, column, T::SummaryRole);
}

/// Range of a column over the rows (finite values, > 0 when `positive`); {lo, hi} or {1, 0}.
std::pair<double, double> columnRange(const QAbstractItemModel* m, std::initializer_list<int> columns, bool positive) {
    double lo = 1e300, hi = -1e300;
    for (int r = 0; r < m->rowCount(); ++r)
        for (int c : columns) {
            const double v = plotted(m, r, c);
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
    x->setRange(lo <= hi ? lo : 0, lo <= hi ? std::max(hi, lo + 1) : 1);
}

}  // namespace

QChart* makeLossChart(TrainingStepModel* model) {
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Loss: FP32 reference vs AMP"));
    auto* ref = new QLineSeries;
    ref->setName(QStringLiteral("reference (FP32)"));
    auto* amp = new QLineSeries;
    amp->setName(QStringLiteral("AMP"));
    stepSeries(ref, model, T::LossRef, false, chart);
    stepSeries(amp, model, T::LossAmp, false, chart);
    auto* x = stepAxis(chart);
    auto* y = new QValueAxis;
    y->setTitleText(QStringLiteral("loss"));
    chart->addAxis(y, Qt::AlignLeft);
    follow(chart, model, [model, x, y] {
        stepRange(x, model);
        const auto [lo, hi] = columnRange(model, {T::LossRef, T::LossAmp}, false);
        y->setRange(std::min(0.0, lo <= hi ? lo : 0.0), lo <= hi && hi > 0 ? hi * 1.05 : 1);
    });
    attach(chart, ref, x, y);
    attach(chart, amp, x, y);
    return chart;
}

QChart* makeScaleChart(TrainingStepModel* model) {
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Loss scale (log2) with skipped steps"));
    auto* line = new QLineSeries;
    line->setName(QStringLiteral("scale used"));
    auto* skipped = new QScatterSeries;
    skipped->setName(QStringLiteral("skipped step (inf/NaN gradients)"));
    skipped->setColor(QColor(220, 30, 30));
    skipped->setMarkerSize(10);
    stepSeries(line, model, T::Scale, true, chart);
    stepSeries(skipped, model, T::Scale, true, chart, [](const QAbstractItemModel* m, int r) { return plotted(m, r, T::Skipped) > 0; });
    auto* x = stepAxis(chart);
    auto* y = new QLogValueAxis;
    y->setBase(2);
    y->setLabelFormat(QStringLiteral("%g"));
    y->setTitleText(QStringLiteral("scale"));
    chart->addAxis(y, Qt::AlignLeft);
    follow(chart, model, [model, x, y] {
        stepRange(x, model);
        const auto [lo, hi] = columnRange(model, {T::Scale}, true);
        y->setRange(lo <= hi ? lo / 2 : 1, lo <= hi ? hi * 2 : 2);
    });
    attach(chart, line, x, y);
    attach(chart, skipped, x, y);
    return chart;
}

QChart* makeUpdatesChart(TrainingStepModel* model) {
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Effective updates vs iterations"));
    auto* eff = new QLineSeries;
    eff->setName(QStringLiteral("effective updates"));
    auto* it = new QLineSeries;
    it->setName(QStringLiteral("iterations"));
    QPen pen(Qt::DashLine);
    pen.setColor(QColor(130, 130, 130));
    it->setPen(pen);
    stepSeries(eff, model, T::Effective, false, chart);
    auto* x = stepAxis(chart);
    auto* y = new QValueAxis;
    y->setLabelFormat(QStringLiteral("%d"));
    chart->addAxis(y, Qt::AlignLeft);
    follow(chart, model, [model, x, y, it] {
        stepRange(x, model);
        const auto [lo, hi] = columnRange(model, {T::Step}, false);
        it->clear();
        if (lo <= hi) it->append({QPointF(lo, lo + 1), QPointF(hi, hi + 1)});  // one update per iteration
        y->setRange(0, lo <= hi ? hi + 1 : 1);
    });
    attach(chart, it, x, y);
    attach(chart, eff, x, y);
    return chart;
}

QChart* makeGradChart(TrainingStepModel* model) {
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Unscaled gradient norm, weight divergence, and gradient underflow"));
    auto* gn = new QLineSeries;
    gn->setName(QStringLiteral("gradient norm (AMP)"));
    auto* dv = new QLineSeries;
    dv->setName(QStringLiteral("‖w_amp − w_ref‖ / ‖w_ref‖"));
    auto* uf = new QLineSeries;
    uf->setName(QStringLiteral("gradient elements lost to underflow"));
    QPen pen(QColor(200, 120, 30));
    pen.setStyle(Qt::DotLine);
    pen.setWidth(2);
    uf->setPen(pen);
    stepSeries(gn, model, T::GradNorm, true, chart);
    stepSeries(dv, model, T::Divergence, true, chart);
    stepSeries(uf, model, T::Underflow, false, chart);
    auto* x = stepAxis(chart);
    auto* y = logAxis(QString(), 1e-6, 1);
    chart->addAxis(y, Qt::AlignLeft);
    auto* yu = new QValueAxis;
    yu->setTitleText(QStringLiteral("elements lost"));
    yu->setLabelFormat(QStringLiteral("%d"));
    chart->addAxis(yu, Qt::AlignRight);
    follow(chart, model, [model, x, y, yu] {
        stepRange(x, model);
        const auto [lo, hi] = columnRange(model, {T::GradNorm, T::Divergence}, true);
        y->setRange(std::max(kFloor, (lo <= hi ? lo : 1e-6) / 2), std::max((lo <= hi ? hi : 1) * 2, (lo <= hi ? lo : 1e-6) * 10));
        const auto [ulo, uhi] = columnRange(model, {T::Underflow}, false);
        yu->setRange(0, std::max(4.0, (ulo <= uhi ? uhi : 0) * 1.1));
        yu->applyNiceNumbers();
    });
    attach(chart, gn, x, y);
    attach(chart, dv, x, y);
    attach(chart, uf, x, yu);
    return chart;
}

QString exportImage(QWidget* w, const QString& path) {
    if (path.endsWith(QStringLiteral(".svg"), Qt::CaseInsensitive)) {
        QSvgGenerator gen;
        gen.setFileName(path);
        gen.setSize(w->size());
        gen.setViewBox(w->rect());
        gen.setTitle(QStringLiteral("ampscope chart"));
        QPainter p(&gen);
        w->render(&p);
        return p.end() ? QString() : QStringLiteral("could not write %1").arg(path);
    }
    const QPixmap pix = w->grab();
    return pix.save(path) ? QString() : QStringLiteral("could not write %1").arg(path);
}

}  // namespace ampscope::ui
