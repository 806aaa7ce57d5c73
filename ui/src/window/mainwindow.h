// SPDX-License-Identifier: MIT
#pragma once
// The main window: run browser on the left, the views of the selected run on the right.
// A run started here is shown from the values the run controller delivers (appended to the
// views' models as they arrive); a recorded run is read from the database when selected.

#include <QMainWindow>
#include <QPointer>
#include <QString>

#include <functional>
#include <memory>
#include <optional>

#include "ampscope/engine/replay.h"
#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"
#include "ampscope/engine/vocabulary.h"
#include "ampscope/storage/store.h"
#include "errorreporter.h"

class QAbstractItemModel;
class QAction;
class QChart;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QSplitter;
class QTabWidget;
class QMenu;
class QTableView;
class QTextBrowser;
class QTimer;

namespace ampscope::ui {

class AdviseDialog;
class ChartWidget;
class CompareModel;
class FlipModel;
class LayerModel;
class NewRunDialog;
class ReplayJob;
class ReplayView;
class RunController;
class RunListModel;
class SampleModel;
class TokenView;
class TrainingStepModel;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum Tabs {
        kOverviewTab,
        kDeltasTab,
        kFlipsTab,
        kLayersTab,
        kTrainingTab,
        kCompareTab,
        kTokensTab,
        kReplayTab,
        NUM_TABS
    };
    /// `reporter` tells the user about errors and asks questions (message boxes by default).
    explicit MainWindow(std::unique_ptr<ErrorReporter> reporter = nullptr, QWidget* parent = nullptr);
    ~MainWindow() override;

    /// Opens (creating when needed) a run database; reports an error on failure. False on failure.
    bool openDatabase(const QString& path);
    QString databasePath() const;
    /// Selects and shows a run by UUID (a live run from its values, else from the database).
    void showRun(const QString& uuid);
    QString currentRun() const { return current_; }
    /// Starts a run with the given spec on the worker thread; criteria are fixed from here.
    bool startRun(const RunSpec& spec);
    /// First start: a demo comparison run of demo:transformer, a short demo training run, then
    /// the built-in demo incident replayed (engine demo_incident(), its files beside the
    /// database) and its remedy (the module that broke kept in FP32); demoFinished() when all
    /// are recorded (the comparison is shown then).
    void startDemo();
    static constexpr int kDemoTrainingSteps = 40;

    // for tests and the smoke renderer
    QTabWidget* tabs() const { return tabs_; }
    RunController* controller() const { return controller_; }
    RunListModel* runModel() const { return runs_; }
    QTableView* runView() const { return runView_; }
    SampleModel* sampleModel() const { return samples_; }
    FlipModel* flipModel() const { return flips_; }
    LayerModel* layerModel() const { return layers_; }
    TrainingStepModel* stepModel() const { return steps_; }
    CompareModel* compareModel() const { return compare_; }
    /// The Tokens tab: a sequence run's positions of one sample (language models).
    TokenView* tokenView() const { return tokens_; }
    NewRunDialog* lastDialog() const { return dialog_; }
    /// Run → Advise FP32 regions… (enabled while a recorded comparison run is shown).
    QAction* adviseAction() const { return adviseAction_; }
    /// The advisor on the comparison run shown (non-modal; the open one when it is that run's),
    /// or null when none is shown.
    AdviseDialog* openAdvisor();
    /// File → Replay incident… (the replay view: original and remedy side by side).
    QAction* replayAction() const { return replayAction_; }
    ReplayView* replayView() const { return replayView_; }
    ReplayJob* replayJob() const { return replayJob_; }
    /// Replays `spec` on a worker thread and records it (`what`: "the incident" or the remedy's
    /// change); the replay view shows it when it ends. False when no database is open or a
    /// replay is going (said in an error dialog).
    bool startReplay(const ReplaySpec& spec, const QString& what);
    /// The chart on screen in the current tab (the one Export current chart writes).
    ChartWidget* currentChart() const;
    /// The notice above the views: a run that cannot be read, damaged parts left out, a new
    /// database created in an empty file. Empty when there is nothing to say.
    QString notice() const;

Q_SIGNALS:
    void demoFinished();

public Q_SLOTS:
    void refreshRuns();
    void newRun();
    void newTrainingRun();
    /// File → Replay incident…: the replay dialog, then the replay.
    void replayIncident();
    /// File → Open incident… (or an incident bundle folder dropped on the window): the bundle
    /// read (a bad one: an error dialog naming the file and field), the replay dialog filled
    /// from it, then the replay. Without `dir`, a folder picker.
    void openIncident(const QString& dir = {});
    bool startTraining(const TrainSpec& spec);
    /// After a start request: an error when the controller refused (a job is going).
    bool launched(bool accepted);
    void importFile(const QString& path = {});
    void exportSelected();
    void exportReport();
    void exportCurrentChart();
    void exportCurrentTable();
    void annotate();
    void setReview(ReviewStatus status);
    void deleteSelected();
    /// The selected layer's module kept out of the selected pass's precision (FP32 for fp16/bf16,
    /// BF16 for an FP8 recipe), then the same run started again.
    void keepSelectedModule();
    /// Two runs side by side (e.g. FP16 vs BF16, or before/after an FP32 region).
    void compareRuns(const QString& a, const QString& b);
    void compareSelected();
    void about();

protected:
    void closeEvent(QCloseEvent* e) override;
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;

private:
    // building (mainwindow_tabs.cpp): one builder per tab
    void buildUi();
    QWidget* buildRunBrowser();
    /// Widens the run browser to its columns when they grew (views keep at least 640 px).
    void fitRunBrowser();
    QWidget* buildOverviewTab();
    QWidget* buildDeltasTab();
    QWidget* buildFlipsTab();
    QWidget* buildLayersTab();
    QWidget* buildTrainingTab();
    QWidget* buildCompareTab();
    QWidget* buildTokensTab();
    void buildStatusBar();
    /// `content` while `model` has rows, else a text saying what the view shows and how to fill it.
    QWidget* withEmptyState(QWidget* content, QAbstractItemModel* model, const QString& text);
    ChartWidget* chartWidgetFor(QAbstractItemModel* model, std::function<QChart*()> build, const QString& emptyText);
    /// `views` under the notice label (setNotice).
    QWidget* withNotice(QWidget* views);
    void buildMenus();
    // incident replay (mainwindow_replay.cpp)
    QWidget* buildReplayTab();
    void addReplayAction(QMenu* file);
    /// A recorded replay (kind "replay"): beside its original when it is a remedy of one.
    void showReplay(const QString& uuid);
    // the advisor (mainwindow_advise.cpp)
    void addAdviseAction(QMenu* run);
    void updateAdviseAction();
    void fillRecentMenu();
    void connectController();

