// SPDX-License-Identifier: MIT
#pragma once
// The Tokens view of a sequence run: a precision and a sample picker, KL(ref || amp) along the
// chosen sample's sequence (flips and excluded positions marked) and its positions as a table.

#include <QWidget>

#include "ampscope/engine/run.h"

class QComboBox;
class QLabel;
class QTableView;

namespace ampscope::ui {

class ChartWidget;
class TokenModel;

class TokenView : public QWidget {
    Q_OBJECT
public:
    explicit TokenView(QWidget* parent = nullptr);
    /// Shows `run` (no rows when it has no sequence comparison).
    void setRun(const RunResult& run);
    void clear();
    TokenModel* model() const { return model_; }
    ChartWidget* chart() const { return chart_; }
    QTableView* table() const { return table_; }
    QComboBox* precisionBox() const { return precision_; }
    QComboBox* sampleBox() const { return sample_; }
    /// The chosen sample's figures in one line (compared and excluded positions, mean KL, flips).
    QString summaryText() const;

private:
    void fillPickers();
    void pick();
    void updateSummary();
    TokenModel* model_;
    QComboBox* precision_;
    QComboBox* sample_;
    QLabel* summary_;
    ChartWidget* chart_;
    QTableView* table_;
};

}  // namespace ampscope::ui
