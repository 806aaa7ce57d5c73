// SPDX-License-Identifier: MIT
#pragma once
// What the table models have in common: TableModel (rows, columns and their names), the
// floor of log axes, and the colours of cells that are bad or good news.

#include <QAbstractTableModel>
#include <QColor>
#include <QStringList>

#include <initializer_list>
#include <utility>

#include "ampscope/engine/run.h"

namespace ampscope::ui {

/// The smallest value plotted on log axes (they cannot show 0).
constexpr double kPlotFloor = 1e-12;

/// The log-scale range of the finite per-sample deltas of these runs' comparisons (floored at
/// kPlotFloor; [kPlotFloor, 1] when there are none).
std::pair<double, double> deltaPlotRange(std::initializer_list<const RunResult*> runs);

/// The foreground of a cell that is bad news (out of tolerance, non-finite, failed) or good news (accepted).
inline QColor badColor() {
    return QColor(200, 40, 40);
}
inline QColor goodColor() {
    return QColor(30, 140, 60);
}

/// The common part of the table models: rows and columns of a flat table, column names (a
/// fixed list given at construction, or columns() and columnName() of a model whose columns
/// follow its data).
class TableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    explicit TableModel(QObject* parent = nullptr, QStringList names = {})
        : QAbstractTableModel(parent), names_(std::move(names)) {}
    int rowCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : rows(); }
    int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : columns(); }
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

protected:
    virtual int rows() const = 0;
    virtual int columns() const { return int(names_.size()); }
    virtual QString columnName(int column) const { return names_[column]; }

private:
    QStringList names_;
};

}  // namespace ampscope::ui
