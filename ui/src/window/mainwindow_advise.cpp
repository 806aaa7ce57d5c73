// SPDX-License-Identifier: MIT
// MainWindow: Run → Advise FP32 regions… on the comparison run shown, and Apply and re-run:
// the verifying run recorded through startRun, then opened when it ends.
#include <QAction>
#include <QMenu>

#include "advisedialog.h"
#include "mainwindow.h"
#include "runcontroller.h"

namespace ampscope::ui {

void MainWindow::addAdviseAction(QMenu* run) {
    adviseAction_ = run->addAction(QStringLiteral("Ad&vise FP32 regions…"));
    adviseAction_->setObjectName(QStringLiteral("adviseAction"));
    adviseAction_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+V")));
    adviseAction_->setToolTip(
        QStringLiteral("Which modules must stay in FP32 for this run's AMP passes to meet its criteria"));
    connect(adviseAction_, &QAction::triggered, this, [this] { openAdvisor(); });
    connect(run, &QMenu::aboutToShow, this, &MainWindow::updateAdviseAction);
    connect(controller_, &RunController::finished, this, [this](const QString& uuid, const QString& verdict) {
        if (!verifyFor_) return;
        verifyFor_->setVerified(uuid, verdict);
        verifyFor_ = nullptr;
        selectRuns({uuid}, uuid);
        showRun(uuid);
    });
    for (auto signal : {&RunController::cancelled})
        connect(controller_, signal, this, [this](const QString&) { verifyFor_ = nullptr; });
    connect(controller_, &RunController::failed, this,
            [this](const QString&, const QString&) { verifyFor_ = nullptr; });
    updateAdviseAction();
}

void MainWindow::updateAdviseAction() {
    if (!adviseAction_) return;
    adviseAction_->setEnabled(store_ && run_ && !(live_ && live_->uuid.toStdString() == run_->run_id));
}

AdviseDialog* MainWindow::openAdvisor() {
    updateAdviseAction();
    if (!adviseAction_->isEnabled()) return nullptr;
    const std::string id = run_->run_id;
    RunResult run;
    try {
        run = store_->load_run(id);  // the spec and criteria as recorded
    } catch (const std::exception& e) {
        error(QStringLiteral("Cannot advise"), QString::fromStdString(e.what()));
        return nullptr;
    }
    if (advise_ && advise_->runUuid().toStdString() == id) {
        advise_->show();
        advise_->raise();
        advise_->activateWindow();
        return advise_;
    }
    auto* d = new AdviseDialog(run, reporter_.get(), this);
    d->setAttribute(Qt::WA_DeleteOnClose);
    connect(d, &AdviseDialog::applyRequested, this, [this, d](const RunSpec& spec) {
        verifyFor_ = d;
        if (!startRun(spec)) verifyFor_ = nullptr;
    });
    advise_ = d;
    d->show();
    return d;
}

}  // namespace ampscope::ui
