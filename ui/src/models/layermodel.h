// SPDX-License-Identifier: MIT
#pragma once
// The ops of one pass in execution order, with the origin of non-finite values marked.

#include "ampscope/engine/run.h"
#include "tablemodel.h"

namespace ampscope::ui {

/// Ops of one pass in execution order, with the origin of non-finite values marked.
class LayerModel : public TableModel {
    Q_OBJECT
public:
    enum Columns {
        Index,
        Module,
        Op,
        Dtype,
        Absmax,
        Headroom,
        Fp16Overflow,
        Fp16Subnormal,
        NonFinite,
        State,
        NUM_COLUMNS
    };
    /// PlotRole: numbers for charts (Index: the op index; Absmax: absmax, floored for log axes);
    /// MarkRole: Absmax where the layer's marker sits (non-finite ones at the top, above the
    /// format's limit); SummaryRole: one layer described in a few lines (chart tool tips).
    enum Roles { SortRole = Qt::UserRole, ModuleRole, PlotRole, MarkRole, SummaryRole };
    explicit LayerModel(QObject* parent = nullptr);
    void resetData(const PassResult& pass);
    Precision precision() const { return pass_.precision; }
    /// The largest finite value of the pass's format (FP16 for the FP32 reference).
    double formatLimit() const;
    /// A simulated FP8 pass: its quantized GEMM operands (none for other passes).
    const std::vector<Fp8Operand>& fp8Operands() const { return pass_.fp8_operands; }
    void clearData() { resetData({}); }
    const LayerStat* layer(int r) const;
    QVariant data(const QModelIndex& index, int role) const override;

protected:
    int rows() const override { return int(pass_.layers.size()); }

private:
    PassResult pass_;
};

/// log2(format max / absmax): how many doublings are left before overflow.
double headroom(const LayerStat& l, Precision p);

}  // namespace ampscope::ui
