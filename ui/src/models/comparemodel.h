// SPDX-License-Identifier: MIT
#pragma once
// Two comparison runs side by side, one row per sample.

#include <vector>

#include "ampscope/engine/run.h"
#include "tablemodel.h"

namespace ampscope::ui {

/// Two comparison runs side by side, one row per sample (matched by sample id: A's samples,
/// then those only B has): |Δ| of each AMP precision of run A, then of run B.
/// PlotRole: column 0 the row index, a |Δ| column the value for log axes (non-finite at the
/// top; none where the run has no such sample); SummaryRole on a |Δ| column: that sample.
class CompareModel : public TableModel {
    Q_OBJECT
public:
    enum Roles { SortRole = Qt::UserRole, PlotRole, SummaryRole };
    enum Side { A, B };
    static constexpr int kFirstDeltaColumn = 2;
    using TableModel::TableModel;
    void resetData(const RunResult& a, const RunResult& b);
    void clearData() { resetData({}, {}); }
    const RunResult& run(Side side) const { return side == A ? a_ : b_; }
    /// The run and comparison shown in a |Δ| column.
    Side side(int column) const;
    const Comparison* comparison(int column) const;
    double plotLow() const { return lo_; }
    double plotHigh() const { return hi_; }
    QVariant data(const QModelIndex& index, int role) const override;

protected:
    int rows() const override { return int(rows_.size()); }
    int columns() const override;
    QString columnName(int column) const override;

private:
    struct Row {
        int a = -1, b = -1;
    };  ///< sample index in each run, -1 when absent
    const SampleDelta* delta(int row, int column) const;
    RunResult a_, b_;
    std::vector<Row> rows_;
    double lo_ = kPlotFloor, hi_ = 1;
};

}  // namespace ampscope::ui
