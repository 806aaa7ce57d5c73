// SPDX-License-Identifier: MIT
#pragma once
// Charts of the run views (Qt Charts), each driven by an item model, and ChartWidget: one
// chart over one model, rebuilt when the model's shape changes, with its empty state and its
// own export (as heaptrack's ChartWidget).

#include <QString>
#include <QStringList>
#include <QWidget>

#include <functional>

#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"

class QAbstractItemModel;
class QChart;
class QChartView;
class QLabel;
class QTimer;
class QPalette;
class QStackedLayout;

namespace ampscope::ui {

class CompareModel;
class LayerModel;
class ReplayLayerModel;
class ReplayParamModel;
class SampleModel;
class SensitivityModel;
class TrainingStepModel;

/// The models a chart reads must outlive it.
/// Per-sample |Δ| (log scale) against the absolute tolerance, one series per precision and tag.
QChart* makeDeltaChart(SampleModel* model);
/// Histogram of log10 |Δ| per precision.
QChart* makeDeltaHistogram(SampleModel* model);
/// |Δ| against the reference margin (log–log); flips marked: they sit at small margins.
QChart* makeFlipChart(SampleModel* model);
/// A run under torchrun: seconds per rank as horizontal bars, each labelled with its host and device.
QChart* makeRankChart(SampleModel* model);
/// absmax per op (log scale) against the format's limit; origin and propagation marked.
QChart* makeLayerChart(LayerModel* model);
/// A simulated FP8 pass (issue 30): per quantized GEMM operand, in the pass's order, the log2
/// window of its element format after scaling (smallest subnormal / largest scale .. max finite /
/// smallest scale) against its amax, and the shares of its elements that saturated and underflowed
/// (percent, right axis). Series: "smallest subnormal / scale", "max finite / scale", "amax"
/// (log2 values; an amax of 0 or NaN has no point), "saturated %", "underflow %"; x = operand index.
QChart* makeFp8HeadroomChart(LayerModel* model);
/// One operand's figures as makeFp8HeadroomChart draws them.
struct Fp8Window {
    double low = 0, high = 0;  ///< log2 of the smallest subnormal and of the max finite, divided by the scale
    double amax = 0;           ///< log2 amax; NaN when amax is 0 or not finite
    double saturated = 0, underflow = 0;  ///< percent of the operand's elements
};
Fp8Window fp8Window(const Fp8Operand& o);
/// The smallest subnormal of an element format: 2^-9 (E4M3), 2^-16 (E5M2), 0.5 (E2M1).
double minSubnormal(Fp8Element e);
/// Per-sample |Δ| of two runs, one series per run and precision (run B darker, squares).
QChart* makeCompareChart(CompareModel* model);
/// The advisor's SQNR per module in execution order, one series per precision (lower is
/// worse); +inf values clipped to the top and marked, origins of non-finite values marked.
QChart* makeSensitivityChart(SensitivityModel* model);

/// Replay charts (one side of the replay view; its loss and scale are the training charts
/// over a ReplayTrainingModel). Each module's FP32 and AMP absmax (log scale) in execution
/// order against the format's limit, the first non-finite module marked, non-finite values
/// at the top.
QChart* makeReplayLayerChart(ReplayLayerModel* model);
/// Per parameter, the AMP step's gradient and update relative difference from the FP32
/// reference (log scale), non-finite ones at the top.
QChart* makeReplayParamChart(ReplayParamModel* model);

/// Training charts. Appended steps are drawn in batches (at most every kLiveRefreshMs), so a
/// live run costs them one pass over the steps per refresh, not per step.
/// Losses (reference vs AMP) per step.
QChart* makeLossChart(TrainingStepModel* model);
/// The loss scale on a log2 axis, skipped steps marked.
QChart* makeScaleChart(TrainingStepModel* model);
/// Effective updates against iterations.
QChart* makeUpdatesChart(TrainingStepModel* model);
/// Unscaled gradient norm and weight divergence (log axis), gradient underflow.
QChart* makeGradChart(TrainingStepModel* model);
constexpr int kLiveRefreshMs = 100;

/// Every chart needs this much height so that its plot area keeps at least 200 px below the
/// title and above the axis labels and legend (tests/ui/tst_layout.cpp); ChartWidget keeps it.
constexpr int kMinChartHeight = 380;
/// A chart that needs more (one row per module) says how much in this property (int, px).
inline constexpr char kMinHeightProperty[] = "ampscopeMinHeight";

/// Frame, text and grid colours from the palette (dark palettes included).
void applyPalette(QChart* chart, const QPalette& pal);

/// Writes `widget` as PNG (by extension .png) or SVG (.svg). Returns an error message or "".
QString exportImage(QWidget* widget, const QString& path);

/// One chart over one model. The chart is built by `build` and built again when the model is
/// reset or gains or loses columns (rows are the chart's own business: it follows them); not
/// while the model has no rows (the widget shows `emptyText`) or the widget is hidden (another
/// tab): then it is built when rows arrive or it is shown. Its minimum height is
/// kMinChartHeight, or what the chart asks for (kMinHeightProperty).
class ChartWidget : public QWidget {
    Q_OBJECT
public:
    ChartWidget(QAbstractItemModel* model, std::function<QChart*()> build, const QString& emptyText,
                QWidget* parent = nullptr);
    QChartView* view() const { return view_; }
    QChart* chart() const;
    bool showsEmptyState() const;
    /// Writes the chart as PNG or SVG (by the extension). Returns an error message or "".
    QString exportTo(const QString& path) const;

public Q_SLOTS:
    /// Asks for a file and exports the chart there (the widget's context menu).
    void exportInteractively();

Q_SIGNALS:
    void exportFailed(const QString& message);

protected:
    void showEvent(QShowEvent* e) override;

private:
    void rebuild();
    void updateEmptyState();
    QAbstractItemModel* model_;
    std::function<QChart*()> build_;
    QChartView* view_;
    QLabel* empty_;
    QStackedLayout* stack_;
    bool stale_ = false;  ///< the model changed while empty or hidden: build when rows arrive or it is shown
    /// While rows stream in (a live run), the chart is drawn without antialiasing; it is
    /// antialiased again once no row has arrived for a moment (bench/README.md: an antialiased
    /// repaint of a ~400-point zig-zag on a log axis grew to 35 ms and held up the UI thread).
    QTimer* settle_;
    void streaming();
};

}  // namespace ampscope::ui
