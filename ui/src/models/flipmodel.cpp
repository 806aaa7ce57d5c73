// SPDX-License-Identifier: MIT
#include "flipmodel.h"

#include "ampscope/engine/compare.h"
#include "uitext.h"

namespace ampscope::ui {

void FlipModel::resetData(const RunResult& run) {
    beginResetModel();
    rows_.clear();
    sequence_ = false;
    for (const auto& c : run.comparisons) {
        sequence_ = sequence_ || c.tokens.has_value();
        for (const auto& f : c.flips) rows_.push_back({c.precision, f});
    }
    endResetModel();
}

void FlipModel::addComparison(const Comparison& c) {
    if (c.tokens && !sequence_) {
        sequence_ = true;
        Q_EMIT headerDataChanged(Qt::Horizontal, 0, NUM_COLUMNS - 1);
    }
    if (c.flips.empty()) return;
    beginInsertRows({}, rows(), rows() + int(c.flips.size()) - 1);
    for (const auto& f : c.flips) rows_.push_back({c.precision, f});
    endInsertRows();
}

FlipModel::FlipModel(QObject* parent)
    : TableModel(parent, {QStringLiteral("Precision"), QStringLiteral("Sample"), QStringLiteral("Tag"),
                          QStringLiteral("Position"), QStringLiteral("Reference class"), QStringLiteral("AMP class"),
                          QStringLiteral("Reference margin"), QStringLiteral("AMP margin")}) {}

QString FlipModel::columnName(int column) const {
    if (sequence_ && column == Ref) return QStringLiteral("Reference token");
    if (sequence_ && column == Amp) return QStringLiteral("AMP token");
    if (sequence_ && column == RefMargin) return QStringLiteral("Reference top-2 margin");
    return TableModel::columnName(column);
}

QVariant FlipModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid() || idx.row() >= int(rows_.size())) return {};
    const auto& r = rows_[size_t(idx.row())];
    if (role != Qt::DisplayRole && role != SortRole) return {};
    auto cls = [](int c) { return storedText(decision_label(c)); };
    switch (idx.column()) {
        case Precision_: return storedText(to_string(r.precision));
        case Sample: return storedText(r.flip.sample);
        case Tag: return storedText(r.flip.tag);
        case Position:
            if (r.flip.position < 0) return {};
            return role == SortRole ? QVariant(r.flip.position) : QVariant(QString::number(r.flip.position));
        case Ref: return role == SortRole ? QVariant(r.flip.ref) : QVariant(cls(r.flip.ref));
        case Amp: return role == SortRole ? QVariant(r.flip.amp) : QVariant(cls(r.flip.amp));
        case RefMargin:
            return role == SortRole ? QVariant(r.flip.ref_margin) : QVariant(numberOrDash(r.flip.ref_margin));
        case AmpMargin:
            return role == SortRole ? QVariant(r.flip.amp_margin) : QVariant(numberOrDash(r.flip.amp_margin));
    }
    return {};
}

}  // namespace ampscope::ui
