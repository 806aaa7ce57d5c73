// SPDX-License-Identifier: MIT
#pragma once
// Chart builders for the run views (Qt Charts), and image export of any chart.

#include <QString>
#include <QStringList>

#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"

class QChart;
class QXYSeries;
class QPalette;
class QChartView;
class QWidget;

namespace ampscope::ui {

class LayerModel;
class SampleModel;
class TrainingStepModel;

/// Per-sample |Δ| (log scale) against the absolute tolerance, one series per precision and tag.
/// Driven by the model (the per-sample table's): it must outlive the chart.
QChart* makeDeltaChart(SampleModel* model);
/// Histogram of log10 |Δ| per precision.
QChart* makeDeltaHistogram(const RunResult& run);
/// |Δ| against the reference margin (log–log); flips marked: they sit at small margins.
/// Driven by the per-sample model (margin and |Δ| columns), like the delta chart.
QChart* makeFlipChart(SampleModel* model);
/// absmax per op (log scale) against the format's limit; origin and propagation marked.
/// Driven by the model (QVXYModelMapper through filter proxies): it must outlive the chart.
QChart* makeLayerChart(LayerModel* model);

/// Training charts, driven by the steps model (it must outlive them).
/// Training: losses (reference vs AMP) per step.
QChart* makeLossChart(TrainingStepModel* model);
/// Training: the loss scale on a log2 axis, skipped steps marked.
QChart* makeScaleChart(TrainingStepModel* model);
/// Training: effective updates against iterations.
QChart* makeUpdatesChart(TrainingStepModel* model);
/// Training: unscaled gradient norm and weight divergence (log axis).
QChart* makeGradChart(TrainingStepModel* model);

/// Frame, text and grid colours from the palette (dark palettes included).
void applyPalette(QChart* chart, const QPalette& pal);

/// Writes `widget` as PNG (by extension .png) or SVG (.svg). Returns an error message or "".
QString exportImage(QWidget* widget, const QString& path);

}  // namespace ampscope::ui
