// SPDX-License-Identifier: MIT
// ReplayView: layout, the two sides, the remedies' buttons and their questions.
#include "replayview.h"

#include <QChart>
#include <QFileDialog>
#include <QGridLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QLegend>
#include <QLineSeries>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QTabWidget>
#include <QStyle>
#include <QTableView>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "ampscope/engine/bundle.h"
#include "ampscope/engine/errors.h"
#include "charts.h"
#include "newrundialog.h"
#include "replaymodel.h"
#include "uitext.h"

namespace ampscope::ui {

namespace {

const QString kEmptyText = QStringLiteral(
    "<h3>No incident replay selected</h3><p>This view shows a NaN incident of your own training job replayed from your "
    "checkpoint and the failing batch: the FP32 reference step beside the AMP step as the job was configured, where "
    "values "
    "first went non-finite, the scale GradScaler used and whether it skipped, and a remedy replayed beside the "
    "original (a "
    "module kept in FP32, BF16, another scale, clipping).</p><p>Choose File → Replay incident… (Ctrl+Shift+R), or "
    "select a "
    "recorded replay in the run browser.</p>");

QTableView* replayTable(QAbstractItemModel* model) {
    auto* proxy = new QSortFilterProxyModel(model);
    proxy->setSourceModel(model);
    proxy->setSortRole(ReplayTableModel::SortRole);
    auto* v = new QTableView;
    v->setModel(proxy);
    v->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);  // execution order until the user sorts
    v->setSortingEnabled(true);
    v->setSelectionBehavior(QAbstractItemView::SelectRows);
    v->verticalHeader()->hide();
    v->setAlternatingRowColors(true);
    v->setWordWrap(false);
    v->setTextElideMode(Qt::ElideNone);                   // columns are sized to their content; the table scrolls
    v->horizontalHeader()->setStretchLastSection(false);  // a stretched last column can end narrower than its text
    // every column as wide as its header and cells: nothing elided, the table scrolls sideways
    auto fit = [v] { v->resizeColumnsToContents(); };
    QObject::connect(model, &QAbstractItemModel::modelReset, v, fit);
    // a few rows readable below the charts (the page scrolls), with the sideways scroll bar
    v->setMinimumHeight(v->horizontalHeader()->sizeHint().height() + 4 * v->verticalHeader()->defaultSectionSize() +
                        v->style()->pixelMetric(QStyle::PM_ScrollBarExtent) + 2 * v->frameWidth());
    return v;
}

/// `c` as a replay chart: the lines with a marker at each point (a replay of one step has one
/// point a line alone would not show), the legend's text a little smaller (two charts side by
/// side: every entry in full).
QChart* compact(QChart* c) {
    for (auto* s : c->series())
        if (auto* line = qobject_cast<QLineSeries*>(s)) line->setPointsVisible(true);
    QFont f = c->legend()->font();
    f.setPointSizeF(f.pointSizeF() * 0.85);
    c->legend()->setFont(f);
    return c;
}

/// `c` (the Training view's loss or scale chart) over a replay's steps: the x axis names them
/// steps, and a single step stands in the middle of its axis rather than at its edge.
QChart* overSteps(QChart* c) {
    double lo = 1e300, hi = -1e300;
    for (auto* s : c->series())
        if (auto* xy = qobject_cast<QXYSeries*>(s))
            for (const auto& p : xy->points()) {
                lo = std::min(lo, p.x());
                hi = std::max(hi, p.x());
            }
    for (auto* a : c->axes(Qt::Horizontal))
        if (auto* x = qobject_cast<QValueAxis*>(a)) {
            x->setTitleText(QStringLiteral("step"));
            if (lo <= hi && hi - lo < 2) {
                x->setRange(lo - 1, hi + 1);
                x->setTickCount(int(hi - lo) + 3);  // a tick per step
            }
        }
    return compact(c);
}

}  // namespace

