// SPDX-License-Identifier: MIT
// AdviseDialog: layout, the granularity, starting and cancelling the advisor, its progress.
#include "advisedialog.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QVBoxLayout>

#include "advisejob.h"
#include "advisemodel.h"
#include "ampscope/engine/errors.h"
#include "charts.h"
#include "errorreporter.h"

namespace ampscope::ui {

namespace {
/// The advisor's stages in the order it runs them (progress "stage k of n").
const QStringList kStages = {QStringLiteral("reference"),   QStringLiteral("amp passes"), QStringLiteral("fp32 check"),
                             QStringLiteral("sensitivity"), QStringLiteral("search"),     QStringLiteral("shares")};
}  // namespace

AdviseDialog::AdviseDialog(const RunResult& run, ErrorReporter* reporter, QWidget* parent)
    : QDialog(parent),
      run_(run),
      reporter_(reporter),
      job_(new AdviseJob(this)),
      sensitivity_(new SensitivityModel(this)) {
    setWindowTitle(QStringLiteral("Advise FP32 regions — run %1").arg(runUuid().left(8)));
    setModal(false);
    auto* v = new QVBoxLayout(this);
    v->addWidget(buildControls());
    v->addWidget(buildProgress());
    outcome_ = new QLabel(QStringLiteral(
        "Nothing has run yet. Choose which modules are candidates (leaf modules, blocks, or modules down to a depth) "
        "and press Advise: the advisor measures how much error each module introduces under autocast, then "
        "searches for the smallest set of modules to keep in FP32 so that every AMP pass meets this run's criteria."));
    outcome_->setObjectName(QStringLiteral("adviseOutcome"));
    outcome_->setWordWrap(true);
    v->addWidget(outcome_);
    warnings_ = new QLabel;
    warnings_->setObjectName(QStringLiteral("adviseWarnings"));
    warnings_->setWordWrap(true);
    warnings_->setTextFormat(Qt::PlainText);  // the model's names, as they are
    warnings_->hide();
    v->addWidget(warnings_);
    v->addWidget(buildViews(), 1);
    v->addWidget(buildButtons());
    connectJob();
    setRunning(false);
    updateButtons();
    resize(980, 720);
}

AdviseDialog::~AdviseDialog() = default;  // the job (a child) cancels and joins its worker

QString AdviseDialog::runUuid() const {
    return QString::fromStdString(run_.run_id);
}

QWidget* AdviseDialog::buildControls() {
    auto* w = new QWidget;
    auto* h = new QHBoxLayout(w);
    h->setContentsMargins(0, 0, 0, 0);
    QString precisions;
    for (auto p : run_.spec.precisions)
        precisions += (precisions.isEmpty() ? QString() : QStringLiteral(", ")) + QString::fromStdString(to_string(p));
    auto* about = new QLabel(QStringLiteral("Run %1: %2 on %3, %4; criteria as recorded.")
                                 .arg(runUuid().left(8), QString::fromStdString(run_.spec.model),
                                      QString::fromStdString(run_.spec.probes), precisions));
    about->setWordWrap(true);
    granularity_ = new QComboBox;
    granularity_->setObjectName(QStringLiteral("adviseGranularity"));
    granularity_->addItems({QStringLiteral("leaf"), QStringLiteral("block"), QStringLiteral("depth")});
    granularity_->setToolTip(
        QStringLiteral("leaf: modules without children; block: each element of a numbered container (blocks.0) "
                       "and every leaf outside one; depth: modules with N path components"));
    depth_ = new QSpinBox;
    depth_->setRange(1, 64);
    depth_->setValue(2);
    depth_->setEnabled(false);
    connect(granularity_, &QComboBox::currentIndexChanged, this, [this](int i) { depth_->setEnabled(i == 2); });
    start_ = new QPushButton(QStringLiteral("Advise"));
    start_->setDefault(true);
    cancel_ = new QPushButton(QStringLiteral("Cancel"));
    connect(start_, &QPushButton::clicked, this, [this] { start(); });
    connect(cancel_, &QPushButton::clicked, this, &AdviseDialog::cancel);
    h->addWidget(about, 1);
    h->addWidget(new QLabel(QStringLiteral("Candidates:")));
    h->addWidget(granularity_);
    h->addWidget(depth_);
    h->addWidget(start_);
    h->addWidget(cancel_);
    return w;
}

QWidget* AdviseDialog::buildProgress() {
    auto* w = new QWidget;
    auto* h = new QHBoxLayout(w);
    h->setContentsMargins(0, 0, 0, 0);
    stage_ = new QLabel;
    stage_->setObjectName(QStringLiteral("adviseStage"));
    progress_ = new QProgressBar;
    progress_->setRange(0, 1000);
    h->addWidget(stage_);
    h->addWidget(progress_, 1);
    return w;
}

QWidget* AdviseDialog::buildViews() {
    tabs_ = new QTabWidget;
    chart_ = new ChartWidget(
        sensitivity_, [this] { return makeSensitivityChart(sensitivity_); },
        QStringLiteral("No sensitivity yet: it is measured after the reference and the plain AMP passes, when they "
                       "fail the criteria "
                       "(per module, on the FP32 reference's own inputs to it)."));
    auto* chartScroll = new QScrollArea;  // one row per module: many modules scroll
    chartScroll->setObjectName(QStringLiteral("sensitivityScroll"));
    chartScroll->setWidget(chart_);
    chartScroll->setWidgetResizable(true);
    chartScroll->setFrameShape(QFrame::NoFrame);
    chartScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    tabs_->addTab(chartScroll, QStringLiteral("Sensitivity chart"));
    auto* proxy = new QSortFilterProxyModel(this);
    proxy->setSourceModel(sensitivity_);
    proxy->setSortRole(SensitivityModel::SortRole);
    table_ = new QTableView;
    table_->setObjectName(QStringLiteral("sensitivityTable"));
    table_->setModel(proxy);
    table_->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);  // the advisor's rank until the user sorts
    table_->setSortingEnabled(true);
    table_->horizontalHeader()->setSectionResizeMode(SensitivityModel::Module, QHeaderView::Stretch);
    table_->verticalHeader()->setVisible(true);  // the rank
    tabs_->addTab(table_, QStringLiteral("Ranked table"));
    tabs_->addTab(buildSetTab(), QStringLiteral("Proposed set"));
    return tabs_;
}

