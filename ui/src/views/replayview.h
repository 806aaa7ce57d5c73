// SPDX-License-Identifier: MIT
#pragma once
// The replay view (the main window's Replay tab): an incident replay ORIGINAL beside a REMEDY
// replay. Each side says what was replayed (checkpoint format, optimizer, precision, GradScaler
// enabled) and where values first went non-finite, in words; below, for both sides next to
// each other (the original's table above the remedy's, columns aligned), the steps (losses, scale used, found_inf,
// skip, scale after, growth tracker), the per-module activations (the first non-finite module's row highlighted) and
// the per-parameter departures, each tab with its charts above its tables, the original's chart beside the remedy's:
// loss and scale per step (the Training view's charts), each module's FP32 and AMP absmax against the format's limit
// (as the Layers view's, the first non-finite module marked), the gradient and update relative difference per
// parameter. Remedies one click away from the original (keep the first non-finite module in FP32, BF16 instead of FP16,
// initial scale, growth interval, gradient clipping, the advisor's FP32 set): each asks the main window for a replay of
// the original spec plus the remedy; a line above the sides says what changed. Progress and Cancel of a replay going.

#include <QWidget>

#include <optional>

#include "ampscope/engine/replay.h"

class QLabel;
class QProgressBar;
class QPushButton;
class QStackedWidget;
class QTabWidget;
class QTableView;

namespace ampscope::ui {

class ChartWidget;
class ReplayLayerModel;
class ReplayParamModel;
class ReplayStepModel;
class ReplayTrainingModel;

class ReplayView : public QWidget {
    Q_OBJECT
public:
    enum class Remedy { KeepModule, Bf16, InitScale, GrowthInterval, Clip, AdvisorSet, Count };
    enum Side { Original, Remedied };
    enum Tables { kStepsTable, kLayersTable, kParamsTable };
    /// The charts of each side: loss and scale above the steps table, absmax above the
    /// activations, relative differences above the parameters.
    enum Charts { kLossChart, kScaleChart, kLayersChart, kParamsChart, kChartCount };

    explicit ReplayView(QWidget* parent = nullptr);
    /// Shows `r` as the original (the remedy side empties).
    void setOriginal(const ReplayResult& r);
    /// Shows `r` as the remedy of the original shown.
    void setRemedy(const ReplayResult& r);
    void clear();
    bool hasOriginal() const { return original_.has_value(); }
    const std::optional<ReplayResult>& original() const { return original_; }
    const std::optional<ReplayResult>& remedy() const { return remedy_; }
    /// A replay going (`what` says which): progress shown with Cancel, remedies disabled.
    void setRunning(bool running, const QString& what = {});
    void setProgress(const QString& stage, int done, int total);

    /// The original's spec plus `remedy` (`value`: the scale, interval or clip norm; `set`: the
    /// advisor's modules). The spec's original_run_id names the original.
    static ReplaySpec remedySpec(const ReplayResult& original, Remedy remedy, double value = 0,
                                 const std::vector<std::string>& set = {});
    /// What a remedy changed from its original, e.g. "FP16 → BF16" or "head kept in FP32".
    static QString changeText(const ReplayResult& original, const ReplaySpec& remedy);
    /// Where values first went non-finite, short ("backward at step 1 in head (AddmmBackward0)")
    /// or "no non-finite values in N step(s)".
    static QString verdictText(const ReplayResult& r);
    /// The same with every field named (stage, step, side, module, op, autograd node).
    static QString stageInWords(const ReplayResult& r);
    /// A replay of an incident bundle: what the job saw and whether the replay reproduces it
    /// ("" for a replay started from files).
    static QString incidentInWords(const ReplayResult& r);

    /// Asks for a remedy replay with the value given (no question asked).
    void requestRemedy(Remedy remedy, double value = 0);
    /// Keep the advisor's set (an advise JSON, or one glob a line) in FP32; a bad file is
    /// reported through failed(). False then.
    bool requestAdvisorSet(const QString& path);

    /// The table of the tab shown: the one with the focus, else the original's.
    QTableView* currentTable() const;

    // for tests
    QString summaryText(Side side) const;
    QString changeLine() const;
    QPushButton* remedyButton(Remedy r) const { return buttons_[int(r)]; }
    QPushButton* cancelButton() const { return cancel_; }
    QTableView* table(Side side, Tables t) const { return tables_[side][t]; }
    ReplayStepModel* stepModel(Side side) const { return steps_[side]; }
    ReplayLayerModel* layerModel(Side side) const { return layers_[side]; }
    ReplayParamModel* paramModel(Side side) const { return params_[side]; }
    ChartWidget* chart(Side side, Charts c) const { return charts_[side][c]; }
    QTabWidget* tableTabs() const { return tabs_; }

Q_SIGNALS:
    /// A remedy: the main window replays `spec` (what: the change, e.g. "FP16 → BF16").
    void remedyRequested(const ampscope::ReplaySpec& spec, const QString& what);
    void cancelRequested();
    void failed(const QString& title, const QString& message);

private:
    QWidget* buildRemedies();
    QWidget* buildProgress();
    QWidget* buildTables();
    QWidget* buildCharts(Tables t);
    ChartWidget* makeChart(Side side, Charts c);
    void askRemedy(Remedy r);
    void showSide(Side side, const ReplayResult* r);
    void updateButtons();

    std::optional<ReplayResult> original_, remedy_;
    bool running_ = false;
    QPushButton* buttons_[int(Remedy::Count)] = {};
    QLabel* progressLabel_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QPushButton* cancel_ = nullptr;
    QStackedWidget* stack_ = nullptr;  ///< what the view shows, or the empty state's text
    QLabel* empty_ = nullptr;
    QLabel* change_ = nullptr;
    QLabel* summary_[2] = {};
    QLabel* titles_[2][3] = {};
    QTabWidget* tabs_ = nullptr;
    QTableView* tables_[2][3] = {};
    ReplayStepModel* steps_[2] = {};
    ReplayLayerModel* layers_[2] = {};
    ReplayParamModel* params_[2] = {};
    ReplayTrainingModel* training_[2] = {};  ///< the steps, for the loss and scale charts
    ChartWidget* charts_[2][kChartCount] = {};
};

}  // namespace ampscope::ui
