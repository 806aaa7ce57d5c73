// SPDX-License-Identifier: MIT
#pragma once
// The steps of a training run.

#include <vector>

#include "ampscope/engine/train.h"
#include "tablemodel.h"

namespace ampscope::ui {

/// The steps of a training run (the Training view's table and charts).
class TrainingStepModel : public TableModel {
    Q_OBJECT
public:
    enum Columns {
        Step,
        LossRef,
        LossAmp,
        Scale,
        Skipped,
        Effective,
        GradNorm,
        Lr,
        Divergence,
        Underflow,
        Fp8Clamped,  ///< fp8-delayed: elements beyond the stale scales' range this step ("-" otherwise)
        Stage,
        Origin,
        NUM_COLUMNS
    };
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

}  // namespace ampscope::ui
