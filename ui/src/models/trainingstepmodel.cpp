// SPDX-License-Identifier: MIT
#include "trainingstepmodel.h"

#include <cmath>

#include "uitext.h"

namespace ampscope::ui {

void TrainingStepModel::resetData(std::vector<TrainStep> steps) {
    beginResetModel();
    steps_ = std::move(steps);
    endResetModel();
}

void TrainingStepModel::appendSteps(const std::vector<TrainStep>& steps) {
    if (steps.empty()) return;
    beginInsertRows({}, rows(), rows() + int(steps.size()) - 1);
    steps_.insert(steps_.end(), steps.begin(), steps.end());
    endInsertRows();
}

TrainingStepModel::TrainingStepModel(QObject* parent)
    : TableModel(parent, {QStringLiteral("Step"), QStringLiteral("Loss (FP32)"), QStringLiteral("Loss (AMP)"),
                          QStringLiteral("Scale"), QStringLiteral("Skipped"), QStringLiteral("Effective updates"),
                          QStringLiteral("Grad norm"), QStringLiteral("LR"), QStringLiteral("Divergence"),
                          QStringLiteral("Underflow"), QStringLiteral("FP8 clamped"), QStringLiteral("Non-finite"),
                          QStringLiteral("Origin")}) {}

double TrainingStepModel::value(int row, int column) const {
    const auto& s = steps_[size_t(row)];
    switch (column) {
        case Step: return double(s.step);
        case LossRef: return s.loss_ref;
        case LossAmp: return s.loss_amp;
        case Scale: return s.scale;
        case Skipped: return s.skipped ? 1.0 : 0.0;
        case Effective: return double(s.effective_updates);
        case GradNorm: return s.grad_norm;
        case Lr: return s.lr;
        case Divergence: return s.divergence;
        case Underflow: return s.grad_underflow >= 0 ? double(s.grad_underflow) : std::nan("");
        case Fp8Clamped: return s.fp8_saturated >= 0 ? double(s.fp8_saturated) : std::nan("");
    }
    return std::nan("");
}

QVariant TrainingStepModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid() || idx.row() >= int(steps_.size())) return {};
    const auto& s = steps_[size_t(idx.row())];
    auto origin = [&s] {
        if (!s.origin) return QString();
        QString o = (s.origin->module.empty() ? QStringLiteral("(root)") : storedText(s.origin->module)) +
                    QStringLiteral(", ") + storedText(s.origin->op);
        if (!s.origin->grad_fn.empty()) o += QStringLiteral(" in ") + storedText(s.origin->grad_fn);
        return o;
    };
    if (role == PlotRole || role == SortRole) {
        if (role == SortRole && idx.column() == Stage) return storedText(s.nonfinite_stage);
        if (role == SortRole && idx.column() == Origin) return origin();
        return value(idx.row(), idx.column());
    }
    if (role == Qt::DisplayRole) {
        switch (idx.column()) {
            case Step: return s.step;
            case LossRef: return figure(s.loss_ref);
            case LossAmp: return figure(s.loss_amp);
            case Scale: return figure(s.scale);
            case Skipped: return s.skipped ? QStringLiteral("skipped") : QString();
            case Effective: return s.effective_updates;
            case GradNorm: return figure(s.grad_norm);
            case Lr: return figure(s.lr);
            case Divergence: return figure(s.divergence);
            case Underflow:
                return s.grad_underflow >= 0 ? QVariant(qlonglong(s.grad_underflow)) : QVariant(QStringLiteral("-"));
            case Fp8Clamped:
                if (s.fp8_saturated < 0) return QStringLiteral("-");
                return s.fp8_saturated == 0 ? QStringLiteral("0")
                                            : QStringLiteral("%1 (first %2)")
                                                  .arg(qlonglong(s.fp8_saturated))
                                                  .arg(storedText(s.fp8_saturated_at));
            case Stage: return storedText(s.nonfinite_stage);
            case Origin: return origin();
        }
    }
    if (role == SummaryRole)
        return QStringLiteral(
                   "step %1: loss FP32 %2, AMP %3\nscale %4%5, %6 effective updates\ngrad norm %7, divergence %8%9")
            .arg(s.step)
            .arg(figure(s.loss_ref), figure(s.loss_amp), figure(s.scale))
            .arg(s.skipped ? QStringLiteral(" (skipped)") : QString())
            .arg(s.effective_updates)
            .arg(figure(s.grad_norm), figure(s.divergence))
            .arg(s.nonfinite_stage.empty()
                     ? QString()
                     : QStringLiteral("\nnon-finite: %1 — %2").arg(storedText(s.nonfinite_stage), origin()));
    if (role == Qt::ForegroundRole && (s.skipped || !s.nonfinite_stage.empty())) return badColor();
    return {};
}

}  // namespace ampscope::ui
