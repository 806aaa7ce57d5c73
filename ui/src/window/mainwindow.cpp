// SPDX-License-Identifier: MIT
#include "mainwindow.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QFileInfo>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTextBrowser>
#include <QTimer>
#include <QToolBar>
#include <QUrl>
#include <QVBoxLayout>

#include "charts.h"
#include "comparemodel.h"
#include "flipmodel.h"
#include "layermodel.h"
#include "runlistmodel.h"
#include "samplemodel.h"
#include "trainingstepmodel.h"
#include "newrundialog.h"
#include "trainingdialog.h"
#include "replayjob.h"
#include "runcontroller.h"
#include "ampscope/engine/text.h"

namespace ampscope::ui {

MainWindow::MainWindow(std::unique_ptr<ErrorReporter> reporter, QWidget* parent)
    : QMainWindow(parent), reporter_(reporter ? std::move(reporter) : std::make_unique<MessageBoxReporter>()) {
    controller_ = new RunController(this);
    overviewLater_ = new QTimer(this);
    overviewLater_->setSingleShot(true);
    overviewLater_->setInterval(250);
    connect(overviewLater_, &QTimer::timeout, this, [this] {
        if (showingLive()) showLiveOverview();
    });
    runs_ = new RunListModel(this);
    samples_ = new SampleModel(this);
    compare_ = new CompareModel(this);
    steps_ = new TrainingStepModel(this);
    flips_ = new FlipModel(this);
    layers_ = new LayerModel(this);
    buildUi();
    buildMenus();
    clearViews();
    setAcceptDrops(true);
    QSettings s;
    restoreGeometry(s.value(QStringLiteral("window/geometry")).toByteArray());
    connectController();
}

MainWindow::~MainWindow() = default;

void MainWindow::connectController() {
    connect(controller_, &RunController::progress, this, [this](const QString& stage, int permille) {
        stage_->setText(stage);
        progress_->setValue(permille);
    });
    connect(controller_, &RunController::runStarted, this, &MainWindow::liveRunStarted);
    connect(controller_, &RunController::passFinished, this, &MainWindow::livePass);
    connect(controller_, &RunController::comparisonFinished, this, &MainWindow::liveComparison);
    connect(controller_, &RunController::runCompleted, this, [this](const RunResult& r) {
        if (live_ && !live_->training) live_->run = r;
    });
    connect(controller_, &RunController::trainingStarted, this, &MainWindow::liveTrainingStarted);
    connect(controller_, &RunController::stepsFinished, this, &MainWindow::liveSteps);
    connect(controller_, &RunController::finished, this, [this](const QString& uuid, const QString& verdict) {
        liveEnded(uuid, QStringLiteral("completed"));
        statusBar()->showMessage(QStringLiteral("run %1: %2").arg(uuid.left(8), verdict), 10000);
    });
    connect(controller_, &RunController::cancelled, this, [this](const QString& uuid) {
        liveEnded(uuid, QStringLiteral("cancelled"));
        statusBar()->showMessage(QStringLiteral("run cancelled; finished passes are kept"), 10000);
    });
    connect(controller_, &RunController::failed, this, [this](const QString& uuid, const QString& msg) {
        liveEnded(uuid, QStringLiteral("failed"));
        error(QStringLiteral("Run failed"),
              msg + (uuid.isEmpty() ? QString() : QStringLiteral("\n\nThe run is kept as failed.")));
    });
}

void MainWindow::buildMenus() {
    auto* file = menuBar()->addMenu(QStringLiteral("&File"));
    auto add = [this](QMenu* m, const QString& text, QKeySequence key, auto fn) {
        auto* a = m->addAction(text);
        a->setShortcut(key);
        connect(a, &QAction::triggered, this, fn);
        return a;
    };
    add(file, QStringLiteral("&Open database…"), QKeySequence::Open, [this] {
        const auto f = QFileDialog::getOpenFileName(
            this, QStringLiteral("Open run database"), {},
            QStringLiteral("ampscope databases (*.sqlite *.ampscope *.db);;All files (*)"));
        if (!f.isEmpty()) openDatabase(f);
    });
    recentMenu_ = file->addMenu(QStringLiteral("Open &recent"));
    recentMenu_->setObjectName(QStringLiteral("recentMenu"));
    connect(recentMenu_, &QMenu::aboutToShow, this, &MainWindow::fillRecentMenu);
    fillRecentMenu();
    add(file, QStringLiteral("&New run…"), QKeySequence::New, &MainWindow::newRun);
    add(file, QStringLiteral("New &training run…"), QKeySequence(QStringLiteral("Ctrl+Shift+N")),
        &MainWindow::newTrainingRun);
    addReplayAction(file);
    file->addSeparator();
    add(file, QStringLiteral("&Import runs…"), QKeySequence(QStringLiteral("Ctrl+I")), [this] { importFile(); });
    add(file, QStringLiteral("&Export selected runs…"), QKeySequence(QStringLiteral("Ctrl+E")),
        &MainWindow::exportSelected);
    add(file, QStringLiteral("Export run &report (HTML)…"), QKeySequence(QStringLiteral("Ctrl+R")),
        &MainWindow::exportReport);
    add(file, QStringLiteral("Export current &chart (PNG/SVG)…"), QKeySequence(QStringLiteral("Ctrl+Shift+C")),
        &MainWindow::exportCurrentChart);
    add(file, QStringLiteral("Export current &table (CSV)…"), QKeySequence(QStringLiteral("Ctrl+Shift+T")),
        &MainWindow::exportCurrentTable);
    file->addSeparator();
    add(file, QStringLiteral("&Quit"), QKeySequence::Quit, &QWidget::close);
    auto* run = menuBar()->addMenu(QStringLiteral("&Run"));
    add(run, QStringLiteral("&Annotate…"), QKeySequence(QStringLiteral("Ctrl+M")), &MainWindow::annotate);
    add(run, QStringLiteral("Review: a&ccept"), QKeySequence(QStringLiteral("Ctrl+Shift+A")),
        [this] { setReview(ReviewStatus::Accepted); });
    add(run, QStringLiteral("Review: re&ject"), QKeySequence(QStringLiteral("Ctrl+Shift+J")),
        [this] { setReview(ReviewStatus::Rejected); });
    addAdviseAction(run);
    add(run, QStringLiteral("C&ompare two selected runs"), QKeySequence(QStringLiteral("Ctrl+D")),
        &MainWindow::compareSelected);
    add(run, QStringLiteral("&Delete selected runs…"), QKeySequence::Delete, &MainWindow::deleteSelected);
    add(run, QStringLiteral("Cancel running job"), QKeySequence(QStringLiteral("Esc")), [this] {
        controller_->cancel();
        replayJob_->cancel();
    });
    add(run, QStringLiteral("Re&fresh"), QKeySequence::Refresh, &MainWindow::refreshRuns);
    auto* edit = menuBar()->addMenu(QStringLiteral("&Edit"));
    add(edit, QStringLiteral("&Preferences…"), QKeySequence::Preferences, [this] {
        QSettings st;
        bool ok = false;
        const auto author = QInputDialog::getText(
            this, QStringLiteral("Preferences"), QStringLiteral("Author name for annotations and reviews:"),
            QLineEdit::Normal, st.value(QStringLiteral("author"), qEnvironmentVariable("USER")).toString(), &ok);
        if (ok && !author.trimmed().isEmpty()) st.setValue(QStringLiteral("author"), author.trimmed());
    });
    auto* help = menuBar()->addMenu(QStringLiteral("&Help"));
    add(help, QStringLiteral("&About ampscope"), QKeySequence(), &MainWindow::about);
    auto* tb = addToolBar(QStringLiteral("Main"));
    tb->setObjectName(QStringLiteral("mainToolbar"));
    for (auto* a : file->actions())
        if (a->text().contains(QStringLiteral("New run")) || a->text().contains(QStringLiteral("Open")))
            tb->addAction(a);
}

bool MainWindow::openDatabase(const QString& path) {
    const QFileInfo info(path);
    const bool emptyFile = info.exists() && info.isFile() && info.size() == 0;
    if (emptyFile &&
        !reporter_->confirm(
            this, QStringLiteral("Empty file"),
            QStringLiteral("%1 is empty (0 bytes).\n\nCreate a new ampscope run database in it?").arg(path)))
        return false;
    try {
        store_ = std::make_unique<storage::Store>(path.toStdString());
    } catch (const std::exception& e) {
        error(QStringLiteral("Cannot open database"), QString::fromStdString(e.what()));
        return false;
    }
    QSettings s;
    auto recent = s.value(QStringLiteral("recentDatabases")).toStringList();
    recent.removeAll(path);
    recent.prepend(path);
    s.setValue(QStringLiteral("recentDatabases"), recent.mid(0, 8));
    setWindowTitle(
        QStringLiteral("ampscope — %1%2").arg(path, store_->read_only() ? QStringLiteral(" (read-only)") : QString()));
    clearViews();
    setNotice(
        emptyFile
            ? QStringLiteral("%1 was an empty file: it is now a new ampscope run database, with no runs yet.").arg(path)
            : QString());
    refreshRuns();
    return true;
}

void MainWindow::fillRecentMenu() {
    recentMenu_->clear();
    const auto recent = QSettings().value(QStringLiteral("recentDatabases")).toStringList();
    int n = 0;
    for (const auto& path : recent) {
        auto* a = recentMenu_->addAction(QStringLiteral("&%1  %2").arg(++n).arg(path));
        a->setData(path);
        a->setEnabled(QFileInfo::exists(path));  // moved or deleted files stay listed, greyed
        connect(a, &QAction::triggered, this, [this, path] { openDatabase(path); });
    }
    if (recent.isEmpty())
        recentMenu_->addAction(QStringLiteral("(none yet)"))->setEnabled(false);
    else {
        recentMenu_->addSeparator();
        connect(recentMenu_->addAction(QStringLiteral("Clear list")), &QAction::triggered, this,
                [] { QSettings().remove(QStringLiteral("recentDatabases")); });
    }
}

QString MainWindow::databasePath() const {
    return store_ ? QString::fromStdString(store_->path()) : QString();
}

void MainWindow::refreshRuns() {
    if (!store_) return;
    try {
        QStringList selected;  // the user's selection stays where it was
        for (const auto& i : runView_->selectionModel()->selectedRows())
            selected << i.data(RunListModel::UuidRole).toString();
        runs_->resetData(store_->list_runs());
        if (live_) listLive(QString(), false);  // a live run not recorded as running yet (or never: a foreign file)
        selectRuns(selected, current_);
    } catch (const std::exception& e) {
        setNotice(
            QStringLiteral("Cannot list the runs of %1: %2").arg(databasePath(), QString::fromStdString(e.what())));
    }
}

bool MainWindow::startRun(const RunSpec& spec) {
    return store_ && launched(controller_->start(spec, databasePath()));
}

bool MainWindow::startTraining(const TrainSpec& spec) {
    return store_ && launched(controller_->startTraining(spec, databasePath()));
}

bool MainWindow::launched(bool accepted) {
    if (!accepted) {
        error(QStringLiteral("A run is going"), QStringLiteral("Wait for the current run to finish or cancel it."));
        return false;
    }
    setRunning(true);
    return true;
}

void MainWindow::newRun() {
    delete dialog_;
    dialog_ = new NewRunDialog(this);
    if (run_) dialog_->setSpec(run_->spec);
    if (dialog_->exec() != QDialog::Accepted) return;  // the dialog validated its fields
    if (startRun(dialog_->spec())) dialog_->lockCriteria();
}

void MainWindow::newTrainingRun() {
    if (!store_) return;
    TrainingDialog dlg(this);
    QSettings st;
    if (st.contains(QStringLiteral("training/model"))) {
        TrainSpec last;
        last.model = st.value(QStringLiteral("training/model")).toString().toStdString();
        last.data = st.value(QStringLiteral("training/data"), QStringLiteral("demo")).toString().toStdString();
        last.steps = st.value(QStringLiteral("training/steps"), 50).toInt();
        dlg.setSpec(last);
    }
    if (dlg.exec() != QDialog::Accepted) return;  // the dialog validated its fields
    const auto spec = dlg.spec();
    st.setValue(QStringLiteral("training/model"), QString::fromStdString(spec.model));
    st.setValue(QStringLiteral("training/data"), QString::fromStdString(spec.data));
    st.setValue(QStringLiteral("training/steps"), spec.steps);
    startTraining(spec);
}

void MainWindow::keepSelectedModule() {
    if (!run_) return;
    const int pass = passBox_->currentIndex();
    const bool fp8 = pass >= 0 && pass < int(run_->passes.size()) && is_fp8(run_->passes[size_t(pass)].precision);
    const QString title = fp8 ? QStringLiteral("Keep in BF16") : QStringLiteral("Keep in FP32");
    const auto idx = tables_[kLayersTab]->currentIndex();
    if (!idx.isValid()) {
        error(title, QStringLiteral("Select a layer (an op of a module) in the table first."));
        return;
    }
    const QString module = idx.data(LayerModel::ModuleRole).toString();
    if (module.isEmpty()) {
        error(title, QStringLiteral("That op belongs to the root module; pick an op inside a submodule."));
        return;
    }
    // an FP8 pass's module is left out of FP8 in BF16 (the recipes' module filter); an fp16/bf16
    // pass's runs without autocast, in FP32
    RunSpec spec = run_->spec;
    auto& kept = fp8 ? spec.keep_bf16 : spec.keep_fp32;
    const std::string glob = exact_glob(module.toStdString());  // the module alone, not a glob
    if (std::find(kept.begin(), kept.end(), glob) == kept.end()) kept.push_back(glob);
    startRun(spec);
}

void MainWindow::setRunning(bool running) {
    progress_->setVisible(running);
    cancel_->setVisible(running);
    stage_->setVisible(running);
    if (!running) progress_->setValue(0);
}

void MainWindow::error(const QString& title, const QString& message) {
    reporter_->error(this, title, message);
}

void MainWindow::setNotice(const QString& text) {
    notice_->setText(text);
    notice_->setVisible(!text.isEmpty());
}

QString MainWindow::notice() const {
    return notice_->text();
}

QStringList MainWindow::selectedRuns() const {
    QStringList out;
    for (const auto& i : runView_->selectionModel()->selectedRows()) out << i.data(RunListModel::UuidRole).toString();
    if (out.isEmpty() && !current_.isEmpty()) out << current_;
    return out;
}

void MainWindow::selectRuns(const QStringList& uuids, const QString& current) {
    const QSignalBlocker block(runView_->selectionModel());  // the views show `current` already
    runView_->selectionModel()->clearSelection();
    for (int r = 0; r < runsProxy_->rowCount(); ++r) {
        const QModelIndex i = runsProxy_->index(r, 0);
        const QString uuid = i.data(RunListModel::UuidRole).toString();
        if (uuids.contains(uuid))
            runView_->selectionModel()->select(i, QItemSelectionModel::Select | QItemSelectionModel::Rows);
        if (uuid == current) runView_->selectionModel()->setCurrentIndex(i, QItemSelectionModel::NoUpdate);
    }
}

void MainWindow::importFile(const QString& given) {
    if (!store_) return;
    const QString path =
        given.isEmpty() ? QFileDialog::getOpenFileName(this, QStringLiteral("Import runs"), {},
                                                       QStringLiteral("ampscope exports (*.ampscope);;All files (*)"))
                        : given;
    if (path.isEmpty()) return;
    try {
        const auto r = storage::import_file(*store_, path.toStdString());
        refreshRuns();
        statusBar()->showMessage(QStringLiteral("imported %1 run(s), %2 already present").arg(r.added).arg(r.skipped),
                                 10000);
    } catch (const std::exception& e) {
        error(QStringLiteral("Cannot import"), QString::fromStdString(e.what()));
    }
}

void MainWindow::exportSelected() {
    const auto ids = selectedRuns();
    if (!store_ || ids.isEmpty()) return;
    const auto path = QFileDialog::getSaveFileName(this, QStringLiteral("Export runs"), QStringLiteral("runs.ampscope"),
                                                   QStringLiteral("ampscope exports (*.ampscope)"));
    if (path.isEmpty()) return;
    try {
        std::vector<std::string> uuids;
        for (const auto& i : ids) uuids.push_back(i.toStdString());
        // the save dialog asked before replacing a file: that is the CLI's --force (the open
        // database itself is still refused)
        storage::export_runs(*store_, uuids, path.toStdString(), true);
        statusBar()->showMessage(QStringLiteral("exported %1 run(s) to %2").arg(ids.size()).arg(path), 10000);
    } catch (const std::exception& e) {
        error(QStringLiteral("Cannot export"), QString::fromStdString(e.what()));
    }
}

void MainWindow::annotate() {
    if (!store_ || current_.isEmpty()) return;
    QString targetKind = QStringLiteral("run"), target;
    const QTableView* layerView = tables_[kLayersTab];
    const QTableView* sampleView = tables_[kDeltasTab];
    if (tabs_->currentIndex() == kLayersTab && layerView->currentIndex().isValid()) {
        targetKind = QStringLiteral("layer");
        const auto* l = layers_->layer(
            static_cast<QSortFilterProxyModel*>(layerView->model())->mapToSource(layerView->currentIndex()).row());
        if (l) target = passBox_->currentText() + QStringLiteral(":") + QString::number(l->index);
    } else if (tabs_->currentIndex() == kDeltasTab && sampleView->currentIndex().isValid()) {
        targetKind = QStringLiteral("sample");
        target = sampleView->model()->index(sampleView->currentIndex().row(), 0).data().toString();
    }
    bool ok = false;
    const auto text = QInputDialog::getMultiLineText(
        this, QStringLiteral("Annotate"), QStringLiteral("Comment on %1 %2").arg(targetKind, target), {}, &ok);
    if (!ok || text.trimmed().isEmpty()) return;
    QSettings s;
    storage::Annotation a;
    a.author = s.value(QStringLiteral("author"), qEnvironmentVariable("USER")).toString().toStdString();
    a.target_kind = targetKind.toStdString();
    a.target = target.toStdString();
    a.text = text.toStdString();
    try {
        store_->annotate(current_.toStdString(), a);
        refreshRuns();
        showRun(current_);
    } catch (const std::exception& e) {
        error(QStringLiteral("Cannot annotate"), QString::fromStdString(e.what()));
    }
}

void MainWindow::setReview(ReviewStatus status) {
    if (!store_ || current_.isEmpty()) return;
    QSettings s;
    try {
        store_->set_review(current_.toStdString(), status,
                           s.value(QStringLiteral("author"), qEnvironmentVariable("USER")).toString().toStdString());
        refreshRuns();
        showRun(current_);
    } catch (const std::exception& e) {
        error(QStringLiteral("Cannot set review"), QString::fromStdString(e.what()));
    }
}

void MainWindow::deleteSelected() {
    const auto ids = selectedRuns();
    if (!store_ || ids.isEmpty()) return;
    if (!reporter_->confirm(
            this, QStringLiteral("Delete runs"),
            QStringLiteral("Delete %1 run(s) with their passes, layers and annotations?").arg(ids.size())))
        return;
    try {
        for (const auto& i : ids) store_->delete_run(i.toStdString());
    } catch (const std::exception& e) {
        error(QStringLiteral("Cannot delete"), QString::fromStdString(e.what()));
    }
    clearViews();
    refreshRuns();
}

void MainWindow::about() {
    QString text = QStringLiteral("<h3>ampscope %1</h3><p>Is it safe to run this model in mixed precision?</p><pre>")
                       .arg(QString::fromStdString(version()));
    try {
        const auto b = backend_report("cpu");
        text += QStringLiteral("torch %1\nCPU: %2\nCUDA devices: %3\nbf16: %4</pre>")
                    .arg(QString::fromStdString(b.torch_version), QString::fromStdString(b.name))
                    .arg(b.cuda_device_count)
                    .arg(b.bf16_supported ? QStringLiteral("supported") : QStringLiteral("not supported"));
    } catch (const std::exception& e) {
        text += QString::fromStdString(e.what()) + QStringLiteral("</pre>");
    }
    QMessageBox::about(this, QStringLiteral("About ampscope"), text);
}

void MainWindow::closeEvent(QCloseEvent* e) {
    QSettings s;
    s.setValue(QStringLiteral("window/geometry"), saveGeometry());
    controller_->cancel();
    e->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
    if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
    for (const auto& url : e->mimeData()->urls()) {
        const auto f = url.toLocalFile();
        if (QFileInfo(f).isDir() && QFileInfo::exists(f + QStringLiteral("/incident.json")))
            openIncident(f);  // an incident bundle folder
        else if (f.endsWith(QStringLiteral(".ampscope")))
            importFile(f);
        else if (f.endsWith(QStringLiteral(".sqlite")) || f.endsWith(QStringLiteral(".db")))
            openDatabase(f);
    }
}

}  // namespace ampscope::ui
