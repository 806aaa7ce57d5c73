// SPDX-License-Identifier: MIT
// The Advise dialog's sensitivity chart: one point per module and precision, in execution order.
#include <QCategoryAxis>
#include <QChart>
#include <QScatterSeries>
#include <QValueAxis>

#include <cmath>
#include <map>

#include "advisemodel.h"
#include "chartparts.h"
#include "charts.h"

namespace ampscope::ui {

using namespace parts;

namespace {

QColor precisionColor(Precision p) {
    return p == Precision::Bf16 ? QColor(40, 90, 200) : QColor(240, 150, 20);
}

QScatterSeries* scatter(const QString& name, const QColor& colour, QScatterSeries::MarkerShape shape, double size) {
    auto* s = new QScatterSeries;
    s->setName(name);
    s->setColor(colour);
    s->setBorderColor(colour.darker(130));
    s->setMarkerShape(shape);
    s->setMarkerSize(size);
    return s;
}

/// x axis: the modules' names at their execution order.
QCategoryAxis* moduleAxis(const SensitivityModel* model) {
    std::map<int, QString> names;
    for (const auto& s : model->rowsData()) names[s.order] = s.module.empty() ? QStringLiteral("(root)") : QString::fromStdString(s.module);
    auto* x = new QCategoryAxis;
    x->setTitleText(QStringLiteral("module (execution order)"));
    x->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
    x->setLabelsAngle(-60);
    for (const auto& [order, name] : names) x->append(name, order);
    const int last = names.empty() ? 1 : names.rbegin()->first;
    x->setRange(-0.5, last + 0.5);
    return x;
}

}  // namespace

QChart* makeSensitivityChart(SensitivityModel* model) {
    QChart* chart = titled(QStringLiteral("Sensitivity: SQNR of each module alone under autocast (lower is worse)"));
    std::map<Precision, QScatterSeries*> byPrecision;
    auto* clipped =
        scatter(QStringLiteral("+inf (no error; clipped to the top)"), QColor(120, 120, 120), QScatterSeries::MarkerShapeTriangle, 11);
    auto* lost = scatter(QStringLiteral("-inf / NaN (nothing left of the signal; clipped to the bottom)"), QColor(90, 20, 20),
                         QScatterSeries::MarkerShapeStar, 13);
    auto* origins = scatter(QStringLiteral("origin of non-finite values"), QColor(220, 30, 30), QScatterSeries::MarkerShapeRectangle, 15);
    std::map<QScatterSeries*, std::vector<int>> tips;  // per series, the model rows of its points (tool tips)
    for (int r = 0; r < model->rowCount(); ++r) {
        const auto& s = model->row(r);
        auto*& series = byPrecision[s.precision];
        if (!series)
            series =
                scatter(QString::fromStdString(to_string(s.precision)), precisionColor(s.precision), QScatterSeries::MarkerShapeCircle, 9);
        const QPointF p(s.order, model->plotted(s));
        QScatterSeries* bound = std::isfinite(s.sqnr_db) ? nullptr : s.sqnr_db > 0 ? clipped : lost;
        for (auto* target : {series, bound, s.origin ? origins : nullptr})
            if (target) target->append(p), tips[target].push_back(r);
    }
    auto* x = moduleAxis(model);
    auto* y = new QValueAxis;
    y->setTitleText(QStringLiteral("SQNR dB"));
    y->setRange(model->plotBottom(), model->plotTop());
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    std::vector<QScatterSeries*> all;
    for (const auto& [p, s] : byPrecision) all.push_back(s);
    for (auto* s : {origins, clipped, lost})
        if (s->count() > 0)
            all.push_back(s);
        else
            delete s;
    for (auto* s : all) {
        attach(chart, s, x, y);
        tipOnHover(s, [model, rows = tips[s]](qsizetype i) {
            return i < qsizetype(rows.size()) && rows[size_t(i)] < model->rowCount()
                       ? model->index(rows[size_t(i)], 0).data(SensitivityModel::SummaryRole).toString()
                       : QString();
        });
    }
    return chart;
}

}  // namespace ampscope::ui
