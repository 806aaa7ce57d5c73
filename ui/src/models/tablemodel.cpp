// SPDX-License-Identifier: MIT
#include "tablemodel.h"

#include <algorithm>

namespace ampscope::ui {

QVariant TableModel::headerData(int s, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole || s < 0 || s >= columns()) return {};
    return columnName(s);
}

std::pair<double, double> deltaPlotRange(std::initializer_list<const RunResult*> runs) {
    double lo = 1e300, hi = 0;
    for (const auto* r : runs)
        for (const auto& c : r->comparisons)
            for (const auto& d : c.deltas)
                if (d.finite) {
                    lo = std::min(lo, std::max(d.abs, kPlotFloor));
                    hi = std::max(hi, d.abs);
                }
    return hi == 0 ? std::make_pair(kPlotFloor, 1.0) : std::make_pair(lo, hi);
}

}  // namespace ampscope::ui
