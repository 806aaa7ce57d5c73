// SPDX-License-Identifier: MIT
#pragma once
// What a rendered chart shows where: a series' marker colour at the pixel its data point maps
// to (through the chart's axes and the view), read back from the rendered view. A blank
// render, points at the wrong place (axes, mapping) or another series' colour fail it; a
// window that merely has many colours (text, frames) does not pass it.
#include <QChart>
#include <QChartView>
#include <QImage>
#include <QScatterSeries>
#include <QString>
#include <QXYSeries>

#include <algorithm>
#include <cstdlib>

namespace chart_probe {

inline QXYSeries* series(QChart* chart, const QString& name) {
    for (auto* s : chart->series())
        if (s->name() == name) return qobject_cast<QXYSeries*>(s);
    return nullptr;
}

inline bool near(QColor a, QColor b, int tol = 12) {
    return std::abs(a.red() - b.red()) <= tol && std::abs(a.green() - b.green()) <= tol &&
           std::abs(a.blue() - b.blue()) <= tol;
}

/// The rendered viewport of `view` (what the user sees of the chart).
inline QImage render(QChartView* view) {
    return view->viewport()->grab().toImage();
}

/// The colour drawn where `p` of `s` maps to, in `img` (a render of `view`).
inline QColor colourAt(const QImage& img, QChartView* view, QXYSeries* s, QPointF p) {
    const QPoint at = view->mapFromScene(view->chart()->mapToPosition(p, s));
    if (!img.rect().contains(at)) return {};
    return img.pixelColor(at);
}

inline int distance(QColor a, QColor b) {
    return std::max({std::abs(a.red() - b.red()), std::abs(a.green() - b.green()), std::abs(a.blue() - b.blue())});
}

/// True when a pixel within `radius` of `at` is within `tol` of `c`.
inline bool shownNear(const QImage& img, QPoint at, QColor c, int tol = 24, int radius = 2) {
    for (int dy = -radius; dy <= radius; ++dy)
        for (int dx = -radius; dx <= radius; ++dx) {
            const QPoint q = at + QPoint(dx, dy);
            if (img.rect().contains(q) && distance(img.pixelColor(q), c) <= tol) return true;
        }
    return false;
}

/// True when `s` (scatter markers or a line) shows its own colour at the place of at least one
/// of its points; `why` says what was seen otherwise.
inline bool drawnAtItsPoints(const QImage& img, QChartView* view, QXYSeries* s, QString* why) {
    const auto pts = s->points();
    auto at = [&](QPointF p) { return QPointF(view->mapFromScene(view->chart()->mapToPosition(p, s))); };
    const bool line = s->type() == QAbstractSeries::SeriesTypeLine;
    // markers: their colour; a thin antialiased line: at least half-way from the background to its colour
    const int tol = line ? std::max(24, distance(view->chart()->backgroundBrush().color(), s->color()) / 2) : 24;
    for (const auto& p : pts)
        if (shownNear(img, at(p).toPoint(), s->color(), tol)) return true;
    // a line (dashed ones included) also along its segments, where the plot's edge does not clip it
    if (line)
        for (qsizetype i = 1; i < pts.size(); ++i)
            for (int k = 1; k < 10; ++k)
                if (shownNear(img, (at(pts[i - 1]) + (at(pts[i]) - at(pts[i - 1])) * (k / 10.0)).toPoint(), s->color(),
                              tol))
                    return true;
    if (why) {
        *why = QStringLiteral("series '%1' (%2 points, colour %3): seen %4 at its first point")
                   .arg(s->name())
                   .arg(pts.size())
                   .arg(s->color().name())
                   .arg(pts.isEmpty() ? QStringLiteral("-") : colourAt(img, view, s, pts[0]).name());
    }
    return false;
}

/// Every visible series of `view` with points (markers and lines) is drawn at one of its
/// points, and there is at least one.
inline bool everySeriesDrawn(QChartView* view, QString* why) {
    const QImage img = render(view);
    int checked = 0;
    for (auto* a : view->chart()->series()) {
        auto* s = qobject_cast<QXYSeries*>(a);
        if (!s || !s->isVisible() || s->count() == 0) continue;
        if (!drawnAtItsPoints(img, view, s, why)) return false;
        ++checked;
    }
    if (checked == 0 && why) *why = view->chart()->title() + QStringLiteral(": no series with points");
    return checked > 0;
}

}  // namespace chart_probe
