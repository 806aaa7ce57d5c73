// SPDX-License-Identifier: MIT
#pragma once
// Per-sample deltas of a comparison run, side by side for every AMP precision.

#include <vector>

#include "ampscope/engine/run.h"
#include "tablemodel.h"

namespace ampscope::ui {

/// Per-sample deltas, side by side for every AMP precision of the run.
class SampleModel : public TableModel {
    Q_OBJECT
public:
    /// Columns: sample, tag, reference margin (top-1 minus top-2 reference score), then per
    /// AMP precision |Δ|, relative |Δ|, decision; last, for a run under torchrun, the rank that
    /// ran the sample (its device shown, its host in the tool tip).
    /// PlotRole: column 0 the sample's index, the margin and |Δ| columns values for log axes
    /// (non-finite |Δ| at plotTop()); SummaryRole on a |Δ| column: that sample in that
    /// precision in a few lines (chart tool tips).
    enum Roles { SortRole = Qt::UserRole, PlotRole, SummaryRole };
    static constexpr int kMarginColumn = 2;
    static int deltaColumn(int comparison) { return 3 + 3 * comparison; }
    static int decisionColumn(int comparison) { return 5 + 3 * comparison; }
    using TableModel::TableModel;
    void resetData(const RunResult& run);
    /// A live run: the reference pass gives the margins (the rows stay); layers are not kept.
    void addPass(const PassResult& pass);
    /// A live run: the comparison's three columns are appended.
    void addComparison(const Comparison& cmp);
    const RunResult& run() const { return run_; }
    /// Whether the run ran under torchrun (RunResult::ranks): then the last column is the rank.
    bool hasRanks() const { return !run_.ranks.empty(); }
    /// The rank column, or -1 when the run has no ranks.
    int rankColumn() const { return hasRanks() ? columns() - 1 : -1; }
    /// Smallest and largest finite |Δ| (at least the tolerance), and where non-finite ones sit.
    double plotLow() const { return lo_; }
    double plotHigh() const { return hi_; }
    double plotTop() const { return hi_ * 3; }
    void clearData() { resetData({}); }
    QVariant data(const QModelIndex& index, int role) const override;

protected:
    int rows() const override { return int(run_.samples.size()); }
    int columns() const override { return 3 + 3 * int(run_.comparisons.size()) + (hasRanks() ? 1 : 0); }
    QString columnName(int column) const override;

private:
    void computeMargins();
    void updatePlotRange();
    QVariant rankData(size_t sample, int role) const;
    RunResult run_;
    std::vector<int> rankOf_;  ///< per sample, its index in run_.ranks (-1: none)
    std::vector<double> margin_;
    double lo_ = kPlotFloor, hi_ = 1;
};

}  // namespace ampscope::ui
