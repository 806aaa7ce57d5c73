// SPDX-License-Identifier: MIT
// The FP8 headroom of a simulated FP8 pass (issue 30): per quantized GEMM operand (module and
// input/weight, in the pass's order along x), the window of magnitudes its element format can
// hold once the operand is scaled, on a log2 axis: from the smallest subnormal to the largest
// finite value, each divided by the operand's scale (the widest window its scales give:
// smallest subnormal / largest scale .. max finite / smallest scale). The operand's amax sits in
// it, or above it when the scale was stale (delayed scaling); the shares of its elements that
// saturated or underflowed to zero are drawn against the right axis (percent). A BF16 pass's
// FP8 what-if (run --fp8-what-if) draws the same per operand and recipe, the recipes side by side.
#include <QCategoryAxis>
#include <QChart>
#include <QPen>
#include <QScatterSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

#include "chartparts.h"
#include "charts.h"
#include "layermodel.h"
#include "uitext.h"

namespace ampscope::ui {

using namespace parts;

double minSubnormal(Fp8Element e) {
    const int mantissa = e == Fp8Element::E4M3 ? 3 : e == Fp8Element::E5M2 ? 2 : 1;
    return min_normal(e) / std::ldexp(1.0, mantissa);
}

Fp8Window fp8Window(const Fp8Operand& o) {
    const auto& s = o.stats;
    Fp8Window w;
    const double big = s.scale_max > 0 ? s.scale_max : 1.0, small = s.scale_min > 0 ? s.scale_min : 1.0;
    w.low = std::log2(minSubnormal(s.element) / big);
    w.high = std::log2(max_finite(s.element) / small);
    w.amax = s.amax > 0 && std::isfinite(s.amax) ? std::log2(s.amax) : std::nan("");
    w.saturated = 100 * s.share(s.saturated);
    w.underflow = 100 * s.share(s.underflow);
    return w;
}

QChart* makeFp8HeadroomChart(LayerModel* model) {
    const auto& ops = model->fp8Operands();
    const bool whatIf = !is_fp8(model->precision());  // every current-scaling recipe on the pass's own operands
    auto* c =
        titled((whatIf ? QStringLiteral("FP8 what-if, %1 pass: each linear operand's amax in each recipe's window")
                       : QStringLiteral("FP8 headroom, %1 pass: each GEMM operand's amax in its format's window"))
                   .arg(plainText(to_string(model->precision()))));
    auto* low = markers(QStringLiteral("smallest subnormal / scale"), QColor(40, 90, 200),
                        QScatterSeries::MarkerShapeRectangle, 9);
    auto* high =
        markers(QStringLiteral("max finite / scale"), QColor(200, 40, 40), QScatterSeries::MarkerShapeRectangle, 9);
    auto* amax = markers(QStringLiteral("amax"), QColor(30, 30, 30), QScatterSeries::MarkerShapeCircle, 10);
    auto* sat = markers(QStringLiteral("saturated %"), QColor(240, 150, 20), QScatterSeries::MarkerShapeTriangle, 9);
    auto* under = markers(QStringLiteral("underflow %"), QColor(120, 60, 180), QScatterSeries::MarkerShapeTriangle, 9);
    auto* x = new QCategoryAxis;
    x->setLabelsPosition(QCategoryAxis::AxisLabelsPositionCenter);
    x->setStartValue(-0.5);
    double lo = 0, hi = 1;
    bool first = true;
    for (size_t i = 0; i < ops.size(); ++i) {
        const auto w = fp8Window(ops[i]);
        const double at = double(i);
        low->append(at, w.low);
        high->append(at, w.high);
        if (!std::isnan(w.amax)) amax->append(at, w.amax);
        sat->append(at, w.saturated);
        under->append(at, w.underflow);
        const double top = std::isnan(w.amax) ? w.high : std::max(w.high, w.amax);
        const double bottom = std::isnan(w.amax) ? w.low : std::min(w.low, w.amax);
        lo = first ? bottom : std::min(lo, bottom);
        hi = first ? top : std::max(hi, top);
        first = false;
        const auto& o = ops[i];
        // a product's operands (run --fp8-all-gemms) named with their op: "bmm.mat1"
        const bool product = o.op != "aten::linear" && o.op.rfind("aten::", 0) == 0;
        QString label = storedText(o.module.empty() ? "(root)" : o.module) + QStringLiteral(" · ") +
                        storedText(product ? o.op.substr(6) + "." + o.operand : o.operand);
        if (whatIf) label += QStringLiteral(" · ") + plainText(to_string(what_if_recipe(o.stats.scheme)));
        x->append(label, at + 0.5);
    }
    auto* y = new QValueAxis;
    y->setTitleText(QStringLiteral("log2 |x|"));
    y->setRange(std::floor(lo) - 1, std::ceil(hi) + 1);
    y->setLabelFormat(QStringLiteral("%d"));
    auto* share = new QValueAxis;
    share->setTitleText(QStringLiteral("share of elements (%)"));
    share->setRange(0, 100);
    c->addAxis(x, Qt::AlignBottom);
    c->addAxis(y, Qt::AlignLeft);
    c->addAxis(share, Qt::AlignRight);
    attach(c, {low, high, amax}, x, y);
    attach(c, {sat, under}, x, share);
    for (auto* s : {low, high, amax, sat, under}) {
        tipOnHover(s, [ops, s](qsizetype k) {
            const auto i =
                size_t(std::clamp<qsizetype>(qsizetype(std::lround(s->at(k).x())), 0, qsizetype(ops.size()) - 1));
            const auto& o = ops[i];
            const auto& st = o.stats;
            return QStringLiteral(
                       "%1 · %2 (%3, %4)\namax %5, scale %6 .. %7\nsaturated %8, underflow %9 of %10 elements")
                .arg(storedText(o.module), storedText(o.operand), plainText(to_string(st.element)),
                     plainText(to_string(st.scheme)))
                .arg(st.amax, 0, 'g', 4)
                .arg(st.scale_min, 0, 'g', 4)
                .arg(st.scale_max, 0, 'g', 4)
                .arg(st.saturated)
                .arg(st.underflow)
                .arg(st.numel);
        });
    }
    return c;
}

}  // namespace ampscope::ui
