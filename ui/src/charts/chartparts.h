// SPDX-License-Identifier: MIT
#pragma once
// Parts the chart builders share (internal to charts*.cpp): axes, series fed by a model, and
// how a chart follows its model.

#include <QAbstractItemModel>
#include <QScatterSeries>
#include <QSortFilterProxyModel>

#include <functional>
#include <vector>

class QAbstractAxis;
class QAbstractSeries;
class QChart;
class QLogValueAxis;
class QXYSeries;

namespace ampscope::ui::parts {

QLogValueAxis* logAxis(const QString& title, double lo, double hi);
void attach(QChart* c, QAbstractSeries* s, QAbstractAxis* x, QAbstractAxis* y);
/// Adds each series on the axes x and y; returns the chart.
QChart* attach(QChart* c, std::initializer_list<QAbstractSeries*> series, QAbstractAxis* x, QAbstractAxis* y);
/// A new chart with `title`.
QChart* titled(const QString& title);
/// A series of markers named `name`: `shape`, `size` pixels, filled with `colour`, its border a little darker.
QScatterSeries* markers(const QString& name, const QColor& colour, QScatterSeries::MarkerShape shape, double size);

/// Series points = rows of `rows` (x and y columns through `role`), kept in step with the
/// model by a QVXYModelMapper; the hovered point shows the row's `summaryRole`.
void mapSeries(QXYSeries* s, QAbstractItemModel* rows, int role, int x, int y, int summaryRole, int summaryColumn = 0);
/// On hover of `s`, the tool tip of the point nearest the cursor: `tip(point index)`.
void tipOnHover(QXYSeries* s, std::function<QString(qsizetype)> tip);

/// Calls `update` now, when the model is reset, and after rows were appended (coalesced: at
/// most once per kLiveRefreshMs, so that a live run's appends cost one update per batch). The
/// appended-rows updates of all charts go through one queue that runs one chart's update per
/// event-loop turn (its repaint comes before the next one's update), so that charts that follow
/// the same model do not refresh and repaint in one long turn.
void follow(QChart* chart, QAbstractItemModel* model, std::function<void()> update);

/// Runs `work` in a later event-loop turn, through the queue of follow()'s updates (one piece
/// of work per turn); not when `owner` is gone by then, once when enqueued again while waiting.
void inLaterTurn(QObject* owner, std::function<void()> work);

/// The points of `pts` (x ascending) a line needs to draw them on `columns` pixel columns (the
/// x range first..last split in `columns` equal parts): per column its minimum and maximum, in x
/// order; the first and the last point; and every point `marked` (e.g. skipped steps). Indices
/// into `pts`, ascending; all of them when there are at most 2 per column.
std::vector<qsizetype> thinToColumns(const QList<QPointF>& pts, int columns, const std::vector<bool>& marked = {});

/// Rows of `model` whose `column` matches `regex`.
QSortFilterProxyModel* rowsWhere(QAbstractItemModel* model, int column, const QString& regex, QObject* parent);

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

}  // namespace ampscope::ui::parts
