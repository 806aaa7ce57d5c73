// SPDX-License-Identifier: MIT
// The replay view's charts of one side (the original or the remedy): per module, the FP32
// reference's and the AMP forward's absmax against the format's limit with the first
// non-finite module marked (as the Layers view's chart), and per parameter the AMP step's
// gradient and update departures from the reference. The loss and the scale per step are the
// Training view's charts (makeLossChart, makeScaleChart over ReplayTrainingModel). Built
// anew when the model is reset (ChartWidget); values that are not finite are drawn at the top.
#include <QChart>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPen>
#include <QScatterSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "ampscope/engine/rules.h"
#include "chartparts.h"
#include "charts.h"
#include "replaymodel.h"
#include "uitext.h"

namespace ampscope::ui {

using namespace parts;

namespace {

using Value = std::function<std::optional<double>(int row)>;

/// Points (row, value(row)) of the rows with a value; the hovered point shows `tip(row)`.
void fillRows(QXYSeries* s, const QAbstractItemModel* model, const Value& value, std::function<QString(int)> tip) {
    auto rows = std::make_shared<std::vector<int>>();
    for (int r = 0; r < model->rowCount(); ++r)
        if (const auto v = value(r)) {
            s->append(r, *v);
            rows->push_back(r);
        }
    tipOnHover(s, [model, rows, tip = std::move(tip)](qsizetype i) {
        return size_t(i) < rows->size() && (*rows)[size_t(i)] < model->rowCount() ? tip((*rows)[size_t(i)]) : QString();
    });
}

/// `v` on a log axis: finite values floored at kPlotFloor, none for the others.
std::optional<double> logValue(double v) {
    return std::isfinite(v) ? std::optional<double>(std::max(v, kPlotFloor)) : std::nullopt;
}

/// A line through the rows' values with a marker at each (a replay has few modules), `width`
/// pixels wide (the FP32 line wider than the AMP line drawn over it: both seen where they meet).
QLineSeries* pointedLine(const QString& name, const QColor& colour, int width) {
    auto* s = new QLineSeries;
    s->setName(name);
    QPen pen(colour);
    pen.setWidth(width);
    s->setPen(pen);
    s->setPointsVisible(true);
    return s;
}

/// The x axis of rows in order, titled `title`, and the log y axis `[lo/2, top*2]`.
std::pair<QValueAxis*, QLogValueAxis*> rowAxes(QChart* chart, const QString& title, int rows, const QString& yTitle,
                                               double lo, double top) {
    auto* x = new QValueAxis;
    x->setTitleText(title);
    x->setLabelFormat(QStringLiteral("%d"));
    x->setRange(-1, std::max(1, rows));
    x->setTickType(QValueAxis::TicksDynamic);  // ticks on rows (whole numbers), at most about 8 of them
    x->setTickAnchor(0);
    x->setTickInterval(std::max(1, (rows + 7) / 8));
    auto* y = logAxis(yTitle, lo, top);
    const double bottom = std::max(kPlotFloor, lo / 2);
    y->setRange(bottom, top * 2);
    // a tick per decade up to 8 decades; beyond (BF16's limit is 1e38), a tick every few decades
    y->setBase(std::pow(10.0, std::ceil(std::log10(top * 2 / bottom) / 8)));
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    return {x, y};
}

/// Adds `s` when it has points (a legend entry for nothing would only take room); else deletes it.
void attachIfAny(QChart* chart, QXYSeries* s, QAbstractAxis* x, QAbstractAxis* y) {
    if (s->count() > 0)
        attach(chart, s, x, y);
    else
        delete s;
}

QString moduleName(const ReplayLayer& l) {
    return l.module.empty() ? QStringLiteral("(root)") : storedText(l.module);
}

}  // namespace

QChart* makeReplayLayerChart(ReplayLayerModel* model) {
    const ReplayResult& r = model->replay();
    const Precision format = headroom_format(r.spec.precision);
    const double limit = format_max(format);
    const QString formatName = storedText(to_string(format)).toUpper();
    auto* chart = titled(QStringLiteral("absmax per module vs the %1 limit").arg(formatName));
    double lo = limit, hi = limit;
    for (int row = 0; row < model->rowCount(); ++row)
        for (double v : {model->layer(row).ref_absmax, model->layer(row).amp_absmax})
            if (std::isfinite(v)) {
                lo = std::min(lo, std::max(v, kPlotFloor));
                hi = std::max(hi, v);
            }
    const double top = hi * 2;  // where non-finite values are drawn
    const auto [x, y] = rowAxes(chart, QStringLiteral("module (execution order)"), model->rowCount(),
                                QStringLiteral("absmax"), lo, top);
    const int first = model->firstNonFiniteRow();
    auto tip = [model, first](int row) {
        const ReplayLayer& l = model->layer(row);
        return QStringLiteral("#%1 %2 (%3)\nFP32 absmax %4, AMP absmax %5\nAMP non-finite %6, FP16 overflow %7%8")
            .arg(row)
            .arg(moduleName(l), storedText(l.op), replayNumber(l.ref_absmax), replayNumber(l.amp_absmax))
            .arg(l.amp_nonfinite)
            .arg(l.amp_fp16_overflow)
            .arg(row == first ? QStringLiteral("\nthe first non-finite stage is in this module") : QString());
    };
    auto ampValue = [model, top](int row) {
        const ReplayLayer& l = model->layer(row);
        return std::isfinite(l.amp_absmax) && l.amp_nonfinite == 0 ? logValue(l.amp_absmax)
                                                                   : std::optional<double>(top);
    };
    auto* ref = pointedLine(QStringLiteral("FP32"), QColor(40, 90, 200), 6);
    fillRows(
        ref, model, [model](int row) { return logValue(model->layer(row).ref_absmax); }, tip);
    auto* amp = pointedLine(QStringLiteral("AMP"), QColor(240, 150, 20), 2);
    fillRows(
        amp, model, [model](int row) { return logValue(model->layer(row).amp_absmax); }, tip);
    auto* lost = markers(QStringLiteral("non-finite"), QColor(240, 150, 20), QScatterSeries::MarkerShapeTriangle, 11);
    fillRows(
        lost, model,
        [model, top](int row) {
            const ReplayLayer& l = model->layer(row);
            return std::isfinite(l.amp_absmax) && l.amp_nonfinite == 0 ? std::nullopt : std::optional<double>(top);
        },
        tip);
    auto* origin =
        markers(QStringLiteral("first NaN/Inf"), QColor(220, 30, 30), QScatterSeries::MarkerShapeRectangle, 14);
    fillRows(
        origin, model, [first, ampValue](int row) { return row == first ? ampValue(row) : std::nullopt; }, tip);
    auto* lim = new QLineSeries;
    lim->setName(formatName + QStringLiteral(" max"));
    QPen pen(Qt::DashLine);
    pen.setColor(QColor(200, 40, 40));
    lim->setPen(pen);
    lim->append({QPointF(-1, limit), QPointF(std::max(1, model->rowCount()), limit)});
    attach(chart, {ref, amp}, x, y);
    attachIfAny(chart, lost, x, y);
    attachIfAny(chart, origin, x, y);
    attach(chart, lim, x, y);
    for (auto* m : chart->legend()->markers(lost))
        m->setVisible(false);  // the legend fits a narrow chart; the tool tip says
    return chart;
}

QChart* makeReplayParamChart(ReplayParamModel* model) {
    auto* chart = titled(QStringLiteral("AMP vs FP32 step, per parameter"));
    double lo = 1e300, hi = 0;
    for (int row = 0; row < model->rowCount(); ++row)
        for (double v : {model->param(row).grad_rel, model->param(row).update_rel})
            if (std::isfinite(v)) {
                lo = std::min(lo, std::max(v, kPlotFloor));
                hi = std::max(hi, v);
            }
    if (lo > hi) {
        lo = 1e-6;
        hi = 1;
    }
    const double top = std::max(hi * 4, lo * 10);  // where non-finite values are drawn
    const auto [x, y] = rowAxes(chart, QStringLiteral("parameter (model order)"), model->rowCount(),
                                QStringLiteral("relative difference"), lo, top);
    auto tip = [model](int row) {
        const ReplayParam& p = model->param(row);
        return QStringLiteral("%1\ngradient ‖g_amp − g_ref‖ / ‖g_ref‖ %2\nupdate ‖Δw_amp − Δw_ref‖ / ‖Δw_ref‖ %3%4%5")
            .arg(storedText(p.name), replayNumber(p.grad_rel), replayNumber(p.update_rel),
                 p.grad_finite ? QString() : QStringLiteral("\nAMP gradient not finite"),
                 p.update_finite ? QString() : QStringLiteral("\nAMP weights not finite after the step"));
    };
    auto* grad = markers(QStringLiteral("gradient"), QColor(40, 90, 200), QScatterSeries::MarkerShapeCircle, 10);
    fillRows(
        grad, model, [model](int row) { return logValue(model->param(row).grad_rel); }, tip);
    auto* update = markers(QStringLiteral("update"), QColor(240, 150, 20), QScatterSeries::MarkerShapeRectangle, 8);
    fillRows(
        update, model, [model](int row) { return logValue(model->param(row).update_rel); }, tip);
    auto* lost = markers(QStringLiteral("non-finite"), QColor(220, 30, 30), QScatterSeries::MarkerShapeTriangle, 11);
    fillRows(
        lost, model,
        [model, top](int row) {
            const ReplayParam& p = model->param(row);
            const bool finite =
                std::isfinite(p.grad_rel) && std::isfinite(p.update_rel) && p.grad_finite && p.update_finite;
            return finite ? std::nullopt : std::optional<double>(top);
        },
        tip);
    attach(chart, {grad, update}, x, y);
    attachIfAny(chart, lost, x, y);
    return chart;
}

}  // namespace ampscope::ui
