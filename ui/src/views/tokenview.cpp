// SPDX-License-Identifier: MIT
#include "tokenview.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSignalBlocker>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <cmath>

#include "charts.h"
#include "tokenmodel.h"

namespace ampscope::ui {

TokenView::TokenView(QWidget* parent) : QWidget(parent), model_(new TokenModel(this)) {
    precision_ = new QComboBox;
    precision_->setObjectName(QStringLiteral("tokenPrecision"));
    sample_ = new QComboBox;
    sample_->setObjectName(QStringLiteral("tokenSample"));
    sample_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    summary_ = new QLabel;
    summary_->setObjectName(QStringLiteral("tokenSummary"));
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel(QStringLiteral("Precision")));
    bar->addWidget(precision_);
    bar->addWidget(new QLabel(QStringLiteral("Sample")));
    bar->addWidget(sample_);
    bar->addWidget(summary_, 1);
    chart_ = new ChartWidget(
        model_, [m = model_] { return makeTokenChart(m); }, QString());
    auto* proxy = new QSortFilterProxyModel(this);
    proxy->setSourceModel(model_);
    proxy->setSortRole(TokenModel::SortRole);
    table_ = new QTableView;
    table_->setModel(proxy);
    table_->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);  // positions in order until the user sorts
    table_->setSortingEnabled(true);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->horizontalHeader()->setStretchLastSection(true);
    table_->verticalHeader()->hide();
    table_->setAlternatingRowColors(true);
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(chart_);
    split->addWidget(table_);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 1);
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addLayout(bar);
    lay->addWidget(split, 1);
    connect(precision_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this] {
        pick();
        fillPickers();  // flip counts per sample are the precision's
    });
    connect(sample_, qOverload<int>(&QComboBox::currentIndexChanged), this, &TokenView::pick);
}

void TokenView::setRun(const RunResult& run) {
    model_->resetData(run);
    fillPickers();
}

void TokenView::clear() {
    if (model_->rowCount() || !model_->run().comparisons.empty()) setRun({});
}

void TokenView::fillPickers() {
    const QSignalBlocker b1(precision_), b2(sample_);
    const RunResult& run = model_->run();
    precision_->clear();
    for (int c : model_->sequenceComparisons()) {
        precision_->addItem(QString::fromStdString(to_string(run.comparisons[size_t(c)].precision)), c);
        if (c == model_->comparison()) precision_->setCurrentIndex(precision_->count() - 1);
    }
    sample_->clear();
    for (int s = 0; model_->comparison() >= 0 && s < int(run.samples.size()); ++s) {
        const int n = model_->flipsOf(model_->comparison(), s);
        const QString id = QString::fromStdString(run.samples[size_t(s)].id);
        sample_->addItem(
            n ? QStringLiteral("%1 (%2 flip%3)").arg(id).arg(n).arg(n == 1 ? QString() : QStringLiteral("s")) : id, s);
        if (s == model_->sample()) sample_->setCurrentIndex(s);
    }
    updateSummary();
}

void TokenView::pick() {
    model_->select(precision_->currentData().toInt(), sample_->currentData().toInt());
    updateSummary();
}

QString TokenView::summaryText() const {
    const TokenStats* t = model_->tokens();
    if (!t) return {};
    int compared = 0, flips = 0;
    double sum = 0;
    for (int r = 0; r < model_->rowCount(); ++r) {
        if (model_->excluded(r)) continue;
        ++compared;
        sum += model_->index(r, TokenModel::Kld).data(TokenModel::SortRole).toDouble();
        flips += model_->flipped(r) ? 1 : 0;
    }
    return QStringLiteral("%1 positions compared, %2 excluded; mean KL %3; %4 flips (vocabulary %5)")
        .arg(compared)
        .arg(model_->rowCount() - compared)
        .arg(compared ? QString::number(sum / compared, 'g', 3) : QStringLiteral("-"))
        .arg(flips)
        .arg(t->vocab);
}

void TokenView::updateSummary() {
    summary_->setText(summaryText());
}

}  // namespace ampscope::ui
