// SPDX-License-Identifier: MIT
#include "samplemodel.h"

#include <algorithm>
#include <tuple>

#include "ampscope/engine/compare.h"
#include "ampscope/engine/rules.h"
#include "uitext.h"

namespace ampscope::ui {

void SampleModel::resetData(const RunResult& run) {
    beginResetModel();
    run_ = run;
    for (auto& p : run_.passes) p.layers.clear();  // the layer model holds them
    updatePlotRange();
    computeMargins();
    rankOf_.assign(run_.samples.size(), -1);
    for (size_t k = 0; k < run_.ranks.size(); ++k)
        for (int i = run_.ranks[k].first_sample; i < run_.ranks[k].first_sample + run_.ranks[k].samples; ++i)
            if (i >= 0 && size_t(i) < rankOf_.size()) rankOf_[size_t(i)] = int(k);
    endResetModel();
}

void SampleModel::addPass(const PassResult& pass) {
    run_.passes.push_back(pass);
    run_.passes.back().layers.clear();
    if (run_.passes.size() != 1 || run_.samples.empty()) return;
    computeMargins();
    Q_EMIT dataChanged(index(0, kMarginColumn), index(rows() - 1, kMarginColumn));
}

void SampleModel::addComparison(const Comparison& cmp) {
    const int first = 3 + 3 * int(run_.comparisons.size());  // before the rank column, if any
    beginInsertColumns({}, first, first + 2);
    run_.comparisons.push_back(cmp);
    updatePlotRange();
    endInsertColumns();
}

void SampleModel::updatePlotRange() {
    std::tie(lo_, hi_) = deltaPlotRange({&run_});
    hi_ = std::max(hi_, run_.criteria.atol);
}

void SampleModel::computeMargins() {
    margin_.assign(run_.samples.size(), 0.0);
    if (!run_.passes.empty() && run_.passes.front().num_outputs > 0) {
        const auto& ref = run_.passes.front();
        const size_t k = size_t(ref.num_outputs);
        for (size_t i = 0; i < margin_.size() && (i + 1) * k <= ref.outputs.size(); ++i)
            margin_[i] = reference_margin(ref, i);
    }
}

QString SampleModel::columnName(int s) const {
    if (s == 0) return QStringLiteral("Sample");
    if (s == 1) return QStringLiteral("Tag");
    if (s == kMarginColumn) return QStringLiteral("ref margin");
    if (s == rankColumn()) return QStringLiteral("Rank");
    const int c = (s - 3) / 3, k = (s - 3) % 3;
    const auto p = storedText(to_string(run_.comparisons[size_t(c)].precision));
    return k == 0   ? QString(p + QStringLiteral(" |Δ|"))
           : k == 1 ? QString(p + QStringLiteral(" rel"))
                    : QString(p + QStringLiteral(" decision"));
}

QVariant SampleModel::rankData(size_t sample, int role) const {
    const int k = sample < rankOf_.size() ? rankOf_[sample] : -1;
    if (k < 0) return role == Qt::DisplayRole ? QVariant(QStringLiteral("-")) : QVariant();
    const auto& r = run_.ranks[size_t(k)];
    if (role == SortRole) return r.rank;
    if (role == Qt::DisplayRole) return QStringLiteral("%1 (%2)").arg(r.rank).arg(storedText(r.device));
    if (role == Qt::ToolTipRole)
        return QStringLiteral("rank %1 on %2, %3: samples %4–%5")
            .arg(r.rank)
            .arg(storedText(r.host), storedText(r.device))
            .arg(r.first_sample)
            .arg(r.first_sample + r.samples - 1);
    return {};
}

QVariant SampleModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid() || idx.row() >= int(run_.samples.size())) return {};
    const size_t i = size_t(idx.row());
    if (idx.column() < 2) {
        if (role == Qt::DisplayRole || role == SortRole)
            return storedText(idx.column() == 0 ? run_.samples[i].id : run_.samples[i].tag);
        if (role == PlotRole && idx.column() == 0) return double(i);
        return {};
    }
    if (idx.column() == rankColumn()) return rankData(i, role);
    if (idx.column() == kMarginColumn) {
        const double m = i < margin_.size() ? margin_[i] : 0.0;
        if (role == PlotRole) return std::max(m, kPlotFloor);
        if (role == SortRole) return m;
        if (role == Qt::DisplayRole) return numberOrDash(m);
        return {};
    }
    const int c = (idx.column() - 3) / 3, k = (idx.column() - 3) % 3;
    if (c >= int(run_.comparisons.size())) return {};
    const auto& cmp = run_.comparisons[size_t(c)];
    if (i >= cmp.deltas.size()) return {};
    const auto& d = cmp.deltas[i];
    const bool flipped = i < cmp.ref_decisions.size() && cmp.ref_decisions[i] != cmp.amp_decisions[i];
    if (role == PlotRole) return k == 0 ? QVariant(d.finite ? std::max(d.abs, kPlotFloor) : plotTop()) : QVariant();
    if (role == SummaryRole) {
        QString tip = QStringLiteral("%1 (%2), %3\n|Δ| %4, relative %5")
                          .arg(storedText(d.sample), storedText(d.tag), storedText(to_string(cmp.precision)))
                          .arg(d.finite ? QString::number(d.abs, 'g', 4) : QStringLiteral("non-finite"))
                          .arg(QString::number(d.rel, 'g', 4));
        if (i < cmp.ref_decisions.size())
            tip += QStringLiteral("\ndecision: reference %1, AMP %2%3")
                       .arg(storedText(decision_label(cmp.ref_decisions[i])),
                            storedText(decision_label(cmp.amp_decisions[i])))
                       .arg(flipped ? QStringLiteral(" (flipped)") : QString());
        return tip;
    }
    if (role == SortRole) {
        if (k == 0) return d.finite ? d.abs : 1e300;
        if (k == 1) return d.finite ? d.rel : 1e300;
        return flipped ? 1 : 0;
    }
    if (role == Qt::DisplayRole) {
        if (k == 0) return d.finite ? numberOrDash(d.abs) : QStringLiteral("non-finite");
        if (k == 1) return d.finite ? numberOrDash(d.rel) : QStringLiteral("-");
        if (i >= cmp.ref_decisions.size()) return QStringLiteral("-");
        return flipped ? QStringLiteral("%1 → %2").arg(storedText(decision_label(cmp.ref_decisions[i])),
                                                       storedText(decision_label(cmp.amp_decisions[i])))
                       : storedText(decision_label(cmp.ref_decisions[i]));
    }
    if (role == Qt::ForegroundRole) {
        if ((k < 2 && !d.within_tolerance) || (k == 2 && flipped)) return badColor();
    }
    return {};
}

}  // namespace ampscope::ui
