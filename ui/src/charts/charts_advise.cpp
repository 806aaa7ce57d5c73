// SPDX-License-Identifier: MIT
// The Advise dialog's sensitivity chart: horizontal bars, one row per module with its full name
// on the left, in execution order from the top, one bar per precision (shorter is worse). The
// origins of non-finite values are red bars, marked; SQNRs that are not finite are clipped to
// the axis and marked. The chart grows with its rows (kRowPixels each): ChartWidget takes its
// minimum height from the chart, and the dialog scrolls when there are many.
#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QCursor>
#include <QHorizontalBarSeries>
#include <QScatterSeries>
#include <QToolTip>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <map>

#include "advisemodel.h"
#include "chartparts.h"
#include "charts.h"

namespace ampscope::ui {

using namespace parts;

namespace {

constexpr int kRowPixels = 26;      ///< per module row (its name's line, one bar per precision)
constexpr int kChromePixels = 170;  ///< title, x axis, legend and margins
constexpr double kBarWidth = 0.8;   ///< of a row, shared by the precisions' bars

QColor precisionColor(Precision p) {
    return p == Precision::Bf16 ? QColor(40, 90, 200) : QColor(240, 150, 20);
}

QString moduleName(const ModuleSensitivity& s) {
    return s.module.empty() ? QStringLiteral("(root)") : QString::fromStdString(s.module);
}

/// The rows of the chart: the modules in execution order from the top (the category axis runs
/// bottom-up, so the first module is its last category), and the precisions measured.
struct Rows {
    QStringList modules;
    std::map<QString, int> row;
    std::vector<Precision> precisions;
    /// The middle of precision `p`'s bar in `module`'s row (a category's bars split its width).
    double barMiddle(int module, Precision p) const {
        const auto k = double(std::find(precisions.begin(), precisions.end(), p) - precisions.begin());
        return module - kBarWidth / 2 + (k + 0.5) / double(precisions.size()) * kBarWidth;
    }
};

Rows rowsOf(const SensitivityModel* model) {
    std::map<int, QString> byOrder;
    Rows r;
    for (const auto& s : model->rowsData()) {
        byOrder.emplace(s.order, moduleName(s));
        if (std::find(r.precisions.begin(), r.precisions.end(), s.precision) == r.precisions.end())
            r.precisions.push_back(s.precision);
    }
    std::sort(r.precisions.begin(), r.precisions.end());
    for (const auto& [order, name] : byOrder)
        if (!r.row.count(name))
            r.row[name] = 0, r.modules.prepend(name);  // categories run bottom-up: the first module last
    for (int i = 0; i < r.modules.size(); ++i) r.row[r.modules[i]] = i;
    return r;
}

/// The marks over the bars: origins, and SQNRs clipped to the axis.
struct Marks {
    QScatterSeries* origins = markers(QStringLiteral("origin of non-finite values"), QColor(220, 30, 30),
                                      QScatterSeries::MarkerShapeRectangle, 13);
    QScatterSeries* clipped = markers(QStringLiteral("+inf (no error; clipped)"), QColor(120, 120, 120),
                                      QScatterSeries::MarkerShapeTriangle, 11);
    QScatterSeries* lost = markers(QStringLiteral("-inf / NaN (no signal left; clipped)"), QColor(90, 20, 20),
                                   QScatterSeries::MarkerShapeStar, 13);
    std::map<QScatterSeries*, std::vector<int>> tips;  ///< per series, the model rows of its points
};

/// One bar set per precision (every module's value, 0 until measured); origins selected (red).
std::map<Precision, QBarSet*> barSets(const SensitivityModel* model, const Rows& rows, Marks& marks,
                                      std::map<std::pair<int, Precision>, int>& tips) {
    std::map<Precision, QBarSet*> sets;
    for (Precision p : rows.precisions) {
        auto* set = new QBarSet(QString::fromStdString(to_string(p)));
        set->setColor(precisionColor(p));
        set->setBorderColor(precisionColor(p).darker(130));
        set->setSelectedColor(QColor(220, 30, 30));
        for (int i = 0; i < rows.modules.size(); ++i) set->append(0.0);
        sets[p] = set;
    }
    for (int r = 0; r < model->rowCount(); ++r) {
        const auto& s = model->row(r);
        const int row = rows.row.at(moduleName(s));
        const double value = model->plotted(s);
        sets[s.precision]->replace(row, value);
        tips[{row, s.precision}] = r;
        const QPointF at(value, rows.barMiddle(row, s.precision));
        QScatterSeries* bound = std::isfinite(s.sqnr_db) ? nullptr : s.sqnr_db > 0 ? marks.clipped : marks.lost;
        if (s.origin) sets[s.precision]->selectBar(row);
        for (auto* target : {bound, s.origin ? marks.origins : nullptr})
            if (target) target->append(at), marks.tips[target].push_back(r);
    }
    return sets;
}

void tipOnBarHover(QHorizontalBarSeries* bars, SensitivityModel* model, std::map<std::pair<int, Precision>, int> tips) {
    QObject::connect(bars, &QHorizontalBarSeries::hovered, bars,
                     [bars, model, tips = std::move(tips)](bool on, int index, QBarSet* set) {
                         if (!on) return QToolTip::hideText();
                         const auto p = parse_precision(set->label().toStdString());
                         const auto it = p ? tips.find({index, *p}) : tips.end();
                         if (it == tips.end() || it->second >= model->rowCount()) return;
                         const QString text =
                             model->index(it->second, 0).data(SensitivityModel::SummaryRole).toString();
                         bars->setProperty("ampscopeTip", text);
                         QToolTip::showText(QCursor::pos(), text);
                     });
}

}  // namespace

QChart* makeSensitivityChart(SensitivityModel* model) {
    QChart* chart = titled(QStringLiteral("Sensitivity: SQNR of each module alone under autocast (shorter is worse)"));
    const Rows rows = rowsOf(model);
    Marks marks;
    std::map<std::pair<int, Precision>, int> tips;
    auto* bars = new QHorizontalBarSeries;
    bars->setBarWidth(kBarWidth);
    for (const auto& [p, set] : barSets(model, rows, marks, tips)) bars->append(set);
    auto* y = new QBarCategoryAxis;
    y->append(rows.modules);  // execution order from the top
    auto* x = new QValueAxis;
    x->setTitleText(QStringLiteral("SQNR dB"));
    x->setRange(model->plotBottom(), model->plotTop());
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    attach(chart, bars, x, y);
    tipOnBarHover(bars, model, std::move(tips));
    for (auto* s : {marks.origins, marks.clipped, marks.lost}) {
        if (s->count() == 0) {
            delete s;
            continue;
        }
        attach(chart, s, x, y);
        tipOnHover(s, [model, r = marks.tips[s]](qsizetype i) {
            return i < qsizetype(r.size()) && r[size_t(i)] < model->rowCount()
                       ? model->index(r[size_t(i)], 0).data(SensitivityModel::SummaryRole).toString()
                       : QString();
        });
    }
    chart->setProperty(kMinHeightProperty, kChromePixels + kRowPixels * int(rows.modules.size()));
    return chart;
}

}  // namespace ampscope::ui