ReplayView::ReplayView(QWidget* parent) : QWidget(parent) {
    for (int s = 0; s < 2; ++s) {
        steps_[s] = new ReplayStepModel(this);
        training_[s] = new ReplayTrainingModel(this);
        layers_[s] = new ReplayLayerModel(this);
        params_[s] = new ReplayParamModel(this);
    }
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(0, 0, 0, 0);
    outer->addWidget(buildProgress());  // seen with or without a replay shown
    stack_ = new QStackedWidget;
    empty_ = new QLabel(kEmptyText);
    empty_->setObjectName(QStringLiteral("emptyState"));
    empty_->setAlignment(Qt::AlignCenter);
    empty_->setWordWrap(true);
    empty_->setMargin(24);
    stack_->addWidget(empty_);
    auto* content = new QWidget;
    stack_->addWidget(content);
    outer->addWidget(stack_, 1);
    auto* v = new QVBoxLayout(content);
    v->setContentsMargins(0, 0, 0, 0);
    v->addWidget(buildRemedies());
    change_ = new QLabel;
    change_->setObjectName(QStringLiteral("replayChange"));
    change_->setWordWrap(true);
    change_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    v->addWidget(change_);
    auto* sides = new QWidget;  // in the layout, not a splitter: each side as high as its text
    auto* sh = new QHBoxLayout(sides);
    sh->setContentsMargins(0, 0, 0, 0);
    for (int s = 0; s < 2; ++s) {
        summary_[s] = new QLabel;
        summary_[s]->setObjectName(s == Original ? QStringLiteral("replayOriginal") : QStringLiteral("replayRemedy"));
        summary_[s]->setWordWrap(true);
        summary_[s]->setTextFormat(Qt::RichText);
        summary_[s]->setTextInteractionFlags(Qt::TextSelectableByMouse);
        summary_[s]->setAlignment(Qt::AlignTop | Qt::AlignLeft);
        summary_[s]->setFrameShape(QFrame::StyledPanel);
        summary_[s]->setMargin(6);
        sh->addWidget(summary_[s], 1);
    }
    v->addWidget(sides);
    v->addWidget(buildTables(), 1);
    clear();
}

QWidget* ReplayView::buildRemedies() {
    auto* w = new QWidget;
    auto* g = new QGridLayout(w);
    g->setContentsMargins(0, 0, 0, 0);
    const QString names[] = {QStringLiteral("Keep the first non-finite module in FP32"),
                             QStringLiteral("BF16 instead of FP16"),
                             QStringLiteral("Initial scale…"),
                             QStringLiteral("Growth interval…"),
                             QStringLiteral("Clip gradient norm…"),
                             QStringLiteral("Keep the advisor's set in FP32…")};
    const QString tips[] = {
        QStringLiteral("Replay with the module where values first went non-finite run without autocast"),
        QStringLiteral("Replay with autocast to BF16 (FP32's range) instead of FP16"),
        QStringLiteral("Replay with GradScaler starting at another scale than the checkpoint's"),
        QStringLiteral("Replay with another GradScaler growth_interval"),
        QStringLiteral("Replay with the unscaled gradients clipped to a norm"),
        QStringLiteral("Replay with the modules of an advise JSON (Advise FP32 regions… → Save set…, or "
                       "ampscope-cli advise --json) kept in FP32")};
    g->addWidget(new QLabel(QStringLiteral("Remedies:")), 0, 0, 2, 1);
    for (int i = 0; i < int(Remedy::Count); ++i) {
        auto* b = new QPushButton(names[i]);
        b->setToolTip(tips[i]);
        b->setObjectName(QStringLiteral("remedy%1").arg(i));
        connect(b, &QPushButton::clicked, this, [this, i] { askRemedy(Remedy(i)); });
        buttons_[i] = b;
        g->addWidget(b, i / 3, 1 + i % 3);
    }
    g->setColumnStretch(4, 1);
    return w;
}

QWidget* ReplayView::buildProgress() {
    auto* w = new QWidget;
    w->setObjectName(QStringLiteral("replayProgress"));
    auto* h = new QHBoxLayout(w);
    h->setContentsMargins(0, 0, 0, 0);
    progressLabel_ = new QLabel;
    progress_ = new QProgressBar;
    progress_->setRange(0, 0);
    cancel_ = new QPushButton(QStringLiteral("Cancel"));
    connect(cancel_, &QPushButton::clicked, this, &ReplayView::cancelRequested);
    h->addWidget(progressLabel_);
    h->addWidget(progress_, 1);
    h->addWidget(cancel_);
    w->hide();
    return w;
}