QWidget* AdviseDialog::buildSetTab() {
    auto* w = new QWidget;
    auto* v = new QVBoxLayout(w);
    reasons_ = new QTableWidget(0, 3);
    reasons_->setObjectName(QStringLiteral("adviseReasons"));
    reasons_->setHorizontalHeaderLabels({QStringLiteral("Module"), QStringLiteral("Why"), QStringLiteral("Detail")});
    reasons_->horizontalHeader()->setStretchLastSection(true);
    reasons_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    summary_ = new QLabel(QStringLiteral("No set proposed yet."));
    summary_->setObjectName(QStringLiteral("adviseSummary"));
    summary_->setWordWrap(true);
    verified_ = new QLabel;
    verified_->setWordWrap(true);
    verified_->hide();
    v->addWidget(summary_);
    v->addWidget(reasons_, 1);
    v->addWidget(verified_);
    return w;
}

QWidget* AdviseDialog::buildButtons() {
    auto* w = new QWidget;
    auto* h = new QHBoxLayout(w);
    h->setContentsMargins(0, 0, 0, 0);
    apply_ = new QPushButton(QStringLiteral("Apply and re-run"));
    apply_->setToolTip(
        QStringLiteral("Record the verifying run: this run's spec and criteria with the set kept in FP32"));
    save_ = new QPushButton(QStringLiteral("Save set…"));
    save_->setToolTip(
        QStringLiteral("The advise JSON: ampscope-cli run --keep-fp32-file and the New-run dialog read it"));
    copy_ = new QPushButton(QStringLiteral("Copy Python snippet"));
    auto* close = new QPushButton(QStringLiteral("Close"));
    connect(apply_, &QPushButton::clicked, this, &AdviseDialog::applyAndRerun);
    connect(save_, &QPushButton::clicked, this, &AdviseDialog::saveSetInteractively);
    connect(copy_, &QPushButton::clicked, this, &AdviseDialog::copyPythonSnippet);
    connect(close, &QPushButton::clicked, this, &QDialog::close);
    h->addWidget(apply_);
    h->addWidget(save_);
    h->addWidget(copy_);
    h->addStretch();
    h->addWidget(close);
    return w;
}

