// SPDX-License-Identifier: MIT
#pragma once
// The main window: run browser on the left, the views of the selected run on the right.

#include <QMainWindow>
#include <QString>

#include <memory>
#include <optional>

#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"
#include "ampscope/storage/store.h"

class QChartView;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QTabWidget;
class QMenu;
class QTableView;
class QTextBrowser;

namespace ampscope::ui {

class FlipModel;
class LayerModel;
class NewRunDialog;
class RunController;
class RunListModel;
class SampleModel;
class TrainingStepModel;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum Tabs { kOverviewTab, kDeltasTab, kFlipsTab, kLayersTab, kTrainingTab, kCompareTab };
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    /// Opens (creating when needed) a run database; shows a dialog on error. False on failure.
    bool openDatabase(const QString& path);
    QString databasePath() const;
    /// Selects and shows a run by UUID.
    void showRun(const QString& uuid);
    QString currentRun() const { return current_; }
    /// Starts a run with the given spec on the worker thread; criteria are fixed from here.
    bool startRun(const RunSpec& spec);

    // for tests and the smoke renderer
    QTabWidget* tabs() const { return tabs_; }
    RunController* controller() const { return controller_; }
    RunListModel* runModel() const { return runs_; }
    SampleModel* sampleModel() const { return samples_; }
    FlipModel* flipModel() const { return flips_; }
    LayerModel* layerModel() const { return layers_; }
    NewRunDialog* lastDialog() const { return dialog_; }
    /// The notice above the views: a run that cannot be read, damaged parts left out, a new
    /// database created in an empty file. Empty when there is nothing to say.
    QString notice() const;

public Q_SLOTS:
    void refreshRuns();
    void newRun();
    void newTrainingRun();
    bool startTraining(const TrainSpec& spec);
    /// After a start request: a dialog when the controller refused (a job is going).
    bool launched(bool accepted);
    void importFile(const QString& path = {});
    void exportSelected();
    void exportReport();
    void exportCurrentChart();
    void exportCurrentTable();
    void annotate();
    void setReview(const QString& status);
    void deleteSelected();
    void keepModuleInFp32();
    /// Two runs side by side (e.g. FP16 vs BF16, or before/after an FP32 region).
    void compareRuns(const QString& a, const QString& b);
    void compareSelected();
    void about();

protected:
    void closeEvent(QCloseEvent* e) override;
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;

private:
    void buildUi();
    QWidget* buildLayersTab();
    QWidget* buildTrainingTab();
    /// `views` under the notice label (setNotice).
    QWidget* withNotice(QWidget* views);
    void buildMenus();
    void fillRecentMenu();
    void showLayersOf(int passIndex);
    void setRunning(bool running);
    void error(const QString& title, const QString& message);
    /// Shows `text` above the views until the next run is shown (empty: hides it).
    void setNotice(const QString& text);
    /// A run that could not be read: the views are cleared and say why.
    void showUnreadable(const QString& uuid, const QString& message);
    QStringList selectedRuns() const;

    std::unique_ptr<storage::Store> store_;
    std::optional<RunResult> run_;
    QString current_;
    RunController* controller_ = nullptr;
    RunListModel* runs_ = nullptr;
    QSortFilterProxyModel* runsProxy_ = nullptr;
    SampleModel* samples_ = nullptr;
    SampleModel* compareSamples_ = nullptr;  ///< the Compare tab's chart reads both runs from it
    TrainingStepModel* steps_ = nullptr;
    QTableView* stepView_ = nullptr;
    FlipModel* flips_ = nullptr;
    LayerModel* layers_ = nullptr;
    QTableView* runView_ = nullptr;
    QLineEdit* filter_ = nullptr;
    QTabWidget* tabs_ = nullptr;
    QMenu* recentMenu_ = nullptr;
    QTextBrowser* overview_ = nullptr;
    QLabel* notice_ = nullptr;
    QChartView* deltaChart_ = nullptr;
    QChartView* histChart_ = nullptr;
    QChartView* flipChart_ = nullptr;
    QChartView* layerChart_ = nullptr;
    QChartView* lossChart_ = nullptr;
    QChartView* scaleChart_ = nullptr;
    QChartView* updatesChart_ = nullptr;
    QChartView* gradChart_ = nullptr;
    QTextBrowser* compareText_ = nullptr;
    QChartView* compareChart_ = nullptr;
    void showTraining(const QString& uuid);
    QTableView* sampleView_ = nullptr;
    QTableView* flipView_ = nullptr;
    QTableView* layerView_ = nullptr;
    QComboBox* passBox_ = nullptr;
    QPushButton* keepButton_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* stage_ = nullptr;
    QPushButton* cancel_ = nullptr;
    NewRunDialog* dialog_ = nullptr;
};

}  // namespace ampscope::ui
