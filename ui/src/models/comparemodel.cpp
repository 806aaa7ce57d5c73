// SPDX-License-Identifier: MIT
// CompareModel: two comparison runs side by side, per sample.
#include <QColor>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <map>

#include "comparemodel.h"
#include "uitext.h"

namespace ampscope::ui {

void CompareModel::resetData(const RunResult& a, const RunResult& b) {
    beginResetModel();
    a_ = a;
    b_ = b;
    for (auto* r : {&a_, &b_})
        for (auto& p : r->passes) p.layers.clear();  // not shown here
    rows_.clear();
    std::map<std::string, size_t> byId;
    for (size_t i = 0; i < a_.samples.size(); ++i) {
        byId[a_.samples[i].id] = rows_.size();
        rows_.push_back({int(i), -1});
    }
    for (size_t i = 0; i < b_.samples.size(); ++i) {
        const auto it = byId.find(b_.samples[i].id);
        if (it != byId.end())
            rows_[it->second].b = int(i);
        else
            rows_.push_back({-1, int(i)});
    }
    std::tie(lo_, hi_) = deltaPlotRange({&a_, &b_});
    endResetModel();
}

int CompareModel::columns() const {
    return kFirstDeltaColumn + int(a_.comparisons.size() + b_.comparisons.size());
}

CompareModel::Side CompareModel::side(int column) const {
    return column - kFirstDeltaColumn < int(a_.comparisons.size()) ? A : B;
}

const Comparison* CompareModel::comparison(int column) const {
    const int c = column - kFirstDeltaColumn;
    if (c < 0 || c >= columns() - kFirstDeltaColumn) return nullptr;
    const int na = int(a_.comparisons.size());
    return c < na ? &a_.comparisons[size_t(c)] : &b_.comparisons[size_t(c - na)];
}

QString CompareModel::columnName(int s) const {
    if (s == 0) return QStringLiteral("Sample");
    if (s == 1) return QStringLiteral("Tag");
    return (side(s) == A ? QStringLiteral("A ") : QStringLiteral("B ")) +
           QString::fromStdString(to_string(comparison(s)->precision)) + QStringLiteral(" |Δ|");
}

const SampleDelta* CompareModel::delta(int row, int column) const {
    const Comparison* c = comparison(column);
    if (!c || row < 0 || row >= rows()) return nullptr;
    const int i = side(column) == A ? rows_[size_t(row)].a : rows_[size_t(row)].b;
    return i >= 0 && size_t(i) < c->deltas.size() ? &c->deltas[size_t(i)] : nullptr;
}

QVariant CompareModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid() || idx.row() >= rows()) return {};
    const auto& r = rows_[size_t(idx.row())];
    if (idx.column() < kFirstDeltaColumn) {
        const SampleInfo& s = r.a >= 0 ? a_.samples[size_t(r.a)] : b_.samples[size_t(r.b)];
        if (role == PlotRole && idx.column() == 0) return double(idx.row());
        if (role == Qt::DisplayRole || role == SortRole) return storedText(idx.column() == 0 ? s.id : s.tag);
        return {};
    }
    const SampleDelta* d = delta(idx.row(), idx.column());
    if (!d) return role == Qt::DisplayRole ? QVariant(QStringLiteral("—")) : QVariant();
    switch (role) {
        case PlotRole: return d->finite ? std::max(d->abs, kPlotFloor) : hi_ * 3;
        case SortRole: return d->finite ? d->abs : 1e300;
        case Qt::DisplayRole: return d->finite ? QString::number(d->abs, 'g', 3) : QStringLiteral("non-finite");
        case Qt::ForegroundRole: return d->within_tolerance ? QVariant() : QVariant(badColor());
        case SummaryRole:
            return QStringLiteral("%1 (%2), run %3 %4\n|Δ| %5")
                .arg(storedText(d->sample), storedText(d->tag),
                     side(idx.column()) == A ? QStringLiteral("A") : QStringLiteral("B"),
                     QString::fromStdString(to_string(comparison(idx.column())->precision)))
                .arg(d->finite ? QString::number(d->abs, 'g', 4) : QStringLiteral("non-finite"));
    }
    return {};
}

}  // namespace ampscope::ui