void AdviseDialog::connectJob() {
    connect(job_, &AdviseJob::progress, this, &AdviseDialog::onProgress);
    connect(job_, &AdviseJob::finished, this, [this](const AdviseResult& r) {
        setRunning(false);
        showResult(r, true);
        stage_->setText(QStringLiteral("done: %1 forward passes").arg(r.passes_used));
        Q_EMIT ended(QStringLiteral("finished"));
    });
    connect(job_, &AdviseJob::cancelled, this, [this](const AdviseResult& partial) {
        setRunning(false);
        showResult(partial, false);
        stage_->setText(QStringLiteral("cancelled; what was found so far is kept"));
        Q_EMIT ended(QStringLiteral("cancelled"));
    });
    connect(job_, &AdviseJob::failed, this,
            [this](const QString& title, const QString& message, const AdviseResult& partial) {
                setRunning(false);
                showResult(partial, false);
                stage_->setText(QStringLiteral("failed"));
                outcome_->setText(QStringLiteral("The advisor stopped: %1").arg(message));
                if (reporter_) reporter_->error(this, title, message);
                Q_EMIT ended(QStringLiteral("failed"));
            });
}

void AdviseDialog::setGranularity(const QString& text) {
    bool number = false;
    const int n = text.toInt(&number);
    granularity_->setCurrentIndex(number ? 2 : text == QStringLiteral("block") ? 1 : 0);
    if (number) depth_->setValue(n);
}

QString AdviseDialog::granularity() const {
    return granularity_->currentIndex() == 2 ? QString::number(depth_->value()) : granularity_->currentText();
}

AdviseSpec AdviseDialog::adviseSpec() const {
    // the recorded run's spec and criteria; the advice refuses model or probe files changed since
    return advise_spec_of(run_, parse_granularity(granularity().toStdString()));
}

bool AdviseDialog::start() {
    AdviseSpec spec;
    try {
        spec = adviseSpec();
    } catch (const InputError& e) {
        if (reporter_) reporter_->error(this, QStringLiteral("Cannot advise"), QString::fromStdString(e.what()));
        return false;
    }
    if (!job_->start(spec)) return false;
    result_.reset();
    complete_ = false;
    verifiedRun_.clear();
    verifiedVerdict_.clear();
    sensitivity_->clearData();
    showSet(AdviseResult{});
    outcome_->setText(QStringLiteral("Advising at granularity %1…").arg(granularity()));
    setRunning(true);
    updateButtons();
    return true;
}

void AdviseDialog::cancel() {
    if (!job_->running()) return;
    job_->cancel();
    stage_->setText(stage_->text() + QStringLiteral(" — cancelling…"));
}

bool AdviseDialog::running() const {
    return job_->running();
}

void AdviseDialog::setRunning(bool running) {
    start_->setEnabled(!running);
    cancel_->setEnabled(running);
    granularity_->setEnabled(!running);
    depth_->setEnabled(!running && granularity_->currentIndex() == 2);
    progress_->setVisible(running);
    if (running) stage_->setText(QStringLiteral("starting…")), stageIndex_ = 0, stageName_ = kStages.front();
    progress_->setValue(0);
}

void AdviseDialog::onProgress(const QString& stage, int done, int total) {
    const int k = int(kStages.indexOf(stage));
    const QString at = QStringLiteral("%1/%2").arg(done).arg(total);
    if (k < 0) {  // a pass inside the advisor's stage (e.g. "pass fp16"): shown after it
        stage_->setText(QStringLiteral("stage %1 of %2: %3 — %4 (%5)")
                            .arg(stageIndex_ + 1)
                            .arg(kStages.size())
                            .arg(stageName_, stage, at));
        return;
    }
    stageIndex_ = k;
    stageName_ = stage;
    stage_->setText(QStringLiteral("stage %1 of %2: %3 (%4)").arg(k + 1).arg(kStages.size()).arg(stage, at));
    progress_->setValue(total > 0 ? int(1000LL * done / total) : 0);
}

QString AdviseDialog::outcomeText() const {
    return outcome_->text();
}

QString AdviseDialog::summaryText() const {
    return summary_->text();
}

QString AdviseDialog::warningsText() const {
    return warnings_->isHidden() ? QString() : warnings_->text();
}

QString AdviseDialog::stageText() const {
    return stage_->text();
}

}  // namespace ampscope::ui