QWidget* ReplayView::buildTables() {
    tabs_ = new QTabWidget;
    const QString names[] = {QStringLiteral("Steps"), QStringLiteral("Activations (per module)"),
                             QStringLiteral("Parameters")};
    for (int t = 0; t < 3; ++t) {
        auto* split =
            new QSplitter(Qt::Vertical);  // the original above the remedy: their columns line up, at full width
        split->setChildrenCollapsible(false);
        for (int s = 0; s < 2; ++s) {
            QAbstractItemModel* m = t == kStepsTable    ? static_cast<QAbstractItemModel*>(steps_[s])
                                    : t == kLayersTable ? static_cast<QAbstractItemModel*>(layers_[s])
                                                        : static_cast<QAbstractItemModel*>(params_[s]);
            tables_[s][t] = replayTable(m);
            titles_[s][t] = new QLabel;
            auto* box = new QWidget;
            auto* bv = new QVBoxLayout(box);
            bv->setContentsMargins(0, 0, 0, 0);
            bv->addWidget(titles_[s][t]);
            bv->addWidget(tables_[s][t], 1);
            split->addWidget(box);
        }
        auto* page = new QSplitter(Qt::Vertical);  // the charts above the tables, as in the other views
        page->addWidget(buildCharts(Tables(t)));
        page->addWidget(split);
        page->setChildrenCollapsible(false);
        page->setStretchFactor(0, 3);
        page->setStretchFactor(1, 2);
        auto* scroll = new QScrollArea;  // each chart keeps its height: the page scrolls when the window is low
        scroll->setWidget(page);
        scroll->setWidgetResizable(true);
        scroll->setFrameShape(QFrame::NoFrame);
        scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
        tabs_->addTab(scroll, names[t]);
    }
    tabs_->setCurrentIndex(kLayersTable);
    return tabs_;
}

QWidget* ReplayView::buildCharts(Tables t) {
    const std::vector<Charts> charts = t == kStepsTable    ? std::vector<Charts>{kLossChart, kScaleChart}
                                       : t == kLayersTable ? std::vector<Charts>{kLayersChart}
                                                           : std::vector<Charts>{kParamsChart};
    auto* w = new QWidget;
    auto* g = new QGridLayout(w);  // the original's charts beside the remedy's
    g->setContentsMargins(0, 0, 0, 0);
    for (int s = 0; s < 2; ++s) {
        g->addWidget(new QLabel(s == Original ? QStringLiteral("<b>Original</b>") : QStringLiteral("<b>Remedy</b>")), 0,
                     s);
        for (size_t k = 0; k < charts.size(); ++k) g->addWidget(makeChart(Side(s), charts[k]), int(k) + 1, s);
        g->setColumnStretch(s, 1);
    }
    return w;
}

ChartWidget* ReplayView::makeChart(Side side, Charts c) {
    QAbstractItemModel* model = nullptr;
    std::function<QChart*()> build;
    switch (c) {
        case kLossChart:
            model = training_[side];
            build = [m = training_[side]] { return overSteps(makeLossChart(m)); };
            break;
        case kScaleChart:
            model = training_[side];
            build = [m = training_[side]] { return overSteps(makeScaleChart(m)); };
            break;
        case kLayersChart:
            model = layers_[side];
            build = [m = layers_[side]] { return compact(makeReplayLayerChart(m)); };
            break;
        default:
            model = params_[side];
            build = [m = params_[side]] { return compact(makeReplayParamChart(m)); };
            break;
    }
    auto* w = new ChartWidget(model, build,
                              side == Original
                                  ? QStringLiteral("No replay shown.")
                                  : QStringLiteral("No remedy yet: a remedy chosen above is replayed and shown here."));
    connect(w, &ChartWidget::exportFailed, this,
            [this](const QString& m) { Q_EMIT failed(QStringLiteral("Cannot export chart"), m); });
    charts_[side][c] = w;
    return w;
}

void ReplayView::clear() {
    original_.reset();
    remedy_.reset();
    showSide(Original, nullptr);
    showSide(Remedied, nullptr);
    change_->clear();
    stack_->setCurrentWidget(empty_);
    updateButtons();
}

