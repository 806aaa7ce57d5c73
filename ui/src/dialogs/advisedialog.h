// SPDX-License-Identifier: MIT
#pragma once
// Run → Advise FP32 regions…: the precision advisor on a recorded comparison run (its spec
// and criteria as recorded), on a worker thread. Shows the stages' progress with Cancel, the
// per-module sensitivity (chart in execution order and ranked table; what was found survives
// a cancel), the proposed FP32 set with the reasons, and offers Apply and re-run (the
// verifying run, through the main window), then, once that run accepted the set, Save set…
// (the advise JSON, a --keep-fp32-file) and Copy Python snippet. Non-modal.

#include <QDialog>

#include <optional>

#include "ampscope/engine/advise.h"
#include "ampscope/engine/run.h"

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;
class QTableWidget;
class QTabWidget;

namespace ampscope::ui {

class AdviseJob;
class ChartWidget;
class ErrorReporter;
class SensitivityModel;

class AdviseDialog : public QDialog {
    Q_OBJECT
public:
    enum Tabs { kChartTab, kTableTab, kSetTab };
    /// `run`: the recorded comparison run advised on; `reporter` (not owned) tells errors.
    AdviseDialog(const RunResult& run, ErrorReporter* reporter, QWidget* parent = nullptr);
    ~AdviseDialog() override;  ///< cancels and joins a running advisor

    /// The advisor's spec: the run's spec and criteria as recorded, no FP32 regions,
    /// advised_from the run; the granularity chosen here.
    AdviseSpec adviseSpec() const;
    /// "leaf", "block" or a depth N >= 1.
    void setGranularity(const QString& text);
    QString granularity() const;
    /// Starts the advisor (false when it is going).
    bool start();
    void cancel();
    bool running() const;
    /// The last result: complete (complete() true) or what a cancelled or failed run found.
    const std::optional<AdviseResult>& result() const { return result_; }
    bool complete() const { return complete_; }
    /// The verifying run's spec: the recorded one with keep_fp32 = the set found.
    RunSpec verifySpec() const;
    /// Writes the advise JSON (a file `ampscope-cli run --keep-fp32-file` reads) of a set its
    /// verifying run accepted. "" or an error (no set, or not verified yet, or unverified).
    QString saveSet(const QString& path) const;
    /// The verifying run recorded by the main window, with its verdict: accepted makes the set
    /// advice (Save set…, Copy Python snippet); any other verdict makes it unverified.
    void setVerified(const QString& uuid, const QString& verdict);
    /// A set found and accepted by its verifying run.
    bool verified() const;
    QString runUuid() const;

    // for tests
    AdviseJob* job() const { return job_; }
    SensitivityModel* sensitivityModel() const { return sensitivity_; }
    QTableView* sensitivityTable() const { return table_; }
    ChartWidget* chart() const { return chart_; }
    QTableWidget* reasonTable() const { return reasons_; }
    QString outcomeText() const;
    QString summaryText() const;
    QString stageText() const;
    /// What every run of the model says (AdviseResult::warnings), shown under the outcome; empty
    /// when it says nothing.
    QString warningsText() const;
    QPushButton* applyButton() const { return apply_; }
    QPushButton* saveButton() const { return save_; }
    QPushButton* copyButton() const { return copy_; }
    QPushButton* startButton() const { return start_; }
    QPushButton* cancelButton() const { return cancel_; }

public Q_SLOTS:
    void copyPythonSnippet();
    void saveSetInteractively();
    void applyAndRerun();

Q_SIGNALS:
    /// Apply and re-run: the main window records `spec` (the verifying run).
    void applyRequested(const ampscope::RunSpec& spec);
    /// The advisor ended: "finished", "cancelled" or "failed".
    void ended(const QString& how);

private:
    // layout (advisedialog.cpp)
    QWidget* buildControls();
    QWidget* buildProgress();
    QWidget* buildViews();
    QWidget* buildSetTab();
    QWidget* buildButtons();
    void connectJob();
    void setRunning(bool running);
    void onProgress(const QString& stage, int done, int total);
    // results (advisedialog_results.cpp)
    void showResult(const AdviseResult& r, bool complete);
    void showSet(const AdviseResult& r);
    void showOutcome();  ///< the outcome line of result_ (and whether its set is verified yet)
    void updateButtons();

    RunResult run_;
    ErrorReporter* reporter_;
    AdviseJob* job_;
    std::optional<AdviseResult> result_;
    bool complete_ = false;
    QString verifiedRun_, verifiedVerdict_;  ///< the verifying run of the set shown ("" before it ends)
    SensitivityModel* sensitivity_;
    QComboBox* granularity_ = nullptr;
    QSpinBox* depth_ = nullptr;
    QPushButton *start_ = nullptr, *cancel_ = nullptr, *apply_ = nullptr, *save_ = nullptr, *copy_ = nullptr;
    QLabel* stage_ = nullptr;
    int stageIndex_ = 0;  ///< the advisor's stage now (progress)
    QString stageName_;
    QProgressBar* progress_ = nullptr;
    QLabel* outcome_ = nullptr;
    QLabel* summary_ = nullptr;
    QLabel* verified_ = nullptr;
    QLabel* warnings_ = nullptr;  ///< the model's warnings (weights not float32, a static batch, ...)
    QTabWidget* tabs_ = nullptr;
    ChartWidget* chart_ = nullptr;
    QTableView* table_ = nullptr;
    QTableWidget* reasons_ = nullptr;
};

}  // namespace ampscope::ui
