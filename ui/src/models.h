// SPDX-License-Identifier: MIT
#pragma once
// One item model per data shape: runs, per-sample deltas, flips, layers.

#include <QAbstractTableModel>

#include <vector>

#include "ampscope/storage/store.h"

namespace ampscope::ui {

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
    enum Roles { SortRole = Qt::UserRole };
    using QAbstractTableModel::QAbstractTableModel;
    void resetData(const RunResult& run);
    void clearData() { resetData({}); }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    RunResult run_;
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
    enum Roles { SortRole = Qt::UserRole, ModuleRole };
    using QAbstractTableModel::QAbstractTableModel;
    void resetData(const PassResult& pass);
    void clearData() { resetData({}); }
    const LayerStat* layer(int r) const;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    PassResult pass_;
};

/// log2(format max / absmax): how many doublings are left before overflow.
double headroom(const LayerStat& l, Precision p);

}  // namespace ampscope::ui
