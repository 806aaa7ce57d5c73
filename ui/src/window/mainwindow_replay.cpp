// SPDX-License-Identifier: MIT
// MainWindow: File → Replay incident… (the dialog, the replay on a worker thread, recorded),
// the Replay tab, remedies asked for in it, and recorded replays opened from the run browser
// (a remedy beside its original), and the demo's replays (the built-in incident, its remedy).
#include <QAction>
#include <QMenu>
#include <QStatusBar>
#include <QTabWidget>
#include <QTextBrowser>

#include <QFileDialog>
#include <QFileInfo>

#include "ampscope/engine/bundle.h"
#include "ampscope/engine/errors.h"
#include "ampscope/engine/replay.h"
#include "ampscope/storage/replay_record.h"
#include "mainwindow.h"
#include "replaydialog.h"
#include "replayjob.h"
#include "replayview.h"

namespace ampscope::ui {

QWidget* MainWindow::buildReplayTab() {
    replayView_ = new ReplayView;
    replayJob_ = new ReplayJob(this);
    tables_[kReplayTab] = replayView_->table(ReplayView::Original, ReplayView::kLayersTable);
    connect(replayView_, &ReplayView::remedyRequested, this, &MainWindow::startReplay);
    connect(replayView_, &ReplayView::cancelRequested, replayJob_, &ReplayJob::cancel);
    connect(replayView_, &ReplayView::failed, this, &MainWindow::error);
    connect(replayJob_, &ReplayJob::progress, replayView_, &ReplayView::setProgress);
    connect(replayJob_, &ReplayJob::finished, this, [this](const ReplayResult& r) {
        replayView_->setRunning(false);
        const QString uuid = QString::fromStdString(r.run_id);
        refreshRuns();
        selectRuns({uuid}, uuid);
        showRun(uuid);  // from the database, as the run browser opens it: a remedy beside its original
        statusBar()->showMessage(QStringLiteral("replay %1 recorded: %2").arg(uuid.left(8), ReplayView::verdictText(r)),
                                 10000);
        if (demoStage_ > 0) demoReplay(&r);
    });
    connect(replayJob_, &ReplayJob::cancelled, this, [this] {
        replayView_->setRunning(false);
        statusBar()->showMessage(QStringLiteral("replay cancelled; nothing recorded"), 10000);
        if (demoStage_ > 0) endDemo();
    });
    connect(replayJob_, &ReplayJob::failed, this, [this](const QString& title, const QString& message) {
        replayView_->setRunning(false);
        error(title, message + QStringLiteral("\n\nNothing was recorded."));
        if (demoStage_ > 0) endDemo();
    });
    return replayView_;  // it says what it shows while it has nothing to show
}

void MainWindow::addReplayAction(QMenu* file) {
    replayAction_ = file->addAction(QStringLiteral("Re&play incident…"));
    replayAction_->setObjectName(QStringLiteral("replayAction"));
    replayAction_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+R")));
    replayAction_->setToolTip(
        QStringLiteral("Your checkpoint and the batch that broke your job, replayed in FP32 and AMP step by step"));
    connect(replayAction_, &QAction::triggered, this, &MainWindow::replayIncident);
    openIncidentAction_ = file->addAction(QStringLiteral("Open &incident…"));
    openIncidentAction_->setObjectName(QStringLiteral("openIncidentAction"));
    openIncidentAction_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+I")));
    openIncidentAction_->setToolTip(QStringLiteral(
        "An incident bundle your training job wrote (ampscope_capture): replayed with every setting it records"));
    connect(openIncidentAction_, &QAction::triggered, this, [this] { openIncident(); });
}

void MainWindow::openIncident(const QString& dir) {
    if (!store_) return;
    const QString folder =
        dir.isEmpty() ? QFileDialog::getExistingDirectory(this, QStringLiteral("Incident bundle folder")) : dir;
    if (folder.isEmpty()) return;
    ReplaySpec spec;
    try {
        spec = replay_spec_of(read_bundle(folder.toStdString()));
        if (spec.model.empty())
            throw InputError(folder.toStdString() + "/incident.json", "files.model",
                             "is null: torch.export failed in the job; choose the model in the dialog");
    } catch (const InputError& e) {
        if (spec.checkpoint.empty()) {
            error(QStringLiteral("Not an incident bundle ampscope can read"), QString::fromStdString(e.what()));
            return;
        }
        statusBar()->showMessage(QString::fromStdString(e.what()), 10000);
    }
    ReplayDialog dlg(this);
    dlg.setSpec(spec);
    if (dlg.exec() != QDialog::Accepted) return;
    startReplay(dlg.spec(), QStringLiteral("the incident bundle"));
}

void MainWindow::replayIncident() {
    if (!store_) return;
    ReplayDialog dlg(this);
    if (replayView_->hasOriginal()) dlg.setSpec(replayView_->original()->spec);  // the incident shown, to edit
    if (dlg.exec() != QDialog::Accepted) return;                                 // the dialog validated its fields
    startReplay(dlg.spec(), QStringLiteral("the incident"));
}

bool MainWindow::startReplay(const ReplaySpec& spec, const QString& what) {
    if (!store_) return false;
    if (!replayJob_->start(spec, databasePath())) {
        error(QStringLiteral("A replay is going"),
              QStringLiteral("Wait for the current replay to finish or cancel it."));
        return false;
    }
    replayView_->setRunning(true, what);
    tabs_->setCurrentIndex(kReplayTab);
    return true;
}

void MainWindow::demoReplay(const ReplayResult* replayed) {
    if (demoStage_ == 2) {  // the training ended: the built-in incident, its files beside the database
        demoStage_ = 3;
        const QString folder = QFileInfo(databasePath()).absolutePath() + QStringLiteral("/ampscope-demo-incident");
        try {
            if (startReplay(demo_incident(folder.toStdString()), QStringLiteral("the demo incident"))) return;
        } catch (const InputError& e) {
            error(QStringLiteral("Cannot write the demo incident"), QString::fromStdString(e.what()));
        }
    } else if (demoStage_ == 3 && replayed && replayed->first_nonfinite) {  // its remedy: the module kept in FP32
        demoStage_ = 4;
        const ReplaySpec remedy = ReplayView::remedySpec(*replayed, ReplayView::Remedy::KeepModule);
        if (startReplay(remedy, ReplayView::changeText(*replayed, remedy))) return;
    }
    endDemo();
}

void MainWindow::showReplay(const QString& uuid) {
    const std::string id = uuid.toStdString();
    auto read = [this](const std::string& run) {
        return storage::replay_from_json(storage::replay_json(*store_, run), store_->path() + ": replay " + run);
    };
    const ReplayResult r = read(id);  // throws for a malformed replay: showRun says so
    clearViews();
    setNotice(QString());
    current_ = uuid;
    std::optional<ReplayResult> original;
    if (!r.spec.original_run_id.empty()) {
        try {
            original = read(r.spec.original_run_id);
        } catch (const std::exception&) {
            setNotice(
                QStringLiteral("Replay %1 is a remedy of replay %2, which is not in this database: it is shown alone.")
                    .arg(uuid.left(8), QString::fromStdString(r.spec.original_run_id).left(8)));
        }
    }
    if (original) {
        replayView_->setOriginal(*original);
        replayView_->setRemedy(r);
    } else {
        replayView_->setOriginal(r);
    }
    overview_->setHtml(QStringLiteral("<h2>Incident replay %1</h2><p>%2</p><p>%3</p><pre>%4</pre>")
                           .arg(uuid.left(8), ReplayView::incidentInWords(r).toHtmlEscaped(),
                                ReplayView::stageInWords(r).toHtmlEscaped(),
                                QString::fromStdString(storage::replay_to_json(r)).toHtmlEscaped()));
    tabs_->setCurrentIndex(kReplayTab);
}

}  // namespace ampscope::ui
