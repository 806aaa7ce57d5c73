// SPDX-License-Identifier: MIT
#include "tokenmodel.h"

#include <QColor>

#include <algorithm>
#include <cmath>

#include "ampscope/engine/compare.h"
#include "uitext.h"

namespace ampscope::ui {

namespace {
const QString kExcluded = QStringLiteral("excluded");
const QString kFlip = QStringLiteral("flip");
const QString kBoundary = QStringLiteral("boundary");
}  // namespace

TokenModel::TokenModel(QObject* parent)
    : TableModel(parent, {QStringLiteral("Position"), QStringLiteral("KL(ref ‖ amp)"), QStringLiteral("State"),
                          QStringLiteral("Reference token"), QStringLiteral("AMP token"),
                          QStringLiteral("Reference margin")}) {}

std::vector<int> TokenModel::sequenceComparisons() const {
    std::vector<int> out;
    for (size_t i = 0; i < run_.comparisons.size(); ++i)
        if (run_.comparisons[i].tokens) out.push_back(int(i));
    return out;
}

int TokenModel::flipsOf(int comparison, int sample) const {
    if (comparison < 0 || comparison >= int(run_.comparisons.size()) || sample < 0 ||
        sample >= int(run_.samples.size()))
        return 0;
    const auto& id = run_.samples[size_t(sample)].id;
    const auto& flips = run_.comparisons[size_t(comparison)].flips;
    return int(std::count_if(flips.begin(), flips.end(), [&](const Flip& f) { return f.sample == id; }));
}

void TokenModel::resetData(const RunResult& run) {
    beginResetModel();
    run_ = run;
    const auto seq = sequenceComparisons();
    const bool keep = std::find(seq.begin(), seq.end(), comparison_) != seq.end() && sample_ >= 0 &&
                      sample_ < int(run_.samples.size());
    if (!keep) {
        comparison_ = seq.empty() ? -1 : seq.front();
        sample_ = -1;
        for (int s = 0, most = -1; comparison_ >= 0 && s < int(run_.samples.size()); ++s)
            if (const int n = flipsOf(comparison_, s); n > most) {  // the sample with most flips first
                most = n;
                sample_ = s;
            }
    }
    updatePlotRange();
    endResetModel();
}

void TokenModel::select(int comparison, int sample) {
    const auto seq = sequenceComparisons();
    if (std::find(seq.begin(), seq.end(), comparison) == seq.end() || sample < 0 || sample >= int(run_.samples.size()))
        return;
    if (comparison == comparison_ && sample == sample_) return;
    beginResetModel();
    comparison_ = comparison;
    sample_ = sample;
    updatePlotRange();
    endResetModel();
}

const TokenStats* TokenModel::tokens() const {
    if (comparison_ < 0 || comparison_ >= int(run_.comparisons.size()) || sample_ < 0) return nullptr;
    const auto& t = run_.comparisons[size_t(comparison_)].tokens;
    return t ? &*t : nullptr;
}

int TokenModel::rows() const {
    const TokenStats* t = tokens();
    return t ? std::max(0, t->length) : 0;
}

double TokenModel::kld(int row) const {
    const TokenStats* t = tokens();
    const size_t i = size_t(sample_) * size_t(t->length) + size_t(row);
    return i < t->kld.size() ? double(t->kld[i]) : std::nan("");
}

bool TokenModel::excluded(int row) const {
    return !std::isfinite(kld(row));  // NaN: masked out (or a non-finite logit), not compared
}

const Flip* TokenModel::flipAt(int position) const {
    const auto& id = run_.samples[size_t(sample_)].id;
    for (const auto& f : run_.comparisons[size_t(comparison_)].flips)
        if (f.sample == id && f.position == position) return &f;
    return nullptr;
}

const BoundaryPosition* TokenModel::boundaryAt(int position) const {
    const auto& id = run_.samples[size_t(sample_)].id;
    for (const auto& b : tokens()->boundary)
        if (b.sample == id && b.position == position) return &b;
    return nullptr;
}

bool TokenModel::flipped(int row) const {
    return flipAt(row) != nullptr;
}

void TokenModel::updatePlotRange() {
    double lo = 1e300, hi = 0;
    for (int r = 0; r < rows(); ++r)
        if (const double v = kld(r); std::isfinite(v) && v > 0) {
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
    if (hi == 0) {  // nothing above 0: a range that shows the zeros at its floor
        lo = 1e-6;
        hi = 1e-3;
    }
    lo_ = std::max(kPlotFloor, lo);
    hi_ = std::max(hi, lo_ * 10);
}

QString TokenModel::summary(int row) const {
    QString s = QStringLiteral("sample %1, position %2\n").arg(storedText(run_.samples[size_t(sample_)].id)).arg(row);
    if (excluded(row)) return s + QStringLiteral("excluded: masked out (or a non-finite logit), not compared");
    s += QStringLiteral("KL(ref ‖ amp) %1").arg(numberOrDash(kld(row)));
    if (const Flip* f = flipAt(row))
        s += QStringLiteral("\nflip: reference token %1 → AMP token %2\nreference top-2 margin %3")
                 .arg(storedText(decision_label(f->ref)), storedText(decision_label(f->amp)),
                      numberOrDash(f->ref_margin));
    else if (const BoundaryPosition* b = boundaryAt(row))
        s += QStringLiteral("\nboundary: reference top-2 margin %1").arg(numberOrDash(b->ref_margin));
    return s;
}

QVariant TokenModel::display(int row, int column) const {
    const Flip* f = flipAt(row);
    const BoundaryPosition* b = f ? nullptr : boundaryAt(row);
    switch (column) {
        case Position: return row;
        case Kld: return excluded(row) ? QStringLiteral("-") : numberOrDash(kld(row));
        case State: return excluded(row) ? kExcluded : f ? kFlip : b ? kBoundary : QString();
        case RefToken: return f ? storedText(decision_label(f->ref)) : QString();
        case AmpToken: return f ? storedText(decision_label(f->amp)) : QString();
        case RefMargin: return f ? numberOrDash(f->ref_margin) : b ? numberOrDash(b->ref_margin) : QString();
    }
    return {};
}

QVariant TokenModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid() || idx.row() >= rows()) return {};
    const int r = idx.row();
    if (role == SummaryRole) return summary(r);
    if (role == PlotRole) {
        if (idx.column() == Position) return double(r);
        if (idx.column() == Kld) return excluded(r) ? plotBottom() : std::max(kld(r), lo_);
        return {};
    }
    if (role == Qt::ForegroundRole && excluded(r)) return QColor(130, 130, 130);
    if (role == Qt::ForegroundRole && idx.column() == State && flipped(r)) return badColor();
    if (role == SortRole) {
        if (idx.column() == Kld) return excluded(r) ? -1.0 : kld(r);
        if (idx.column() == Position) return r;
    }
    if (role == Qt::DisplayRole || role == SortRole) return display(r, idx.column());
    return {};
}

}  // namespace ampscope::ui
