// SPDX-License-Identifier: MIT
#include "models.h"

#include <QColor>
#include <QFont>
#include <QGuiApplication>
#include <QPalette>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "ampscope/engine/compare.h"
#include "ampscope/engine/rules.h"
#include "ampscope/engine/text.h"

namespace ampscope::ui {

namespace {
QString qs(const std::string& s) {  // stored text: control characters shown, never acted on
    return QString::fromStdString(visible_controls(s));
}
QString num(double v, int prec = 3) {
    return std::isfinite(v) ? QString::number(v, 'g', prec) : QStringLiteral("-");
}
/// A measured figure that may be non-finite: NaN and infinities as such (a training incident's loss).
QString figure(double v) {
    return QString::number(v, 'g', 3);
}
QColor bad() {
    return QColor(200, 40, 40);
}
QColor good() {
    return QColor(30, 140, 60);
}
}  // namespace

double headroom(const LayerStat& l, Precision p) {
    return ampscope::headroom(l.stats.absmax, p);
}

QVariant TableModel::headerData(int s, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole || s < 0 || s >= columns()) return {};
    return columnName(s);
}

// ---- RunListModel ---------------------------------------------------------------------------

void RunListModel::resetData(std::vector<storage::RunRow> rows) {
    beginResetModel();
    rows_ = std::move(rows);
    endResetModel();
}

void RunListModel::upsert(const storage::RunRow& row) {
    if (const auto* known = find(row.uuid)) {
        const int i = int(known - rows_.data());
        rows_[size_t(i)] = row;
        Q_EMIT dataChanged(index(i, 0), index(i, NUM_COLUMNS - 1));
        return;
    }
    beginInsertRows({}, int(rows_.size()), int(rows_.size()));
    rows_.push_back(row);
    endInsertRows();
}

const storage::RunRow* RunListModel::find(const std::string& uuid) const {
    for (const auto& r : rows_)
        if (r.uuid == uuid) return &r;
    return nullptr;
}

const storage::RunRow* RunListModel::row(int r) const {
    return r >= 0 && r < int(rows_.size()) ? &rows_[size_t(r)] : nullptr;
}

RunListModel::RunListModel(QObject* parent)
    : TableModel(parent, {QStringLiteral("Started"), QStringLiteral("Model"), QStringLiteral("Device"), QStringLiteral("Passes"),
                          QStringLiteral("Status"), QStringLiteral("Verdict"), QStringLiteral("Review"), QStringLiteral("Notes"),
                          QStringLiteral("Run")}) {}

QVariant RunListModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid() || idx.row() >= int(rows_.size())) return {};
    const auto& r = rows_[size_t(idx.row())];
    if (role == UuidRole) return QString::fromStdString(r.uuid);  // a key, not shown
    if (role == Qt::DisplayRole || role == SortRole) {
        switch (idx.column()) {
            case Started:  // to the minute on screen (the browser stays narrow), to the second for sorting
                return qs(r.started_at.substr(0, role == SortRole ? 19 : 16)).replace(QLatin1Char('T'), QLatin1Char(' '));
            case Model: return qs(r.model);
            case Device: return qs(r.device);
            case Passes: return qs(r.precisions);
            case Status: return qs(r.status);
            case Verdict: return qs(r.verdict.empty() ? std::string("-") : r.verdict);
            case Review: return qs(r.review_status);
            case Notes:
                return role == SortRole ? QVariant(r.annotations) : QVariant(r.annotations ? QString::number(r.annotations) : QString());
            case Id: return qs(r.uuid.substr(0, 8));
        }
    }
    if (role == Qt::ForegroundRole && idx.column() == Verdict) {
        if (r.verdict == "accepted") return good();
        if (!r.verdict.empty()) return bad();
    }
    if (role == Qt::ForegroundRole && idx.column() == Status && r.status != "completed" && r.status != "running") return bad();
    if (role == Qt::ToolTipRole)
        return QString(qs(r.uuid + ", started " + r.started_at + " on " + r.device) +
                       (r.error.empty() ? QString() : QLatin1Char('\n') + qs(r.error)));
    return {};
}

// ---- SampleModel ----------------------------------------------------------------------------

void SampleModel::resetData(const RunResult& run) {
    beginResetModel();
    run_ = run;
    for (auto& p : run_.passes) p.layers.clear();  // the layer model holds them
    updatePlotRange();
    computeMargins();
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
    const int first = columns();
    beginInsertColumns({}, first, first + 2);
    run_.comparisons.push_back(cmp);
    updatePlotRange();
    endInsertColumns();
}

