// SPDX-License-Identifier: MIT
// The Tokens view's chart: KL(ref || amp) along one sample's sequence, flips and excluded
// positions marked.
#include <QChart>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QValueAxis>

#include <algorithm>

#include "chartparts.h"
#include "charts.h"
#include "tokenmodel.h"

namespace ampscope::ui {

using namespace parts;

namespace {

QString chartTitle(const TokenModel* model) {
    const RunResult& run = model->run();
    if (model->comparison() < 0 || model->sample() < 0) return QStringLiteral("KL divergence per position");
    return QStringLiteral("KL(ref ‖ amp) per position: sample %1, %2")
        .arg(QString::fromStdString(run.samples[size_t(model->sample())].id),
             QString::fromStdString(to_string(run.comparisons[size_t(model->comparison())].precision)));
}

}  // namespace

QChart* makeTokenChart(TokenModel* model) {
    QChart* chart = titled(chartTitle(model));
    auto* x = new QValueAxis;
    x->setTitleText(QStringLiteral("position"));
    x->setLabelFormat(QStringLiteral("%d"));
    auto* y = logAxis(QStringLiteral("KL(ref ‖ amp)"), model->plotBottom() / 2, model->plotHigh() * 4);
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    follow(chart, model, [model, x, y] {
        x->setRange(-0.5, std::max(1.0, model->rowCount() - 0.5));
        y->setRange(model->plotBottom() / 2, model->plotHigh() * 4);
    });
    using T = TokenModel;
    auto* line = new QLineSeries;
    line->setName(QStringLiteral("compared positions"));
    line->setColor(QColor(40, 90, 200));
    auto* points = markers(QStringLiteral("KL"), QColor(40, 90, 200), QScatterSeries::MarkerShapeCircle, 6);
    auto* flips = markers(QStringLiteral("flip (top-1 token changed)"), QColor(220, 30, 30),
                          QScatterSeries::MarkerShapeRectangle, 12);
    auto* excluded = markers(QStringLiteral("excluded (masked; at the bottom)"), QColor(150, 150, 150),
                             QScatterSeries::MarkerShapeTriangle, 9);
    auto* compared = new RowsIf(
        model, [](const QAbstractItemModel* m, int r) { return !static_cast<const TokenModel*>(m)->excluded(r); },
        chart);
    mapSeries(line, compared, T::PlotRole, T::Position, T::Kld, T::SummaryRole, T::Kld);
    mapSeries(points, compared, T::PlotRole, T::Position, T::Kld, T::SummaryRole, T::Kld);
    mapSeries(
        flips,
        new RowsIf(
            model, [](const QAbstractItemModel* m, int r) { return static_cast<const TokenModel*>(m)->flipped(r); },
            chart),
        T::PlotRole, T::Position, T::Kld, T::SummaryRole, T::Kld);
    mapSeries(
        excluded,
        new RowsIf(
            model, [](const QAbstractItemModel* m, int r) { return static_cast<const TokenModel*>(m)->excluded(r); },
            chart),
        T::PlotRole, T::Position, T::Kld, T::SummaryRole, T::Kld);
    attach(chart, {line, points, flips, excluded}, x, y);
    points->setPointLabelsVisible(false);
    chart->legend()->markers(points).value(0)->setVisible(false);  // the line names the compared positions
    return chart;
}

}  // namespace ampscope::ui
