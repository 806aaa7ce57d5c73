// SPDX-License-Identifier: MIT
#pragma once
// The advisor's per-module sensitivity, ranked (worst first, as advise() ranks it): the table
// of the Advise dialog and the rows its sensitivity chart plots in execution order.

#include <vector>

#include "ampscope/engine/advise.h"
#include "tablemodel.h"

namespace ampscope::ui {

class SensitivityModel : public TableModel {
    Q_OBJECT
public:
    enum Columns { Module, Prec, Sqnr, RelError, Overflow, Underflow, Origin, NUM_COLUMNS };
    /// PlotRole: Module the execution order, Sqnr the dB value clipped to [plotBottom, plotTop];
    /// ClippedRole: true where the SQNR is not finite (+inf: equal outputs, drawn at the top;
    /// -inf or NaN: non-finite AMP outputs, drawn at the bottom);
    /// SummaryRole: the row in a few lines (chart tool tips).
    enum Roles { SortRole = Qt::UserRole, PlotRole, ClippedRole, SummaryRole };
    explicit SensitivityModel(QObject* parent = nullptr);
    /// Rows in advise()'s rank (more overflow first, then lower SQNR); a partial result's rows
    /// (not ranked yet by the engine) are ranked the same way.
    void resetData(std::vector<ModuleSensitivity> rows);
    void clearData() { resetData({}); }
    const ModuleSensitivity& row(int r) const { return rows_[size_t(r)]; }
    const std::vector<ModuleSensitivity>& rowsData() const { return rows_; }
    /// The chart's y range: the finite SQNRs with a margin; +inf values sit at plotTop().
    double plotTop() const { return top_; }
    double plotBottom() const { return bottom_; }
    double plotted(const ModuleSensitivity& s) const;
    QVariant data(const QModelIndex& index, int role) const override;

protected:
    int rows() const override { return int(rows_.size()); }

private:
    QVariant display(const ModuleSensitivity& s, int column) const;
    std::vector<ModuleSensitivity> rows_;
    double top_ = 100, bottom_ = 0;
};

}  // namespace ampscope::ui