std::pair<double, double> deltaPlotRange(std::initializer_list<const RunResult*> runs) {
    double lo = 1e300, hi = 0;
    for (const auto* r : runs)
        for (const auto& c : r->comparisons)
            for (const auto& d : c.deltas)
                if (d.finite) {
                    lo = std::min(lo, std::max(d.abs, kPlotFloor));
                    hi = std::max(hi, d.abs);
                }
    return hi == 0 ? std::make_pair(kPlotFloor, 1.0) : std::make_pair(lo, hi);
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
        for (size_t i = 0; i < margin_.size() && (i + 1) * k <= ref.outputs.size(); ++i) margin_[i] = reference_margin(ref, i);
    }
}

QString SampleModel::columnName(int s) const {
    if (s == 0) return QStringLiteral("Sample");
    if (s == 1) return QStringLiteral("Tag");
    if (s == kMarginColumn) return QStringLiteral("ref margin");
    const int c = (s - 3) / 3, k = (s - 3) % 3;
    const auto p = qs(to_string(run_.comparisons[size_t(c)].precision));
    return k == 0   ? QString(p + QStringLiteral(" |Δ|"))
           : k == 1 ? QString(p + QStringLiteral(" rel"))
                    : QString(p + QStringLiteral(" decision"));
}

QVariant SampleModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid() || idx.row() >= int(run_.samples.size())) return {};
    const size_t i = size_t(idx.row());
    if (idx.column() < 2) {
        if (role == Qt::DisplayRole || role == SortRole) return qs(idx.column() == 0 ? run_.samples[i].id : run_.samples[i].tag);
        if (role == PlotRole && idx.column() == 0) return double(i);
        return {};
    }
    if (idx.column() == kMarginColumn) {
        const double m = i < margin_.size() ? margin_[i] : 0.0;
        if (role == PlotRole) return std::max(m, kPlotFloor);
        if (role == SortRole) return m;
        if (role == Qt::DisplayRole) return num(m);
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
                          .arg(qs(d.sample), qs(d.tag), qs(to_string(cmp.precision)))
                          .arg(d.finite ? QString::number(d.abs, 'g', 4) : QStringLiteral("non-finite"))
                          .arg(QString::number(d.rel, 'g', 4));
        if (i < cmp.ref_decisions.size())
            tip += QStringLiteral("\ndecision: reference %1, AMP %2%3")
                       .arg(qs(decision_label(cmp.ref_decisions[i])), qs(decision_label(cmp.amp_decisions[i])))
                       .arg(flipped ? QStringLiteral(" (flipped)") : QString());
        return tip;
    }
    if (role == SortRole) {
        if (k == 0) return d.finite ? d.abs : 1e300;
        if (k == 1) return d.finite ? d.rel : 1e300;
        return flipped ? 1 : 0;
    }
    if (role == Qt::DisplayRole) {
        if (k == 0) return d.finite ? num(d.abs) : QStringLiteral("non-finite");
        if (k == 1) return d.finite ? num(d.rel) : QStringLiteral("-");
        if (i >= cmp.ref_decisions.size()) return QStringLiteral("-");
        return flipped ? QStringLiteral("%1 → %2").arg(qs(decision_label(cmp.ref_decisions[i])), qs(decision_label(cmp.amp_decisions[i])))
                       : qs(decision_label(cmp.ref_decisions[i]));
    }
    if (role == Qt::ForegroundRole) {
        if ((k < 2 && !d.within_tolerance) || (k == 2 && flipped)) return bad();
    }
    return {};
}

// ---- FlipModel ------------------------------------------------------------------------------

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
    : TableModel(parent, {QStringLiteral("Precision"), QStringLiteral("Sample"), QStringLiteral("Tag"), QStringLiteral("Position"),
                          QStringLiteral("Reference class"), QStringLiteral("AMP class"), QStringLiteral("Reference margin"),
                          QStringLiteral("AMP margin")}) {}

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
    auto cls = [](int c) { return qs(decision_label(c)); };
    switch (idx.column()) {
        case Precision_: return qs(to_string(r.precision));
        case Sample: return qs(r.flip.sample);
        case Tag: return qs(r.flip.tag);
        case Position:
            if (r.flip.position < 0) return {};
            return role == SortRole ? QVariant(r.flip.position) : QVariant(QString::number(r.flip.position));
        case Ref: return role == SortRole ? QVariant(r.flip.ref) : QVariant(cls(r.flip.ref));
        case Amp: return role == SortRole ? QVariant(r.flip.amp) : QVariant(cls(r.flip.amp));
        case RefMargin: return role == SortRole ? QVariant(r.flip.ref_margin) : QVariant(num(r.flip.ref_margin));
        case AmpMargin: return role == SortRole ? QVariant(r.flip.amp_margin) : QVariant(num(r.flip.amp_margin));
    }
    return {};
}

