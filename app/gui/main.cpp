// SPDX-License-Identifier: MIT
// ampscope: the desktop GUI. `ampscope [DB_FILE] [--demo]`.
#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTabWidget>
#include <QTimer>

#include <algorithm>
#include <cstring>
#include <vector>

#include "ampscope/storage/store.h"
#include "mainwindow.h"
#include "runlistmodel.h"

namespace {

struct Options {
    QCommandLineOption demo{
        QStringLiteral("demo"),
        QStringLiteral("record a demo comparison run of demo:transformer, a short demo training run and a "
                       "replay of a demo incident with its remedy first when the database has none")};
    QCommandLineOption shot{QStringLiteral("screenshot"),
                            QStringLiteral("render the main window to FILE once the demo is shown, then quit"),
                            QStringLiteral("FILE")};
    QCommandLineOption frames{
        QStringLiteral("frame-times"),
        QStringLiteral("benchmark: repaint every view of the first run 20 times, write the median and "
                       "worst frame time per view as JSON to FILE, then quit"),
        QStringLiteral("FILE")};
};

void setUp(QCommandLineParser& p, const Options& o) {
    QCoreApplication::setOrganizationName(QStringLiteral("ampscope"));
    QCoreApplication::setApplicationName(QStringLiteral("ampscope"));
    QCoreApplication::setApplicationVersion(QString::fromStdString(ampscope::version()));
    p.setApplicationDescription(QStringLiteral("Is it safe to run this model in mixed precision?"));
    p.addHelpOption();
    p.addVersionOption();
    p.addPositionalArgument(QStringLiteral("DB_FILE"),
                            QStringLiteral("run database to open (default: $AMPSCOPE_DB or the per-user database)"));
    p.addOption(o.demo);
    p.addOption(o.shot);
    p.addOption(o.frames);
}

/// --help and --version need no display: they are answered before any window system is
/// touched (QApplication aborts without one).
bool asksForTextOnly(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        for (const char* flag : {"-h", "--help", "-?", "--help-all", "-v", "--version"})
            if (std::strcmp(argv[i], flag) == 0) return true;
    return false;
}

/// One frame = a full repaint of the window showing that tab (charts included).
void writeFrameTimes(ampscope::ui::MainWindow& w, const QString& path) {
    QJsonObject out;
    for (int t = 0; t < w.tabs()->count(); ++t) {
        w.tabs()->setCurrentIndex(t);
        QCoreApplication::processEvents();
        std::vector<double> ms;
        for (int i = 0; i < 20; ++i) {
            QElapsedTimer timer;
            timer.start();
            w.repaint();
            QCoreApplication::processEvents();
            ms.push_back(double(timer.nsecsElapsed()) / 1e6);
        }
        std::sort(ms.begin(), ms.end());
        out.insert(w.tabs()->tabText(t), QJsonObject{{QStringLiteral("median_ms"), ms[ms.size() / 2]},
                                                     {QStringLiteral("worst_ms"), ms.back()}});
    }
    QFile f(path);
    if (f.open(QIODevice::WriteOnly)) f.write(QJsonDocument(out).toJson());
}

}  // namespace

int main(int argc, char** argv) {
    const Options o;
    if (asksForTextOnly(argc, argv)) {
        QCoreApplication text(argc, argv);
        QCommandLineParser p;
        setUp(p, o);
        p.process(text);  // prints the usage or the version and exits
        return 0;
    }
    QApplication app(argc, argv);
    QCommandLineParser p;
    setUp(p, o);
    p.process(app);
    const auto args = p.positionalArguments();
    const QString db = args.isEmpty() ? QString::fromStdString(ampscope::storage::default_db_path()) : args.first();

    ampscope::ui::MainWindow w;
    if (!w.openDatabase(db)) return 2;
    w.show();
    auto finish = [&] {
        if (p.isSet(o.frames))
            writeFrameTimes(w, p.value(o.frames));
        else if (p.isSet(o.shot))
            w.grab().save(p.value(o.shot));
        else
            return;
        app.quit();
    };
    if (p.isSet(o.demo) && w.runModel()->rowCount() == 0) {
        QObject::connect(&w, &ampscope::ui::MainWindow::demoFinished, &w, [&] { QTimer::singleShot(300, finish); });
        w.startDemo();
    } else if (w.runModel()->rowCount() > 0) {
        w.showRun(w.runModel()->index(0, 0).data(ampscope::ui::RunListModel::UuidRole).toString());
        QTimer::singleShot(300, finish);
    } else {
        QTimer::singleShot(300, finish);
    }
    return app.exec();
}
