// SPDX-License-Identifier: MIT
// MainWindow: building the window, one builder per tab. Every view says what it shows and
// how to fill it while it has nothing to show.
#include <QAction>
#include <QComboBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTextBrowser>
#include <QScrollArea>
#include <QScrollBar>
#include <QVBoxLayout>

#include "charts.h"
#include "mainwindow.h"
#include "comparemodel.h"
#include "flipmodel.h"
#include "layermodel.h"
#include "runlistmodel.h"
#include "samplemodel.h"
#include "trainingstepmodel.h"
#include "runcontroller.h"
#include "tokenmodel.h"
#include "tokenview.h"

namespace ampscope::ui {

namespace {

QTableView* makeTable(QAbstractItemModel* model, int sortRole) {
    auto* proxy = new QSortFilterProxyModel(model);
    proxy->setSourceModel(model);
    proxy->setSortRole(sortRole);
    auto* v = new QTableView;
    v->setModel(proxy);
    v->horizontalHeader()->setSortIndicator(-1,
                                            Qt::AscendingOrder);  // the model's (execution) order until the user sorts
    v->setSortingEnabled(true);
    v->setSelectionBehavior(QAbstractItemView::SelectRows);
    v->horizontalHeader()->setStretchLastSection(true);
    v->verticalHeader()->hide();
    v->setAlternatingRowColors(true);
    return v;
}

/// `top` (charts) above `bottom` (a table), the charts' share first; the user moves the handle,
/// never below a chart's minimum height (ChartWidget: a plot area of at least 200 px).
QSplitter* stacked(QWidget* top, QWidget* bottom, int topShare = 3, int bottomShare = 2) {
    auto* s = new QSplitter(Qt::Vertical);
    s->addWidget(top);
    s->addWidget(bottom);
    s->setChildrenCollapsible(false);
    s->setStretchFactor(0, topShare);
    s->setStretchFactor(1, bottomShare);
    return s;
}

/// An empty view's text: what is missing, what the view shows, how to fill it.
QString emptyText(const QString& missing, const QString& shows, const QString& fill) {
    return QStringLiteral("<h3>%1</h3><p>This view shows %2</p><p>%3</p>").arg(missing, shows, fill);
}

const QString kNoComparison = QStringLiteral("No comparison run selected");
const QString kPickComparison =
    QStringLiteral("Select a comparison run in the run browser, or start one: File → New run… (Ctrl+N).");

/// The empty state of a view of one comparison run.
QString comparisonEmptyText(const QString& shows) {
    return emptyText(kNoComparison, shows, kPickComparison);
}

}  // namespace

void MainWindow::buildUi() {
    tabs_ = new QTabWidget;
    tabs_->addTab(buildOverviewTab(), QStringLiteral("Overview"));
    tabs_->addTab(buildDeltasTab(), QStringLiteral("Score deltas"));
    tabs_->addTab(buildFlipsTab(), QStringLiteral("Decision flips"));
    tabs_->addTab(buildLayersTab(), QStringLiteral("Layers (first NaN)"));
    tabs_->addTab(buildTrainingTab(), QStringLiteral("Training"));
    tabs_->addTab(buildCompareTab(), QStringLiteral("Compare"));
    tabs_->addTab(buildTokensTab(), QStringLiteral("Tokens"));
    tabs_->addTab(buildReplayTab(), QStringLiteral("Replay"));
    Q_ASSERT(tabs_->count() == NUM_TABS);
    split_ = new QSplitter;
    split_->addWidget(buildRunBrowser());
    split_->addWidget(withNotice(tabs_));
    split_->setStretchFactor(1, 1);
    split_->setCollapsible(0, false);
    setCentralWidget(split_);
    buildStatusBar();
    resize(1280, 820);
}

QWidget* MainWindow::buildRunBrowser() {
    filter_ = new QLineEdit;
    filter_->setPlaceholderText(QStringLiteral("Filter runs (model, device, precision, verdict, status…)"));
    filter_->setClearButtonEnabled(true);
    runView_ = makeTable(runs_, RunListModel::SortRole);
    runView_->sortByColumn(RunListModel::Started, Qt::DescendingOrder);  // the newest run first
    runsProxy_ = static_cast<QSortFilterProxyModel*>(runView_->model());
    runsProxy_->setFilterKeyColumn(-1);
    runsProxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
    runView_->setSelectionMode(QAbstractItemView::ExtendedSelection);
    runView_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    runView_->horizontalHeader()->setStretchLastSection(false);
    runView_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    runView_->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);
    // Device, notes and the run id wait behind the header's menu (and in each row's tool tip):
    // the other columns fit their content beside the views on a 1280-pixel-wide window.
    auto* header = runView_->horizontalHeader();
    header->setContextMenuPolicy(Qt::ActionsContextMenu);
    for (int c = 0; c < RunListModel::NUM_COLUMNS; ++c) {
        auto* a = new QAction(runs_->headerData(c, Qt::Horizontal).toString(), header);
        a->setCheckable(true);
        a->setChecked(c != RunListModel::Device && c != RunListModel::Notes && c != RunListModel::Id);
        runView_->setColumnHidden(c, !a->isChecked());
        connect(a, &QAction::toggled, runView_, [this, c](bool on) { runView_->setColumnHidden(c, !on); });
        header->addAction(a);
    }
    tables_[kOverviewTab] = runView_;
    connect(filter_, &QLineEdit::textChanged, runsProxy_, &QSortFilterProxyModel::setFilterFixedString);
    for (auto sig : {&QAbstractItemModel::rowsInserted, &QAbstractItemModel::rowsRemoved})
        connect(runs_, sig, this, &MainWindow::fitRunBrowser, Qt::QueuedConnection);
    connect(runs_, &QAbstractItemModel::modelReset, this, &MainWindow::fitRunBrowser, Qt::QueuedConnection);
    connect(runs_, &QAbstractItemModel::dataChanged, this, &MainWindow::fitRunBrowser, Qt::QueuedConnection);
    connect(runView_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& cur) {
        if (cur.isValid()) showRun(cur.data(RunListModel::UuidRole).toString());
    });
    auto* left = new QWidget;
    auto* lv = new QVBoxLayout(left);
    lv->setContentsMargins(0, 0, 0, 0);
    lv->addWidget(filter_);
    lv->addWidget(runView_);
    return left;
}