// ---- LayerModel -----------------------------------------------------------------------------

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
    if (role == ModuleRole) return qs(l.module);
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
            .arg(l.module.empty() ? QStringLiteral("(root)") : qs(l.module), qs(l.op), qs(l.dtype))
            .arg(l.stats.absmax, 0, 'g', 4)
            .arg(l.stats.nan)
            .arg(l.stats.posinf)
            .arg(l.stats.neginf)
            .arg(bf ? l.stats.bf16_overflow : l.stats.fp16_overflow)
            .arg(bf ? l.stats.bf16_subnormal : l.stats.fp16_subnormal)
            .arg(l.origin ? QStringLiteral("\nNaN/Inf born here") : QString());
    }
    const double h = headroom(l, pass_.precision == Precision::Fp32 ? Precision::Fp16 : pass_.precision);
    const QString state = l.origin ? QStringLiteral("origin") : l.stats.nonfinite() ? QStringLiteral("propagated") : QString();
    if (role == Qt::DisplayRole || role == SortRole) {
        const bool sort = role == SortRole;
        switch (idx.column()) {
            case Index: return l.index;
            case Module: return l.module.empty() ? QStringLiteral("(root)") : qs(l.module);
            case Op: return qs(l.op);
            case Dtype: return qs(l.dtype);
            case Absmax: return sort ? QVariant(l.stats.absmax) : QVariant(num(l.stats.absmax));
            case Headroom: return sort ? QVariant(std::isfinite(h) ? h : 1e9) : QVariant(std::isfinite(h) ? num(h) : QStringLiteral("-"));
            case Fp16Overflow: return qlonglong(l.stats.fp16_overflow);
            case Fp16Subnormal: return qlonglong(l.stats.fp16_subnormal);
            case NonFinite: return qlonglong(l.stats.nonfinite());
            case State: return state;
        }
    }
    if (role == Qt::ForegroundRole && (l.origin || l.stats.nonfinite())) return l.origin ? bad() : QColor(200, 120, 30);
    if (role == Qt::FontRole && l.origin) {
        QFont f;
        f.setBold(true);
        return f;
    }
    if (role == Qt::ToolTipRole) {
        QString shape;
        for (auto d : l.shape) shape += (shape.isEmpty() ? QString() : QStringLiteral("×")) + QString::number(d);
        return QStringLiteral("shape %1\nmin %2 max %3 mean %4 rms %5\nsmallest |x|>0 %6\nbf16 overflow %7, subnormal %8\nautocast %9")
            .arg(shape, num(l.stats.min), num(l.stats.max), num(l.stats.mean), num(l.stats.rms), num(l.stats.min_nonzero_abs))
            .arg(l.stats.bf16_overflow)
            .arg(l.stats.bf16_subnormal)
            .arg(l.autocast ? QStringLiteral("on") : QStringLiteral("off (FP32 region or reference)"));
    }
    return {};
}

// ---- TrainingStepModel -------------------------------------------------------------------------

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
    : TableModel(parent,
                 {QStringLiteral("Step"), QStringLiteral("Loss (FP32)"), QStringLiteral("Loss (AMP)"), QStringLiteral("Scale"),
                  QStringLiteral("Skipped"), QStringLiteral("Effective updates"), QStringLiteral("Grad norm"), QStringLiteral("LR"),
                  QStringLiteral("Divergence"), QStringLiteral("Underflow"), QStringLiteral("Non-finite"), QStringLiteral("Origin")}) {}

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
    }
    return std::nan("");
}

QVariant TrainingStepModel::data(const QModelIndex& idx, int role) const {
    if (!idx.isValid() || idx.row() >= int(steps_.size())) return {};
    const auto& s = steps_[size_t(idx.row())];
    auto origin = [&s] {
        if (!s.origin) return QString();
        QString o = (s.origin->module.empty() ? QStringLiteral("(root)") : qs(s.origin->module)) + QStringLiteral(", ") + qs(s.origin->op);
        if (!s.origin->grad_fn.empty()) o += QStringLiteral(" in ") + qs(s.origin->grad_fn);
        return o;
    };
    if (role == PlotRole || role == SortRole) {
        if (role == SortRole && idx.column() == Stage) return qs(s.nonfinite_stage);
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
            case Underflow: return s.grad_underflow >= 0 ? QVariant(qlonglong(s.grad_underflow)) : QVariant(QStringLiteral("-"));
            case Stage: return qs(s.nonfinite_stage);
            case Origin: return origin();
        }
    }
    if (role == SummaryRole)
        return QStringLiteral("step %1: loss FP32 %2, AMP %3\nscale %4%5, %6 effective updates\ngrad norm %7, divergence %8%9")
            .arg(s.step)
            .arg(figure(s.loss_ref), figure(s.loss_amp), figure(s.scale))
            .arg(s.skipped ? QStringLiteral(" (skipped)") : QString())
            .arg(s.effective_updates)
            .arg(figure(s.grad_norm), figure(s.divergence))
            .arg(s.nonfinite_stage.empty() ? QString() : QStringLiteral("\nnon-finite: %1 — %2").arg(qs(s.nonfinite_stage), origin()));
    if (role == Qt::ForegroundRole && (s.skipped || !s.nonfinite_stage.empty())) return bad();
    return {};
}

}  // namespace ampscope::ui