    // a live run (mainwindow_live.cpp): values from the controller
    void liveRunStarted(const RunResult& header);
    void livePass(const PassResult& pass);
    void liveComparison(const Comparison& cmp);
    void liveTrainingStarted(const TrainResult& header);
    void liveSteps(const std::vector<TrainStep>& steps);
    void liveEnded(const QString& uuid, const QString& status);
    /// The demo's next run once `finished` (its run id) ended.
    void demoStep(const QString& finished);
    /// The demo's replays: the incident once the training ended (`replayed` null), its remedy
    /// once `replayed` is the incident's replay; then (or when one cannot start) the demo ends.
    void demoReplay(const ReplayResult* replayed);
    void endDemo();
    bool showingLive() const;
    void showLive();
    void showLiveOverview();
    /// Adds the live run to the browser (or updates its row) and, at its start, selects it.
    void listLive(const QString& status, bool select);

    // views (mainwindow_views.cpp)
    /// The comparison views from `run`; the overview too when `status` is given.
    void showComparison(const RunResult& run, const QString& status);
    void showTrainingRun(const TrainResult& run, const QString& status);
    void showTraining(const QString& uuid);
    void addPassChoice(const PassResult& pass);
    void clearViews();
    void showLayersOf(int passIndex);
    void setRunning(bool running);
    void error(const QString& title, const QString& message);
    /// Shows `text` above the views until the next run is shown (empty: hides it).
    void setNotice(const QString& text);
    /// A run that could not be read: the views are cleared and say why.
    void showUnreadable(const QString& uuid, const QString& message);
    QStringList selectedRuns() const;
    void selectRuns(const QStringList& uuids, const QString& current);

    struct Live {
        QString uuid;
        bool training = false;
        RunResult run;      ///< comparison: header, passes and comparisons so far
        TrainResult train;  ///< training: header and steps so far
    };

    std::unique_ptr<ErrorReporter> reporter_;
    std::unique_ptr<storage::Store> store_;
    std::optional<RunResult> run_;
    std::optional<Live> live_;
    QString current_;
    QTimer* overviewLater_ = nullptr;  ///< a live training run's overview, refreshed at most every 250 ms
    int demoStage_ = 0;  ///< 1: demo comparison going, 2: demo training, 3: demo incident replay, 4: its remedy
    QString demoRun_;
    RunController* controller_ = nullptr;
    RunListModel* runs_ = nullptr;
    QSortFilterProxyModel* runsProxy_ = nullptr;
    SampleModel* samples_ = nullptr;
    CompareModel* compare_ = nullptr;
    TrainingStepModel* steps_ = nullptr;
    FlipModel* flips_ = nullptr;
    LayerModel* layers_ = nullptr;
    TokenView* tokens_ = nullptr;
    QTableView* runView_ = nullptr;
    QSplitter* split_ = nullptr;
    QLineEdit* filter_ = nullptr;
    QTabWidget* tabs_ = nullptr;
    QMenu* recentMenu_ = nullptr;
    QTextBrowser* overview_ = nullptr;
    QLabel* notice_ = nullptr;
    QTextBrowser* compareText_ = nullptr;
    QTableView* tables_[NUM_TABS] = {};  ///< the table of each tab (Export current table)
    QComboBox* passBox_ = nullptr;
    QPushButton* keepButton_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* stage_ = nullptr;
    QPushButton* cancel_ = nullptr;
    NewRunDialog* dialog_ = nullptr;
    QAction* adviseAction_ = nullptr;
    QAction* replayAction_ = nullptr;
    QAction* openIncidentAction_ = nullptr;
    ReplayView* replayView_ = nullptr;
    ReplayJob* replayJob_ = nullptr;
    QPointer<AdviseDialog> advise_;     ///< the last advisor opened
    QPointer<AdviseDialog> verifyFor_;  ///< the advisor whose verifying run is going
};

}  // namespace ampscope::ui