void MainWindow::fitRunBrowser() {
    runView_->resizeColumnsToContents();
    int need = 2 * runView_->frameWidth() + runView_->verticalScrollBar()->sizeHint().width();
    for (int c = 0; c < runs_->columnCount(); ++c)
        if (!runView_->isColumnHidden(c)) need += runView_->columnWidth(c);
    const auto sizes = split_->sizes();
    const int total = sizes.value(0) + sizes.value(1);
    if (sizes.size() != 2 || sizes[0] >= need || total <= 0) return;
    const int left = std::min(need, std::max(sizes[0], total - 640));
    split_->setSizes({left, total - left});
}

QWidget* MainWindow::buildOverviewTab() {
    overview_ = new QTextBrowser;
    overview_->setOpenExternalLinks(false);
    // a run under torchrun: the time of each rank below the overview (hidden for other runs)
    auto* ranks = chartWidgetFor(
        samples_, [m = samples_] { return makeRankChart(m); }, QString());
    ranks->setObjectName(QStringLiteral("rankChart"));
    auto show = [ranks, m = samples_] { ranks->setVisible(m->hasRanks()); };
    show();
    connect(samples_, &QAbstractItemModel::modelReset, ranks, show);
    return stacked(overview_, ranks);
}

ChartWidget* MainWindow::chartWidgetFor(QAbstractItemModel* model, std::function<QChart*()> build,
                                        const QString& emptyText) {
    auto* w = new ChartWidget(model, std::move(build), emptyText);
    connect(w, &ChartWidget::exportFailed, this,
            [this](const QString& m) { error(QStringLiteral("Cannot export chart"), m); });
    return w;
}

QWidget* MainWindow::buildDeltasTab() {
    auto* charts = new QTabWidget;
    charts->addTab(chartWidgetFor(
                       samples_, [m = samples_] { return makeDeltaChart(m); }, QString()),
                   QStringLiteral("Per sample"));
    charts->addTab(chartWidgetFor(
                       samples_, [m = samples_] { return makeDeltaHistogram(m); }, QString()),
                   QStringLiteral("Histogram"));
    tables_[kDeltasTab] = makeTable(samples_, SampleModel::SortRole);
    return withEmptyState(
        stacked(charts, tables_[kDeltasTab]), samples_,
        comparisonEmptyText(QStringLiteral("per probe sample how far each AMP pass's scores are from the FP32 "
                                           "reference, against the tolerance.")));
}

