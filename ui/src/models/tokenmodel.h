// SPDX-License-Identifier: MIT
#pragma once
// A sequence run (a language model's output [N, T, V], compared per position): the positions
// of one sample in one AMP comparison, with KL(ref || amp), the flips at their positions (token
// ids) and the positions the mask excluded. The Tokens view's table and chart read it.

#include <QString>

#include <vector>

#include "ampscope/engine/run.h"
#include "tablemodel.h"

class QChart;

namespace ampscope::ui {

class TokenModel : public TableModel {
    Q_OBJECT
public:
    enum Columns { Position, Kld, State, RefToken, AmpToken, RefMargin, NUM_COLUMNS };
    /// PlotRole: Position the position, Kld the KL divergence for a log axis (floored at
    /// plotLow(); excluded positions at plotBottom()); SummaryRole: the position in a few lines
    /// (chart tool tips).
    enum Roles { SortRole = Qt::UserRole, PlotRole, SummaryRole };
    explicit TokenModel(QObject* parent = nullptr);
    /// The run's sequence comparisons; the choice of comparison and sample is kept while the
    /// run still has them, else the first sequence comparison and its sample with most flips.
    void resetData(const RunResult& run);
    void clearData() { resetData({}); }
    /// Shows sample `sample` of comparison `comparison` (indices into the run's vectors).
    void select(int comparison, int sample);
    const RunResult& run() const { return run_; }
    int comparison() const { return comparison_; }
    int sample() const { return sample_; }
    /// Indices of the run's comparisons that have per-token figures.
    std::vector<int> sequenceComparisons() const;
    /// Flips of comparison `comparison` at sample `sample`.
    int flipsOf(int comparison, int sample) const;
    const TokenStats* tokens() const;
    /// The sample's finite KL divergences: the smallest (floored) and largest, for a log axis.
    double plotLow() const { return lo_; }
    double plotHigh() const { return hi_; }
    /// Where excluded positions are drawn: below every compared one.
    double plotBottom() const { return lo_ / 4; }
    bool excluded(int row) const;
    bool flipped(int row) const;
    QVariant data(const QModelIndex& index, int role) const override;

protected:
    int rows() const override;

private:
    const Flip* flipAt(int position) const;
    const BoundaryPosition* boundaryAt(int position) const;
    double kld(int row) const;
    QString summary(int row) const;
    QVariant display(int row, int column) const;
    void updatePlotRange();
    RunResult run_;
    int comparison_ = -1, sample_ = -1;
    double lo_ = kPlotFloor, hi_ = 1;
};

/// KL(ref || amp) along the sequence of the model's sample: a line over the compared positions,
/// flips marked, positions excluded by the mask (or not finite) marked at the bottom.
QChart* makeTokenChart(TokenModel* model);

}  // namespace ampscope::ui