void ReplayView::setOriginal(const ReplayResult& r) {
    original_ = r;
    remedy_.reset();
    showSide(Original, &*original_);
    showSide(Remedied, nullptr);
    stack_->setCurrentIndex(1);
    change_->setText(
        QStringLiteral("Original: %1. Choose a remedy above to replay it beside the original.").arg(verdictText(r)));
    updateButtons();
}

void ReplayView::setRemedy(const ReplayResult& r) {
    remedy_ = r;
    showSide(Remedied, &*remedy_);
    if (original_)
        change_->setText(QStringLiteral("%1: %2; original: %3")
                             .arg(changeText(*original_, r.spec), verdictText(r), verdictText(*original_)));
    updateButtons();
}

void ReplayView::showSide(Side side, const ReplayResult* r) {
    const QString who = side == Original ? QStringLiteral("Original") : QStringLiteral("Remedy");
    for (int t = 0; t < 3; ++t) titles_[side][t]->setText(QStringLiteral("<b>%1</b>").arg(who));
    if (!r) {
        steps_[side]->clearData();
        training_[side]->clearData();
        layers_[side]->clearData();
        params_[side]->clearData();
        summary_[side]->setText(side == Original
                                    ? QStringLiteral("<b>Original</b>: no replay shown.")
                                    : QStringLiteral("<b>Remedy</b>: none yet. A remedy replays the original "
                                                     "with one change and is shown here."));
        return;
    }
    steps_[side]->resetData(*r);
    training_[side]->resetData(*r);
    layers_[side]->resetData(*r);
    params_[side]->resetData(*r);
    const bool oneStep = r->steps.size() <= 1;
    for (int t = 0; t < 3; ++t)
        tables_[side][t]->setColumnHidden(0, oneStep && t != kStepsTable);  // Step column: only with several
    QString head = QStringLiteral("<b>%1</b> replay %2").arg(who, htmlText(r->run_id.substr(0, 8)));
    if (side == Remedied && original_) head += QStringLiteral(": ") + changeText(*original_, r->spec).toHtmlEscaped();
    const auto color = r->first_nonfinite ? QStringLiteral("#c82828") : QStringLiteral("#1e8c3c");
    QString keys;
    if (!r->missing.empty() || !r->unexpected.empty() || !r->mismatched.empty())
        keys = QStringLiteral("<br>checkpoint keys: %1 missing, %2 unexpected, %3 mismatched (non-strict)")
                   .arg(r->missing.size())
                   .arg(r->unexpected.size())
                   .arg(r->mismatched.size());
    QString optimizer = htmlText(r->optimizer);
    if (const auto& o = r->optimizer_groups; !o.groups.empty())
        optimizer += QStringLiteral(" (%1 group%2 by %3)")
                         .arg(o.groups.size())
                         .arg(o.groups.size() > 1 ? QStringLiteral("s") : QString())
                         .arg(htmlText(o.mapping));
    if (r->spec.clip_grad_norm > 0) optimizer += QStringLiteral(" · clipping at %1").arg(r->spec.clip_grad_norm);
    const QString incident = incidentInWords(*r);
    summary_[side]->setText(
        QStringLiteral("%1<br>checkpoint format: %2 · optimizer: %3 · precision: %4 · GradScaler: %5%6<br>%9<span "
                       "style='color:%7'>%8</span>")
            .arg(head, htmlText(r->checkpoint_format), optimizer, htmlText(to_string(r->spec.precision)),
                 r->scaler_enabled ? QStringLiteral("enabled") : QStringLiteral("disabled"), keys, color,
                 stageInWords(*r).toHtmlEscaped(),
                 incident.isEmpty() ? QString() : incident.toHtmlEscaped() + QStringLiteral("<br>")));
    for (int t = 0; t < 3; ++t) tables_[side][t]->resizeColumnsToContents();
}

QString ReplayView::incidentInWords(const ReplayResult& r) {
    return QString::fromStdString(incident_in_words(r));
}