QWidget* MainWindow::buildFlipsTab() {
    auto* chart = chartWidgetFor(
        samples_, [m = samples_] { return makeFlipChart(m); }, QString());
    tables_[kFlipsTab] = makeTable(flips_, FlipModel::SortRole);
    auto positions = [v = tables_[kFlipsTab], m = flips_] { v->setColumnHidden(FlipModel::Position, !m->sequence()); };
    positions();  // a sequence run's flips have positions; a classifier's do not
    connect(flips_, &QAbstractItemModel::modelReset, tables_[kFlipsTab], positions);
    connect(flips_, &QAbstractItemModel::headerDataChanged, tables_[kFlipsTab], positions);
    return withEmptyState(
        stacked(chart, tables_[kFlipsTab]), samples_,
        comparisonEmptyText(QStringLiteral("the samples whose decision (top class) changes under AMP, "
                                           "against the reference margin.")));
}

QWidget* MainWindow::buildLayersTab() {
    auto* layersTab = new QWidget;
    auto* lay = new QVBoxLayout(layersTab);
    auto* bar = new QHBoxLayout;
    passBox_ = new QComboBox;
    keepButton_ = new QPushButton(QStringLiteral("Keep selected module in FP32 and re-run"));
    keepButton_->setObjectName(QStringLiteral("keepModule"));
    keepButton_->setToolTip(QStringLiteral(
        "Starts a run with the same model, probes and criteria, and the selected module as an FP32 region"));
    connect(keepButton_, &QPushButton::clicked, this, &MainWindow::keepSelectedModule);
    connect(passBox_, qOverload<int>(&QComboBox::currentIndexChanged), this, &MainWindow::showLayersOf);
    bar->addWidget(new QLabel(QStringLiteral("Pass")));
    bar->addWidget(passBox_);
    bar->addStretch();
    bar->addWidget(keepButton_);
    lay->addLayout(bar);
    tables_[kLayersTab] = makeTable(layers_, LayerModel::SortRole);
    // a simulated FP8 pass: its operands' headroom in a tab beside the ops' absmax (hidden for other passes)
    auto* fp8 = chartWidgetFor(
        layers_, [m = layers_] { return makeFp8HeadroomChart(m); }, QString());
    fp8->setObjectName(QStringLiteral("fp8HeadroomChart"));
    auto* charts = new QTabWidget;
    charts->setObjectName(QStringLiteral("layerCharts"));
    charts->addTab(chartWidgetFor(
                       layers_, [m = layers_] { return makeLayerChart(m); }, QString()),
                   QStringLiteral("absmax per op"));
    const int fp8Tab = charts->addTab(fp8, QStringLiteral("FP8 headroom"));
    auto tabFp8 = [charts, fp8Tab, m = layers_] { charts->setTabVisible(fp8Tab, !m->fp8Operands().empty()); };
    tabFp8();
    connect(layers_, &QAbstractItemModel::modelReset, charts, tabFp8);
    lay->addWidget(stacked(charts, tables_[kLayersTab]));
    return withEmptyState(
        layersTab, layers_,
        emptyText(QStringLiteral("No per-op statistics to show"),
                  QStringLiteral("every op of one pass in execution order: its largest value against the "
                                 "format's limit, overflow, and where NaN/Inf is born."),
                  QStringLiteral("Select a comparison run recorded with per-op statistics, or start one: "
                                 "File → New run… (Ctrl+N).")));
}

QWidget* MainWindow::buildTrainingTab() {
    // The four charts one below the other at the view's full width (legends and tick labels
    // need it), each at least kMinChartHeight high, scrolled; the steps table below.
    auto* chartsBox = new QWidget;
    auto* column = new QVBoxLayout(chartsBox);
    column->setContentsMargins(0, 0, 0, 0);
    const std::function<QChart*(TrainingStepModel*)> builders[] = {makeLossChart, makeScaleChart, makeUpdatesChart,
                                                                   makeGradChart};
    for (const auto& build : builders)
        column->addWidget(chartWidgetFor(
            steps_, [m = steps_, build] { return build(m); }, QString()));
    auto* scroll = new QScrollArea;
    scroll->setObjectName(QStringLiteral("trainingCharts"));
    scroll->setWidget(chartsBox);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    tables_[kTrainingTab] = makeTable(steps_, TrainingStepModel::SortRole);
    auto* training = stacked(scroll, tables_[kTrainingTab], 3, 1);
    return withEmptyState(
        training, steps_,
        emptyText(QStringLiteral("No training run selected"),
                  QStringLiteral("FP32 reference and AMP training side by side: losses, the loss scale with "
                                 "skipped steps, effective updates, gradient norm and underflow."),
                  QStringLiteral("Select a training run in the run browser, or start one: File → New training "
                                 "run… (Ctrl+Shift+N).")));
}

