// SPDX-License-Identifier: MIT
#include "charts.h"

#include "chartparts.h"
#include "comparemodel.h"
#include "layermodel.h"
#include "samplemodel.h"

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

#include "uitext.h"

namespace ampscope::ui {

using namespace parts;

namespace {

constexpr double kFloor = kPlotFloor;

QColor tagColor(const std::string& tag, Precision p) {
    const bool bf = p == Precision::Bf16;
    QColor c;
    if (tag.find("edge") != std::string::npos)
        c = bf ? QColor(150, 60, 160) : QColor(220, 50, 50);
    else if (tag.find("boundary") != std::string::npos)
        c = bf ? QColor(30, 130, 130) : QColor(240, 150, 20);
    else
        c = bf ? QColor(40, 90, 200) : QColor(90, 160, 90);
    return c;
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

QChart* makeDeltaHistogram(SampleModel* model) {
    const RunResult& run = model->run();
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Histogram of log10 |Δ|"));
    // Bins by decade, labelled by their exponent (short labels fit a narrow view); the samples
    // with non-finite scores have no |Δ| and are counted in the legend instead.
    const int lo = -10, hi = 2;
    QStringList cats;
    for (int b = lo; b < hi; ++b) cats << QString::number(b);
    auto* series = new QBarSeries;
    int maxc = 1;
    for (const auto& c : run.comparisons) {
        std::vector<int> counts(size_t(hi - lo), 0);
        int nonfinite = 0;
        for (const auto& d : c.deltas) {
            if (!d.finite) {
                ++nonfinite;
                continue;
            }
            const int b = std::clamp(int(std::floor(std::log10(std::max(d.abs, 1e-10)))), lo, hi - 1);
            counts[size_t(b - lo)]++;
        }
        auto* set = new QBarSet(plainText(to_string(c.precision)) +
                                (nonfinite ? QStringLiteral(" (+%1 non-finite)").arg(nonfinite) : QString()));
        for (int v : counts) {
            *set << v;
            maxc = std::max(maxc, v);
        }
        series->append(set);
    }
    chart->addSeries(series);
    auto* x = new QBarCategoryAxis;
    x->append(cats);
    x->setTitleText(QStringLiteral("log10 |Δ| (decade)"));
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

/// x: the sample (row), y: |Δ| on a log axis; both follow the model (rows, plotLow/plotHigh).
template <class Model>
std::pair<QValueAxis*, QLogValueAxis*> sampleAxes(QChart* chart, Model* model) {
    auto* x = new QValueAxis;
    x->setTitleText(QStringLiteral("sample"));
    x->setLabelFormat(QStringLiteral("%d"));
    auto* y = logAxis(QStringLiteral("max |amp − ref| over scores"), model->plotLow(), model->plotHigh() * 4);
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    follow(chart, model, [model, x, y] {
        x->setRange(0, std::max<double>(1, model->rowCount()));
        y->setRange(std::max(kFloor, model->plotLow() / 2), std::max(model->plotHigh() * 8, model->plotLow() * 10));
    });
    return {x, y};
}

}  // namespace

QChart* makeDeltaChart(SampleModel* model) {
    const RunResult& run = model->run();
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Per-sample |Δ| vs FP32 reference (non-finite samples drawn at the top)"));
    const auto [x, y] = sampleAxes(chart, model);
    // One series per precision and tag: rows of that tag, x = sample index, y = that precision's |Δ|.
    std::vector<std::string> tags;
    for (const auto& smp : run.samples)
        if (std::find(tags.begin(), tags.end(), smp.tag) == tags.end()) tags.push_back(smp.tag);
    for (size_t c = 0; c < run.comparisons.size(); ++c) {
        const Precision p = run.comparisons[c].precision;
        for (const auto& tag : tags) {
            auto* s = new QScatterSeries;
            s->setName(plainText(to_string(p) + " " + tag));
            s->setMarkerSize(p == Precision::Bf16 ? 7 : 9);
            s->setMarkerShape(p == Precision::Bf16 ? QScatterSeries::MarkerShapeRectangle
                                                   : QScatterSeries::MarkerShapeCircle);
            s->setColor(tagColor(tag, p));
            s->setBorderColor(Qt::transparent);
            const int col = SampleModel::deltaColumn(int(c));
            mapSeries(
                s, rowsWhere(model, 1, QStringLiteral("^%1$").arg(QRegularExpression::escape(plainText(tag))), chart),
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
    chart->legend()->setAlignment(Qt::AlignRight);  // one entry per precision and tag: a column fits them
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
        if (hi == 0) {
            lo = 1e-3;
            hi = 1;
        }
        x->setRange(std::max(kFloor, lo / 2), std::max(hi * 2, lo * 10));
        y->setRange(std::max(kFloor, model->plotLow() / 2), std::max(model->plotHigh() * 8, model->plotLow() * 10));
    };
    follow(chart, model, ranges);
    // Per precision: samples whose decision flipped (the decision column shows "a → b"), and the rest.
    for (size_t c = 0; c < run.comparisons.size(); ++c) {
        const Precision p = run.comparisons[c].precision;
        for (bool flip : {false, true}) {
            auto* s = new QScatterSeries;
            s->setName(plainText(to_string(p)) +
                       (flip ? QStringLiteral(" flipped") : QStringLiteral(" same decision")));
            s->setMarkerSize(flip ? 11 : 6);
            s->setColor(flip ? (p == Precision::Bf16 ? QColor(150, 60, 160) : QColor(220, 50, 50))
                             : (p == Precision::Bf16 ? QColor(120, 150, 220) : QColor(150, 190, 150)));
            s->setBorderColor(Qt::transparent);
            const int col = SampleModel::deltaColumn(int(c));
            mapSeries(s,
                      rowsWhere(model, SampleModel::decisionColumn(int(c)),
                                flip ? QStringLiteral("→") : QStringLiteral("^[^→]*$"), chart),
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
    chart->setTitle(
        QStringLiteral("absmax per op, %1 pass, against the %2 limit")
            .arg(plainText(to_string(model->precision())), bf ? QStringLiteral("BF16") : QStringLiteral("FP16")));
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
    mapSeries(finite, rowsWhere(model, L::State, QStringLiteral("^$"), chart), L::MarkRole, L::Index, L::Absmax,
              L::SummaryRole);
    mapSeries(prop, rowsWhere(model, L::State, QStringLiteral("^propagated$"), chart), L::MarkRole, L::Index, L::Absmax,
              L::SummaryRole);
    mapSeries(origin, rowsWhere(model, L::State, QStringLiteral("^origin$"), chart), L::MarkRole, L::Index, L::Absmax,
              L::SummaryRole);
    attach(chart, {line, finite, prop, origin, lim}, x, y);
    return chart;
}

QChart* makeCompareChart(CompareModel* model) {
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Per-sample |Δ| of run A and run B (B: darker squares)"));
    const auto [x, y] = sampleAxes(chart, model);
    for (int col = CompareModel::kFirstDeltaColumn; col < model->columnCount(); ++col) {
        const bool b = model->side(col) == CompareModel::B;
        const Precision p = model->comparison(col)->precision;
        auto* s = new QScatterSeries;
        s->setName((b ? QStringLiteral("B ") : QStringLiteral("A ")) + plainText(to_string(p)));
        s->setMarkerShape(b ? QScatterSeries::MarkerShapeRectangle : QScatterSeries::MarkerShapeCircle);
        s->setMarkerSize(b ? 7 : 9);
        const QColor c = tagColor("ordinary", p);
        s->setColor(b ? c.darker(170) : c);
        s->setBorderColor(Qt::transparent);
        auto* rows = new RowsIf(
            model,
            [col](const QAbstractItemModel* m, int r) {
                return m->index(r, col).data(CompareModel::PlotRole).isValid();  // the run has this sample
            },
            chart);
        mapSeries(s, rows, CompareModel::PlotRole, 0, col, CompareModel::SummaryRole, col);
        attach(chart, s, x, y);
    }
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