void ReplayView::updateButtons() {
    const bool can = original_ && !running_;
    const bool module = original_ && original_->first_nonfinite && !original_->first_nonfinite->module.empty();
    auto* keep = buttons_[int(Remedy::KeepModule)];
    keep->setText(module ? QStringLiteral("Keep %1 in FP32").arg(storedText(original_->first_nonfinite->module))
                         : QStringLiteral("Keep the first non-finite module in FP32"));
    keep->setEnabled(can && module);
    buttons_[int(Remedy::Bf16)]->setEnabled(can && original_->spec.precision == Precision::Fp16);
    for (auto r : {Remedy::Clip, Remedy::AdvisorSet}) buttons_[int(r)]->setEnabled(can);
    for (auto r : {Remedy::InitScale, Remedy::GrowthInterval})  // nothing to set on a replay without GradScaler
        buttons_[int(r)]->setEnabled(can && original_->scaler_enabled);
}

void ReplayView::setRunning(bool running, const QString& what) {
    running_ = running;
    cancel_->parentWidget()->setVisible(running);
    cancel_->setEnabled(running);
    if (running) {
        progressLabel_->setText(QStringLiteral("Replaying %1…").arg(what));
        progress_->setRange(0, 0);
    }
    updateButtons();
}

void ReplayView::setProgress(const QString& stage, int done, int total) {
    progressLabel_->setText(QStringLiteral("%1 %2 of %3").arg(stage).arg(done + 1).arg(total));
    progress_->setRange(0, std::max(total, 1));
    progress_->setValue(done);
}

void ReplayView::askRemedy(Remedy r) {
    if (!original_) return;
    bool ok = true;
    double value = 0;
    const double scale = original_->steps.empty() ? 65536.0 : original_->steps.front().scale;
    switch (r) {
        case Remedy::InitScale:
            value = QInputDialog::getDouble(
                this, QStringLiteral("Initial scale"), QStringLiteral("GradScaler's scale for the replay:"),
                std::isfinite(scale) && scale > 1 ? scale / 1024 : 1.0, 1e-30, 1e30, 6, &ok);
            break;
        case Remedy::GrowthInterval:
            value = QInputDialog::getInt(this, QStringLiteral("Growth interval"),
                                         QStringLiteral("GradScaler's growth_interval:"), 2000, 1, 1 << 30, 1, &ok);
            break;
        case Remedy::Clip:
            value = QInputDialog::getDouble(this, QStringLiteral("Clip gradient norm"),
                                            QStringLiteral("Largest norm of the unscaled gradients:"), 1.0, 1e-12, 1e12,
                                            6, &ok);
            break;
        case Remedy::AdvisorSet: {
            const auto f =
                QFileDialog::getOpenFileName(this, QStringLiteral("Keep the advisor's set in FP32"), {},
                                             QStringLiteral("Advise JSON (*.json);;Text (*.txt);;All files (*)"));
            if (!f.isEmpty()) requestAdvisorSet(f);
            return;
        }
        default: break;
    }
    if (ok) requestRemedy(r, value);
}

void ReplayView::requestRemedy(Remedy r, double value) {
    if (!original_ || running_) return;
    const ReplaySpec spec = remedySpec(*original_, r, value);
    Q_EMIT remedyRequested(spec, changeText(*original_, spec));
}

bool ReplayView::requestAdvisorSet(const QString& path) {
    if (!original_ || running_) return false;
    std::vector<std::string> set;
    try {
        set = NewRunDialog::readRegionsFile(path);  // the New-run dialog's Load FP32 regions… reader
    } catch (const InputError& e) {
        Q_EMIT failed(QStringLiteral("Cannot load the advisor's set"), QString::fromStdString(e.what()));
        return false;
    }
    const ReplaySpec spec = remedySpec(*original_, Remedy::AdvisorSet, 0, set);
    Q_EMIT remedyRequested(spec, changeText(*original_, spec));
    return true;
}

QString ReplayView::summaryText(Side side) const {
    return summary_[side]->text();
}

QTableView* ReplayView::currentTable() const {
    const int t = tabs_->currentIndex();
    return tables_[Remedied][t]->hasFocus() ? tables_[Remedied][t] : tables_[Original][t];
}

QString ReplayView::changeLine() const {
    return change_->text();
}

}  // namespace ampscope::ui