QWidget* MainWindow::buildCompareTab() {
    compareText_ = new QTextBrowser;
    auto* chart = chartWidgetFor(
        compare_, [m = compare_] { return makeCompareChart(m); }, QString());
    tables_[kCompareTab] = makeTable(compare_, CompareModel::SortRole);
    auto* charts = stacked(chart, tables_[kCompareTab]);
    return withEmptyState(
        stacked(compareText_, charts, 1, 3), compare_,
        emptyText(QStringLiteral("No two runs compared"),
                  QStringLiteral("two comparison runs side by side (e.g. FP16 against BF16, or before and after "
                                 "an FP32 region): verdicts, flips, where NaN/Inf is born, and |Δ| per sample."),
                  QStringLiteral("Select two comparison runs in the run browser (Ctrl+click) and choose Run → "
                                 "Compare two selected runs (Ctrl+D).")));
}

QWidget* MainWindow::buildTokensTab() {
    tokens_ = new TokenView;
    connect(tokens_->chart(), &ChartWidget::exportFailed, this,
            [this](const QString& m) { error(QStringLiteral("Cannot export chart"), m); });
    tables_[kTokensTab] = tokens_->table();
    return withEmptyState(
        tokens_, tokens_->model(),
        emptyText(QStringLiteral("No sequence run selected"),
                  QStringLiteral("a language model's run compared per position (outputs [N, T, V]): KL(ref ‖ amp) "
                                 "along one sample's sequence, the flips at their positions with their token ids, "
                                 "and the positions the attention mask excluded."),
                  QStringLiteral("Select a comparison run of a language model in the run browser, or start one: "
                                 "File → New run… (Ctrl+N) with a .pt2 language model and token probes.")));
}

QWidget* MainWindow::withEmptyState(QWidget* content, QAbstractItemModel* model, const QString& text) {
    auto* stack = new QStackedWidget;
    auto* empty = new QLabel(text);
    empty->setObjectName(QStringLiteral("emptyState"));
    empty->setAlignment(Qt::AlignCenter);
    empty->setWordWrap(true);
    empty->setMargin(24);
    stack->addWidget(empty);
    stack->addWidget(content);
    auto update = [stack, content, model] {
        stack->setCurrentWidget(model->rowCount() > 0 ? content : stack->widget(0));
    };
    update();
    connect(model, &QAbstractItemModel::modelReset, stack, update);
    connect(model, &QAbstractItemModel::rowsInserted, stack, update);
    connect(model, &QAbstractItemModel::rowsRemoved, stack, update);
    return stack;
}

QWidget* MainWindow::withNotice(QWidget* views) {
    auto* right = new QWidget;
    auto* rv = new QVBoxLayout(right);
    rv->setContentsMargins(0, 0, 0, 0);
    notice_ = new QLabel;
    notice_->setObjectName(QStringLiteral("runNotice"));
    notice_->setWordWrap(true);
    notice_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    notice_->setStyleSheet(
        QStringLiteral("QLabel { background: #fdecea; color: #8a1c1c; border: 1px solid #e0a0a0; padding: 6px; }"));
    notice_->hide();
    rv->addWidget(notice_);
    rv->addWidget(views);
    return right;
}

void MainWindow::buildStatusBar() {
    progress_ = new QProgressBar;
    progress_->setRange(0, 1000);
    progress_->setMaximumWidth(220);
    stage_ = new QLabel;
    cancel_ = new QPushButton(QStringLiteral("Cancel"));
    connect(cancel_, &QPushButton::clicked, controller_, &RunController::cancel);
    statusBar()->addPermanentWidget(stage_);
    statusBar()->addPermanentWidget(progress_);
    statusBar()->addPermanentWidget(cancel_);
    setRunning(false);
}

}  // namespace ampscope::ui
