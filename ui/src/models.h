// SPDX-License-Identifier: MIT
#pragma once
// One item model per data shape: runs, per-sample deltas, flips, layers.

#include <QAbstractTableModel>

#include <vector>

#include "ampscope/engine/train.h"
#include "ampscope/storage/store.h"

namespace ampscope::ui {

/// The smallest value plotted on log axes (they cannot show 0).
constexpr double kPlotFloor = 1e-12;

/// The run browser's rows.
class RunListModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Columns { Started, Model, Device, Passes, Status, Verdict, Review, Notes, Id, NUM_COLUMNS };
    enum Roles { UuidRole = Qt::UserRole, SortRole };
    using QAbstractTableModel::QAbstractTableModel;
    void resetData(std::vector<storage::RunRow> rows);
    void clearData() { resetData({}); }
    const storage::RunRow* row(int r) const;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    std::vector<storage::RunRow> rows_;
};

/// Per-sample deltas, side by side for every AMP precision of the run.
class SampleModel : public QAbstractTableModel {
    Q_OBJECT
public:
    /// Columns: sample, tag, reference margin (top-1 minus top-2 reference score), then per
    /// AMP precision |Δ|, relative |Δ|, decision.
    /// PlotRole: column 0 the sample's index, the margin and |Δ| columns values for log axes
    /// (non-finite |Δ| at plotTop()); SummaryRole on a |Δ| column: that sample in that
    /// precision in a few lines (chart tool tips).
    enum Roles { SortRole = Qt::UserRole, PlotRole, SummaryRole };
    static constexpr int kMarginColumn = 2;
    static int deltaColumn(int comparison) { return 3 + 3 * comparison; }
    static int decisionColumn(int comparison) { return 5 + 3 * comparison; }
    using QAbstractTableModel::QAbstractTableModel;
    void resetData(const RunResult& run);
    const RunResult& run() const { return run_; }
    /// Smallest and largest finite |Δ| (at least the tolerance), and where non-finite ones sit.
    double plotLow() const { return lo_; }
    double plotHigh() const { return hi_; }
    double plotTop() const { return hi_ * 3; }
    void clearData() { resetData({}); }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    RunResult run_;
    std::vector<double> margin_;
    double lo_ = kPlotFloor, hi_ = 1;
};

/// Decision flips of every comparison.
class FlipModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Columns { Precision_, Sample, Tag, Ref, Amp, RefMargin, AmpMargin, NUM_COLUMNS };
    enum Roles { SortRole = Qt::UserRole };
    using QAbstractTableModel::QAbstractTableModel;
    void resetData(const RunResult& run);
    void clearData() { resetData({}); }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    struct Row { Precision precision; Flip flip; };
    std::vector<Row> rows_;
};

/// Ops of one pass in execution order, with the origin of non-finite values marked.
class LayerModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Columns { Index, Module, Op, Dtype, Absmax, Headroom, Fp16Overflow, Fp16Subnormal, NonFinite, State, NUM_COLUMNS };
    /// PlotRole: numbers for charts (Index: the op index; Absmax: absmax, floored for log axes);
    /// MarkRole: Absmax where the layer's marker sits (non-finite ones at the top, above the
    /// format's limit); SummaryRole: one layer described in a few lines (chart tool tips).
    enum Roles { SortRole = Qt::UserRole, ModuleRole, PlotRole, MarkRole, SummaryRole };
    using QAbstractTableModel::QAbstractTableModel;
    void resetData(const PassResult& pass);
    Precision precision() const { return pass_.precision; }
    /// The largest finite value of the pass's format (FP16 for the FP32 reference).
    double formatLimit() const;
    void clearData() { resetData({}); }
    const LayerStat* layer(int r) const;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    PassResult pass_;
};

/// The steps of a training run (the Training view's table and charts).
class TrainingStepModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Columns { Step, LossRef, LossAmp, Scale, Skipped, Effective, GradNorm, Lr, Divergence, Underflow, Stage, Origin, NUM_COLUMNS };
    /// PlotRole: the column as a number (NaN where there is none); SummaryRole: the step in a
    /// few lines.
    enum Roles { SortRole = Qt::UserRole, PlotRole, SummaryRole };
    using QAbstractTableModel::QAbstractTableModel;
    void resetData(std::vector<TrainStep> steps);
    void clearData() { resetData({}); }
    const std::vector<TrainStep>& steps() const { return steps_; }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    std::vector<TrainStep> steps_;
};

/// log2(format max / absmax): how many doublings are left before overflow.
double headroom(const LayerStat& l, Precision p);

}  // namespace ampscope::ui
