// SPDX-License-Identifier: MIT
#pragma once
// One item model per data shape: runs, per-sample deltas, flips, layers, training steps, two
// runs compared. A live run appends to them (rows or columns) as its results arrive.

#include <QAbstractTableModel>

#include <initializer_list>
#include <utility>
#include <vector>

#include "ampscope/engine/train.h"
#include "ampscope/storage/store.h"

namespace ampscope::ui {

/// The smallest value plotted on log axes (they cannot show 0).
constexpr double kPlotFloor = 1e-12;

/// The log-scale range of the finite per-sample deltas of these runs' comparisons (floored at
/// kPlotFloor; [kPlotFloor, 1] when there are none).
std::pair<double, double> deltaPlotRange(std::initializer_list<const RunResult*> runs);

/// The common part of the table models: rows and columns of a flat table, column names (a
/// fixed list given at construction, or columns() and columnName() of a model whose columns
/// follow its data).
class TableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    explicit TableModel(QObject* parent = nullptr, QStringList names = {}) : QAbstractTableModel(parent), names_(std::move(names)) {}
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

/// The run browser's rows.
class RunListModel : public TableModel {
    Q_OBJECT
public:
    enum Columns { Started, Model, Device, Passes, Status, Verdict, Review, Notes, Id, NUM_COLUMNS };
    enum Roles { UuidRole = Qt::UserRole, SortRole };
    explicit RunListModel(QObject* parent = nullptr);
    void resetData(std::vector<storage::RunRow> rows);
    void clearData() { resetData({}); }
    /// Adds the run, or updates its row in place (a live run: started, then finished).
    void upsert(const storage::RunRow& row);
    const storage::RunRow* row(int r) const;
    /// The row of run `uuid`, or null.
    const storage::RunRow* find(const std::string& uuid) const;
    QVariant data(const QModelIndex& index, int role) const override;

protected:
    int rows() const override { return int(rows_.size()); }

private:
    std::vector<storage::RunRow> rows_;
};

/// Per-sample deltas, side by side for every AMP precision of the run.
class SampleModel : public TableModel {
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
    using TableModel::TableModel;
    void resetData(const RunResult& run);
    /// A live run: the reference pass gives the margins (the rows stay); layers are not kept.
    void addPass(const PassResult& pass);
    /// A live run: the comparison's three columns are appended.
    void addComparison(const Comparison& cmp);
    const RunResult& run() const { return run_; }
    /// Smallest and largest finite |Δ| (at least the tolerance), and where non-finite ones sit.
    double plotLow() const { return lo_; }
    double plotHigh() const { return hi_; }
    double plotTop() const { return hi_ * 3; }
    void clearData() { resetData({}); }
    QVariant data(const QModelIndex& index, int role) const override;

protected:
    int rows() const override { return int(run_.samples.size()); }
    int columns() const override { return 3 + 3 * int(run_.comparisons.size()); }
    QString columnName(int column) const override;

private:
    void computeMargins();
    void updatePlotRange();
    RunResult run_;
    std::vector<double> margin_;
    double lo_ = kPlotFloor, hi_ = 1;
};

/// Decision flips of every comparison.
class FlipModel : public TableModel {
    Q_OBJECT
public:
    /// Position: the flip's position in its sample (sequence runs; empty otherwise). In a
    /// sequence run Ref and Amp are the top-1 token ids and RefMargin the reference's top-2 margin.
    enum Columns { Precision_, Sample, Tag, Position, Ref, Amp, RefMargin, AmpMargin, NUM_COLUMNS };
    enum Roles { SortRole = Qt::UserRole };
    explicit FlipModel(QObject* parent = nullptr);
    void resetData(const RunResult& run);
    /// A live run: the comparison's flips are appended.
    void addComparison(const Comparison& cmp);
    void clearData() { resetData({}); }
    /// A comparison of the run is per position (a language model's sequence output).
    bool sequence() const { return sequence_; }
    QVariant data(const QModelIndex& index, int role) const override;

protected:
    int rows() const override { return int(rows_.size()); }
    QString columnName(int column) const override;

private:
    struct Row {
        Precision precision;
        Flip flip;
    };
    std::vector<Row> rows_;
    bool sequence_ = false;
};

/// Ops of one pass in execution order, with the origin of non-finite values marked.
class LayerModel : public TableModel {
    Q_OBJECT
public:
    enum Columns { Index, Module, Op, Dtype, Absmax, Headroom, Fp16Overflow, Fp16Subnormal, NonFinite, State, NUM_COLUMNS };
    /// PlotRole: numbers for charts (Index: the op index; Absmax: absmax, floored for log axes);
    /// MarkRole: Absmax where the layer's marker sits (non-finite ones at the top, above the
    /// format's limit); SummaryRole: one layer described in a few lines (chart tool tips).
    enum Roles { SortRole = Qt::UserRole, ModuleRole, PlotRole, MarkRole, SummaryRole };
    explicit LayerModel(QObject* parent = nullptr);
    void resetData(const PassResult& pass);
    Precision precision() const { return pass_.precision; }
    /// The largest finite value of the pass's format (FP16 for the FP32 reference).
    double formatLimit() const;
    void clearData() { resetData({}); }
    const LayerStat* layer(int r) const;
    QVariant data(const QModelIndex& index, int role) const override;

protected:
    int rows() const override { return int(pass_.layers.size()); }

private:
    PassResult pass_;
};

/// The steps of a training run (the Training view's table and charts).
class TrainingStepModel : public TableModel {
    Q_OBJECT
public:
    enum Columns { Step, LossRef, LossAmp, Scale, Skipped, Effective, GradNorm, Lr, Divergence, Underflow, Stage, Origin, NUM_COLUMNS };
    /// PlotRole: the column as a number (NaN where there is none); SummaryRole: the step in a
    /// few lines.
    enum Roles { SortRole = Qt::UserRole, PlotRole, SummaryRole };
    explicit TrainingStepModel(QObject* parent = nullptr);
    void resetData(std::vector<TrainStep> steps);
    /// A live run: the steps are appended (one insertion for the batch).
    void appendSteps(const std::vector<TrainStep>& steps);
    void clearData() { resetData({}); }
    const std::vector<TrainStep>& steps() const { return steps_; }
    /// A numeric column's value (what PlotRole gives, without a QVariant): NaN where none.
    double value(int row, int column) const;
    QVariant data(const QModelIndex& index, int role) const override;

protected:
    int rows() const override { return int(steps_.size()); }

private:
    std::vector<TrainStep> steps_;
};

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

/// log2(format max / absmax): how many doublings are left before overflow.
double headroom(const LayerStat& l, Precision p);

}  // namespace ampscope::ui
