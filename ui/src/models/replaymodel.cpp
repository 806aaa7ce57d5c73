// SPDX-License-Identifier: MIT
#include "replaymodel.h"

#include <QColor>
#include <QFont>

#include <cmath>

#include "uitext.h"

namespace ampscope::ui {

namespace {

QString yesNo(bool b) {
    return b ? QStringLiteral("yes") : QStringLiteral("no");
}

/// A number cell: DisplayRole the text, SortRole the value (non-finite sorted above all).
QVariant numberCell(double v, int role, int digits = 4) {
    if (role == ReplayTableModel::SortRole)
        return std::isfinite(v) ? v : (std::isnan(v) ? 1e300 : std::copysign(1e299, v));
    return replayNumber(v, digits);
}

}  // namespace

QString replayNumber(double v, int digits) {
    if (std::isnan(v)) return QStringLiteral("NaN");
    if (std::isinf(v)) return v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
    return QString::number(v, 'g', digits);
}

void ReplayTableModel::resetData(const ReplayResult& r) {
    beginResetModel();
    r_ = r;
    rebuild();
    endResetModel();
}

// ---- steps ----------------------------------------------------------------------------------

ReplayStepModel::ReplayStepModel(QObject* parent)
    : ReplayTableModel(parent,
                       {QStringLiteral("Step"), QStringLiteral("Loss FP32"), QStringLiteral("Loss AMP"),
                        QStringLiteral("Scale used"), QStringLiteral("found_inf"), QStringLiteral("GradScaler skips"),
                        QStringLiteral("Scale after"), QStringLiteral("Growth tracker")}) {}

QVariant ReplayStepModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid() || idx.row() >= rows()) return {};
    const auto& s = r_.steps[size_t(idx.row())];
    if (role == Qt::DisplayRole || role == SortRole) {
        switch (idx.column()) {
            case Step: return s.step + 1;
            case LossRef: return numberCell(s.loss_ref, role, 7);
            case LossAmp: return numberCell(s.loss_amp, role, 7);
            case Scale: return numberCell(s.scale, role, 7);
            case FoundInf: return role == SortRole ? QVariant(s.found_inf) : QVariant(yesNo(s.found_inf));
            case Skipped: return role == SortRole ? QVariant(s.skipped) : QVariant(yesNo(s.skipped));
            case ScaleAfter: return numberCell(s.scale_after, role, 7);
            case GrowthTracker:
                return s.growth_tracker < 0 ? QVariant(QStringLiteral("-")) : QVariant(s.growth_tracker);
        }
    }
    if (role == Qt::ForegroundRole) {
        const bool red = (idx.column() == LossAmp && !std::isfinite(s.loss_amp)) ||
                         (idx.column() == LossRef && !std::isfinite(s.loss_ref)) ||
                         (idx.column() == FoundInf && s.found_inf) || (idx.column() == Skipped && s.skipped);
        if (red) return badColor();
    }
    if (role == Qt::TextAlignmentRole && idx.column() != FoundInf && idx.column() != Skipped)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

// ---- activations ----------------------------------------------------------------------------

ReplayLayerModel::ReplayLayerModel(QObject* parent)
    : ReplayTableModel(
          parent, {QStringLiteral("Step"), QStringLiteral("Module"), QStringLiteral("Op"),
                   QStringLiteral("FP32 absmax"), QStringLiteral("AMP absmax"), QStringLiteral("FP32 rms"),
                   QStringLiteral("AMP rms"), QStringLiteral("AMP non-finite"), QStringLiteral("FP16 overflow")}) {}

void ReplayLayerModel::rebuild() {
    rows_.clear();
    first_ = -1;
    const auto& f = r_.first_nonfinite;
    for (size_t s = 0; s < r_.steps.size(); ++s)
        for (const auto& l : r_.steps[s].activations) {
            if (first_ < 0 && f && !f->module.empty() && f->step == r_.steps[s].step && l.module == f->module)
                first_ = int(rows_.size());
            rows_.emplace_back(int(s), &l);
        }
}

