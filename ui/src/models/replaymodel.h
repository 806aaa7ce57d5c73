// SPDX-License-Identifier: MIT
#pragma once
// The tables of one incident replay (one side of the replay view): its steps (losses, the
// scale GradScaler used, found_inf, the skip, the scale after update() and the growth
// tracker), the per-module activations of the FP32 reference and the AMP forward (the first
// non-finite module's row highlighted), and the per-parameter departures of the AMP step from
// the reference. Steps are counted from 1 (the replay JSON's step + 1). Non-finite values are
// shown as NaN / inf / -inf and in red.

#include "ampscope/engine/replay.h"
#include "tablemodel.h"
#include "trainingstepmodel.h"

namespace ampscope::ui {

/// A replay figure as shown: NaN, inf, -inf, or the number with `digits` significant digits.
QString replayNumber(double v, int digits = 4);

/// What a replay's tables have in common: the replay they show.
class ReplayTableModel : public TableModel {
    Q_OBJECT
public:
    enum Roles { SortRole = Qt::UserRole };
    using TableModel::TableModel;
    void resetData(const ReplayResult& r);
    void clearData() { resetData({}); }
    const ReplayResult& replay() const { return r_; }

protected:
    virtual void rebuild() {}
    ReplayResult r_;
};

class ReplayStepModel : public ReplayTableModel {
    Q_OBJECT
public:
    enum Columns { Step, LossRef, LossAmp, Scale, FoundInf, Skipped, ScaleAfter, GrowthTracker, NUM_COLUMNS };
    explicit ReplayStepModel(QObject* parent = nullptr);
    QVariant data(const QModelIndex& index, int role) const override;

protected:
    int rows() const override { return int(r_.steps.size()); }
};

/// One row per module and step (execution order within a step).
class ReplayLayerModel : public ReplayTableModel {
    Q_OBJECT
public:
    enum Columns { Step, Module, Op, RefAbsmax, AmpAbsmax, RefRms, AmpRms, AmpNonFinite, Fp16Overflow, NUM_COLUMNS };
    explicit ReplayLayerModel(QObject* parent = nullptr);
    QVariant data(const QModelIndex& index, int role) const override;
    /// The row of the first non-finite stage's module (in its step), or -1.
    int firstNonFiniteRow() const { return first_; }
    /// The module of a row (execution order).
    const ReplayLayer& layer(int row) const { return *rows_[size_t(row)].second; }

protected:
    int rows() const override { return int(rows_.size()); }
    void rebuild() override;

private:
    std::vector<std::pair<int, const ReplayLayer*>> rows_;  ///< (step index, layer)
    int first_ = -1;
};

/// One row per parameter and step.
class ReplayParamModel : public ReplayTableModel {
    Q_OBJECT
public:
    enum Columns { Step, Name, GradRel, UpdateRel, GradFinite, WeightsFinite, NUM_COLUMNS };
    explicit ReplayParamModel(QObject* parent = nullptr);
    QVariant data(const QModelIndex& index, int role) const override;
    /// The parameter of a row.
    const ReplayParam& param(int row) const { return *rows_[size_t(row)].second; }

protected:
    int rows() const override { return int(rows_.size()); }
    void rebuild() override;

private:
    std::vector<std::pair<int, const ReplayParam*>> rows_;
};

/// A replay's steps as training steps (step, losses, scale used, found_inf, skip, growth
/// tracker), for the Training view's loss and scale charts; the hovered step's summary says only
/// what a replay measures.
class ReplayTrainingModel : public TrainingStepModel {
    Q_OBJECT
public:
    using TrainingStepModel::TrainingStepModel;
    void resetData(const ReplayResult& r);
    QVariant data(const QModelIndex& index, int role) const override;
};

}  // namespace ampscope::ui
