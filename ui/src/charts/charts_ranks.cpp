// SPDX-License-Identifier: MIT
// The per-rank time of a run under torchrun: horizontal bars, one row per rank from the top,
// each labelled with the rank, its host's short name (up to the first dot) and device, its
// length the wall time of the rank's passes. The chart grows with its rows (kRowPixels each)
// when there are many ranks.
#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QHorizontalBarSeries>
#include <QValueAxis>

#include <algorithm>

#include "chartparts.h"
#include "charts.h"
#include "samplemodel.h"
#include "uitext.h"

namespace ampscope::ui {

using namespace parts;

namespace {
constexpr int kRowPixels = 28;      ///< per rank
constexpr int kChromePixels = 170;  ///< title, x axis, legend and margins
}  // namespace

QChart* makeRankChart(SampleModel* model) {
    auto* c = titled(QStringLiteral("Time per rank (torchrun)"));
    const auto& ranks = model->run().ranks;
    auto* set = new QBarSet(QStringLiteral("seconds of the rank's passes"));
    set->setColor(QColor(40, 90, 200));
    QStringList labels;
    double most = 0;
    for (auto it = ranks.rbegin(); it != ranks.rend(); ++it) {  // categories run bottom-up: rank 0 on top
        *set << it->seconds;
        most = std::max(most, it->seconds);
        const auto host = it->host.substr(0, it->host.find('.'));  // the short name: the axis has little room
        labels << QStringLiteral("rank %1 · %2 · %3").arg(it->rank).arg(storedText(host), storedText(it->device));
    }
    auto* series = new QHorizontalBarSeries;
    series->append(set);
    series->setBarWidth(0.6);
    auto* y = new QBarCategoryAxis;
    y->append(labels);
    auto* x = new QValueAxis;
    x->setTitleText(QStringLiteral("seconds"));
    x->setRange(0, most > 0 ? most * 1.1 : 1);
    x->setLabelFormat(QStringLiteral("%.3g"));
    c->setProperty(kMinHeightProperty, std::max(kMinChartHeight, kChromePixels + kRowPixels * int(ranks.size())));
    c->addAxis(x, Qt::AlignBottom);
    c->addAxis(y, Qt::AlignLeft);
    return attach(c, {series}, x, y);
}

}  // namespace ampscope::ui
