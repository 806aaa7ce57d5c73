// SPDX-License-Identifier: MIT
#include "layermodel.h"

#include <QFont>

#include <algorithm>
#include <cmath>

#include "ampscope/engine/rules.h"
#include "uitext.h"

namespace ampscope::ui {

double headroom(const LayerStat& l, Precision p) {
    return ampscope::headroom(l.stats.absmax, p);
}

void LayerModel::resetData(const PassResult& pass) {
    beginResetModel();
    pass_ = pass;
    endResetModel();
}
const LayerStat* LayerModel::layer(int r) const {
    return r >= 0 && r < int(pass_.layers.size()) ? &pass_.layers[size_t(r)] : nullptr;
}

LayerModel::LayerModel(QObject* parent)
    : TableModel(parent, {QStringLiteral("#"), QStringLiteral("Module"), QStringLiteral("Op"), QStringLiteral("Dtype"),
                          QStringLiteral("absmax"), QStringLiteral("Headroom (log2)"), QStringLiteral("FP16 overflow"),
                          QStringLiteral("FP16 subnormal"), QStringLiteral("Non-finite"), QStringLiteral("State")}) {}

double LayerModel::formatLimit() const {
    return format_max(headroom_format(pass_.precision));
}

QVariant LayerModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid() || idx.row() >= int(pass_.layers.size())) return {};
    const auto& l = pass_.layers[size_t(idx.row())];
    if (role == ModuleRole) return storedText(l.module);
    if (role == PlotRole || role == MarkRole) {
        if (idx.column() == Index) return double(l.index);
        if (idx.column() != Absmax) return {};
        if (role == MarkRole && (l.origin || l.stats.nonfinite())) return formatLimit() * 2;
        return std::max(l.stats.absmax, kPlotFloor);
    }
    if (role == SummaryRole) {
        const bool bf = pass_.precision == Precision::Bf16;
        return QStringLiteral("#%1 %2 %3 (%4)\nabsmax %5; NaN %6, +Inf %7, -Inf %8\noverflow %9, subnormal %10%11")
            .arg(l.index)
            .arg(l.module.empty() ? QStringLiteral("(root)") : storedText(l.module), storedText(l.op),
                 storedText(l.dtype))
            .arg(l.stats.absmax, 0, 'g', 4)
            .arg(l.stats.nan)
            .arg(l.stats.posinf)
            .arg(l.stats.neginf)
            .arg(bf ? l.stats.bf16_overflow : l.stats.fp16_overflow)
            .arg(bf ? l.stats.bf16_subnormal : l.stats.fp16_subnormal)
            .arg(l.origin ? QStringLiteral("\nNaN/Inf born here") : QString());
    }
    const double h = headroom(l, pass_.precision == Precision::Fp32 ? Precision::Fp16 : pass_.precision);
    const QString state = l.origin              ? QStringLiteral("origin")
                          : l.stats.nonfinite() ? QStringLiteral("propagated")
                                                : QString();
    if (role == Qt::DisplayRole || role == SortRole) {
        const bool sort = role == SortRole;
        switch (idx.column()) {
            case Index: return l.index;
            case Module: return l.module.empty() ? QStringLiteral("(root)") : storedText(l.module);
            case Op: return storedText(l.op);
            case Dtype: return storedText(l.dtype);
            case Absmax: return sort ? QVariant(l.stats.absmax) : QVariant(numberOrDash(l.stats.absmax));
            case Headroom:
                return sort ? QVariant(std::isfinite(h) ? h : 1e9)
                            : QVariant(std::isfinite(h) ? numberOrDash(h) : QStringLiteral("-"));
            case Fp16Overflow: return qlonglong(l.stats.fp16_overflow);
            case Fp16Subnormal: return qlonglong(l.stats.fp16_subnormal);
            case NonFinite: return qlonglong(l.stats.nonfinite());
            case State: return state;
        }
    }
    if (role == Qt::ForegroundRole && (l.origin || l.stats.nonfinite()))
        return l.origin ? badColor() : QColor(200, 120, 30);
    if (role == Qt::FontRole && l.origin) {
        QFont f;
        f.setBold(true);
        return f;
    }
    if (role == Qt::ToolTipRole) {
        QString shape;
        for (auto d : l.shape) shape += (shape.isEmpty() ? QString() : QStringLiteral("×")) + QString::number(d);
        return QStringLiteral(
                   "shape %1\nmin %2 max %3 mean %4 rms %5\nsmallest |x|>0 %6\nbf16 overflow %7, subnormal "
                   "%8\nautocast %9")
            .arg(shape, numberOrDash(l.stats.min), numberOrDash(l.stats.max), numberOrDash(l.stats.mean),
                 numberOrDash(l.stats.rms), numberOrDash(l.stats.min_nonzero_abs))
            .arg(l.stats.bf16_overflow)
            .arg(l.stats.bf16_subnormal)
            .arg(l.autocast ? QStringLiteral("on") : QStringLiteral("off (FP32 region or reference)"));
    }
    return {};
}

}  // namespace ampscope::ui
