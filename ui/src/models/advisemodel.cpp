// SPDX-License-Identifier: MIT
#include "advisemodel.h"

#include <QColor>

#include <algorithm>
#include <cmath>

#include "uitext.h"

namespace ampscope::ui {

namespace {
QString db(double v) {
    if (std::isnan(v)) return QStringLiteral("NaN");
    if (std::isinf(v)) return v > 0 ? QStringLiteral("+inf") : QStringLiteral("-inf");
    return QString::number(v, 'f', 1);
}
}  // namespace

SensitivityModel::SensitivityModel(QObject* parent)
    : TableModel(parent, {QStringLiteral("Module"), QStringLiteral("Precision"), QStringLiteral("SQNR dB"),
                          QStringLiteral("Rel. error"), QStringLiteral("Overflow"), QStringLiteral("Underflow"),
                          QStringLiteral("Origin")}) {}

void SensitivityModel::resetData(std::vector<ModuleSensitivity> rows) {
    beginResetModel();
    rows_ = std::move(rows);
    std::stable_sort(rows_.begin(), rows_.end(), [](const ModuleSensitivity& a, const ModuleSensitivity& b) {
        if (a.overflow != b.overflow) return a.overflow > b.overflow;
        return a.sqnr_db < b.sqnr_db;
    });
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& s : rows_) {
        if (!std::isfinite(s.sqnr_db)) continue;
        lo = std::min(lo, s.sqnr_db);
        hi = std::max(hi, s.sqnr_db);
    }
    if (!std::isfinite(lo)) {
        lo = 0;
        hi = 100;
    }
    bottom_ = std::floor(std::min(lo, 0.0) / 10) * 10;
    top_ = std::ceil((hi + 10) / 10) * 10;
    endResetModel();
}

double SensitivityModel::plotted(const ModuleSensitivity& s) const {
    if (std::isfinite(s.sqnr_db)) return s.sqnr_db;
    return s.sqnr_db > 0 ? top_ : bottom_;  // +inf: no error at all; -inf or NaN: nothing left of the signal
}

QVariant SensitivityModel::display(const ModuleSensitivity& s, int column) const {
    switch (column) {
        case Module: return s.module.empty() ? QStringLiteral("(root)") : plainText(s.module);
        case Prec: return plainText(to_string(s.precision));
        case Sqnr: return db(s.sqnr_db);
        case RelError: return QString::number(s.rel_error, 'g', 3);
        case Overflow: return QString::number(s.overflow);
        case Underflow: return QString::number(s.underflow);
        case Origin: return s.origin ? QStringLiteral("origin") : QString();
        default: return {};
    }
}

QVariant SensitivityModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rows()) return {};
    const auto& s = rows_[size_t(index.row())];
    const int c = index.column();
    if (role == Qt::DisplayRole) return display(s, c);
    if (role == SortRole) {
        switch (c) {
            case Module: return s.order;
            case Prec: return plainText(to_string(s.precision));
            case Sqnr: return std::isnan(s.sqnr_db) ? -INFINITY : s.sqnr_db;
            case RelError: return s.rel_error;
            case Overflow: return qlonglong(s.overflow);
            case Underflow: return qlonglong(s.underflow);
            case Origin: return s.origin;
            default: return {};
        }
    }
    if (role == PlotRole) return c == Module ? QVariant(s.order) : c == Sqnr ? QVariant(plotted(s)) : QVariant();
    if (role == ClippedRole) return !std::isfinite(s.sqnr_db);
    if (role == Qt::ForegroundRole && ((c == Origin && s.origin) || (c == Overflow && s.overflow > 0)))
        return badColor();
    if (role == Qt::TextAlignmentRole && c >= Sqnr && c <= Underflow) return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == SummaryRole)
        return QStringLiteral("%1 (%2)\nSQNR %3 dB, rel. error %4\noverflow %5, underflow %6 of %7 elements%8")
            .arg(display(s, Module).toString(), display(s, Prec).toString(), db(s.sqnr_db),
                 QString::number(s.rel_error, 'g', 3))
            .arg(s.overflow)
            .arg(s.underflow)
            .arg(s.elements)
            .arg(s.origin ? QStringLiteral("\nthe AMP pass's first non-finite value is born here") : QString());
    return {};
}

}  // namespace ampscope::ui
