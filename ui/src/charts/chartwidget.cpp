// SPDX-License-Identifier: MIT
#include <QAbstractItemModel>
#include <QAction>
#include <QChart>
#include <QChartView>
#include <QFileDialog>
#include <QLabel>
#include <QStackedLayout>
#include <QTimer>

#include <algorithm>

#include "chartparts.h"
#include "charts.h"

namespace ampscope::ui {

ChartWidget::ChartWidget(QAbstractItemModel* model, std::function<QChart*()> build, const QString& emptyText,
                         QWidget* parent)
    : QWidget(parent), model_(model), build_(std::move(build)), view_(new QChartView), empty_(new QLabel(emptyText)) {
    view_->setRenderHint(QPainter::Antialiasing);
    setMinimumHeight(kMinChartHeight);
    settle_ = new QTimer(this);
    settle_->setSingleShot(true);
    settle_->setInterval(400);
    connect(settle_, &QTimer::timeout, this, [this] {
        view_->setRenderHint(QPainter::Antialiasing);
        view_->viewport()->update();
    });
    empty_->setObjectName(QStringLiteral("emptyState"));
    empty_->setAlignment(Qt::AlignCenter);
    empty_->setWordWrap(true);
    stack_ = new QStackedLayout(this);
    stack_->setContentsMargins(0, 0, 0, 0);
    stack_->addWidget(view_);
    stack_->addWidget(empty_);
    auto* exportAction = new QAction(QStringLiteral("Export chart (PNG/SVG)…"), this);
    connect(exportAction, &QAction::triggered, this, &ChartWidget::exportInteractively);
    view_->addAction(exportAction);
    view_->setContextMenuPolicy(Qt::ActionsContextMenu);
    rebuild();
    connect(model_, &QAbstractItemModel::modelReset, this, &ChartWidget::rebuild);
    connect(model_, &QAbstractItemModel::columnsInserted, this, &ChartWidget::rebuild);
    connect(model_, &QAbstractItemModel::columnsRemoved, this, &ChartWidget::rebuild);
    connect(model_, &QAbstractItemModel::rowsInserted, this,
            [this] {  // a live run's first rows: the charts built one per turn
                streaming();
                stale_ ? parts::inLaterTurn(this,
                                            [this] {
                                                if (stale_) rebuild();
                                            })
                       : updateEmptyState();
            });
    connect(model_, &QAbstractItemModel::rowsRemoved, this, &ChartWidget::updateEmptyState);
}

QChart* ChartWidget::chart() const {
    return view_->chart();
}

void ChartWidget::streaming() {
    if (view_->renderHints().testFlag(QPainter::Antialiasing)) view_->setRenderHint(QPainter::Antialiasing, false);
    settle_->start();
}

void ChartWidget::showEvent(QShowEvent* e) {
    QWidget::showEvent(e);
    if (stale_)
        parts::inLaterTurn(this, [this] {
            if (stale_) rebuild();
        });  // charts shown together: built one per turn
}

bool ChartWidget::showsEmptyState() const {
    return stack_->currentWidget() == empty_;
}

void ChartWidget::rebuild() {
    if (model_->rowCount() == 0 || !isVisible()) {  // built when rows arrive and it is shown: no cost until then
        stale_ = true;
        updateEmptyState();
        return;
    }
    stale_ = false;
    QChart* old = view_->chart();
    QChart* chart = build_();
    applyPalette(chart, view_->palette());
    setMinimumHeight(std::max(kMinChartHeight, chart->property(kMinHeightProperty).toInt()));
    view_->setChart(chart);
    delete old;
    updateEmptyState();
}

void ChartWidget::updateEmptyState() {
    stack_->setCurrentWidget(model_->rowCount() == 0 ? static_cast<QWidget*>(empty_) : view_);
}

QString ChartWidget::exportTo(const QString& path) const {
    return exportImage(view_, path);
}

void ChartWidget::exportInteractively() {
    const auto path = QFileDialog::getSaveFileName(this, QStringLiteral("Export chart"), QStringLiteral("chart.png"),
                                                   QStringLiteral("PNG (*.png);;SVG (*.svg)"));
    if (path.isEmpty()) return;
    const auto err = exportTo(path);
    if (!err.isEmpty()) Q_EMIT exportFailed(err);
}

}  // namespace ampscope::ui