QVariant ReplayLayerModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid() || idx.row() >= rows()) return {};
    const auto& [s, l] = rows_[size_t(idx.row())];
    if (role == Qt::DisplayRole || role == SortRole) {
        switch (idx.column()) {
            case Step: return r_.steps[size_t(s)].step + 1;
            case Module: return l->module.empty() ? QStringLiteral("(root)") : storedText(l->module);
            case Op: return storedText(l->op);
            case RefAbsmax: return numberCell(l->ref_absmax, role);
            case AmpAbsmax: return numberCell(l->amp_absmax, role);
            case RefRms: return numberCell(l->ref_rms, role);
            case AmpRms: return numberCell(l->amp_rms, role);
            case AmpNonFinite: return qlonglong(l->amp_nonfinite);
            case Fp16Overflow: return qlonglong(l->amp_fp16_overflow);
        }
    }
    const bool first = idx.row() == first_;
    if (role == Qt::BackgroundRole && first) return QColor(253, 226, 226);
    if (role == Qt::ForegroundRole && (first || l->amp_nonfinite > 0)) return badColor();
    if (role == Qt::FontRole && first) {
        QFont font;
        font.setBold(true);
        return font;
    }
    if (role == Qt::ToolTipRole && first)
        return QStringLiteral("The first non-finite stage of this replay is in this module");
    if (role == Qt::TextAlignmentRole && idx.column() > Op) return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

// ---- parameters -----------------------------------------------------------------------------

ReplayParamModel::ReplayParamModel(QObject* parent)
    : ReplayTableModel(parent, {QStringLiteral("Step"), QStringLiteral("Parameter"), QStringLiteral("Grad rel diff"),
                                QStringLiteral("Update rel diff"), QStringLiteral("Grad finite"),
                                QStringLiteral("Weights finite")}) {}

void ReplayParamModel::rebuild() {
    rows_.clear();
    for (size_t s = 0; s < r_.steps.size(); ++s)
        for (const auto& p : r_.steps[s].params) rows_.emplace_back(int(s), &p);
}

QVariant ReplayParamModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid() || idx.row() >= rows()) return {};
    const auto& [s, p] = rows_[size_t(idx.row())];
    if (role == Qt::DisplayRole || role == SortRole) {
        switch (idx.column()) {
            case Step: return r_.steps[size_t(s)].step + 1;
            case Name: return storedText(p->name);
            case GradRel: return numberCell(p->grad_rel, role);
            case UpdateRel: return numberCell(p->update_rel, role);
            case GradFinite: return role == SortRole ? QVariant(p->grad_finite) : QVariant(yesNo(p->grad_finite));
            case WeightsFinite:
                return role == SortRole ? QVariant(p->update_finite) : QVariant(yesNo(p->update_finite));
        }
    }
    if (role == Qt::ForegroundRole &&
        ((idx.column() == GradFinite && !p->grad_finite) || (idx.column() == WeightsFinite && !p->update_finite)))
        return badColor();
    if (role == Qt::TextAlignmentRole && (idx.column() == GradRel || idx.column() == UpdateRel))
        return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

// ---- steps as training steps (the loss and scale charts) -------------------------------------

void ReplayTrainingModel::resetData(const ReplayResult& r) {
    std::vector<TrainStep> steps;
    int effective = 0;
    for (const auto& s : r.steps) {
        TrainStep t;
        t.step = s.step + 1;  // counted from 1, as the steps table
        t.loss_ref = s.loss_ref;
        t.loss_amp = s.loss_amp;
        t.scale = s.scale;
        t.found_inf = s.found_inf;
        t.skipped = s.skipped;
        if (!s.skipped) ++effective;
        t.effective_updates = effective;
        t.grad_norm = std::nan("");  // not measured by a replay
        t.divergence = std::nan("");
        t.growth_tracker = s.growth_tracker;
        steps.push_back(t);
    }
    TrainingStepModel::resetData(std::move(steps));
}

QVariant ReplayTrainingModel::data(const QModelIndex& idx, int role) const {
    if (role != SummaryRole || !idx.isValid() || idx.row() >= rowCount()) return TrainingStepModel::data(idx, role);
    const auto& s = steps()[size_t(idx.row())];
    return QStringLiteral("step %1: loss FP32 %2, AMP %3\nscale %4%5")
        .arg(s.step)
        .arg(replayNumber(s.loss_ref, 7), replayNumber(s.loss_amp, 7), replayNumber(s.scale, 7))
        .arg(s.skipped ? QStringLiteral(" (GradScaler skipped the step)") : QString());
}

}  // namespace ampscope::ui
