// SPDX-License-Identifier: MIT
#pragma once
// The decision flips of every comparison of a run.

#include <vector>

#include "ampscope/engine/run.h"
#include "tablemodel.h"

namespace ampscope::ui {

/// Decision flips of every comparison.
class FlipModel : public TableModel {
    Q_OBJECT
public:
    /// Position: the flip's position in its sample (sequence runs; empty otherwise). In a
    /// sequence run Ref and Amp are the top-1 token ids and RefMargin the reference's top-2 margin.
    enum Columns { Precision_, Sample, Tag, Position, Ref, Amp, RefMargin, AmpMargin, NUM_COLUMNS };
    enum Roles { SortRole = Qt::UserRole };
    explicit FlipModel(QObject* parent = nullptr);
    void resetData(const RunResult& run);
    /// A live run: the comparison's flips are appended.
    void addComparison(const Comparison& cmp);
    void clearData() { resetData({}); }
    /// A comparison of the run is per position (a language model's sequence output).
    bool sequence() const { return sequence_; }
    QVariant data(const QModelIndex& index, int role) const override;

protected:
    int rows() const override { return int(rows_.size()); }
    QString columnName(int column) const override;

private:
    struct Row {
        Precision precision;
        Flip flip;
    };
    std::vector<Row> rows_;
    bool sequence_ = false;
};

}  // namespace ampscope::ui
