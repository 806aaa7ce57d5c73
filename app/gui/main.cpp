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
#include <vector>

#include "ampscope/storage/store.h"
#include "mainwindow.h"
#include "models.h"
#include "runcontroller.h"

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("ampscope"));
    QApplication::setApplicationName(QStringLiteral("ampscope"));
    QApplication::setApplicationVersion(QString::fromStdString(ampscope::version()));
    QCommandLineParser p;
    p.setApplicationDescription(QStringLiteral("Is it safe to run this model in mixed precision?"));
    p.addHelpOption();
    p.addVersionOption();
    p.addPositionalArgument(QStringLiteral("DB_FILE"), QStringLiteral("run database to open (default: $AMPSCOPE_DB or the per-user database)"));
    QCommandLineOption demo(QStringLiteral("demo"), QStringLiteral("record a demo run of demo:transformer first when the database has none"));
    QCommandLineOption shot(QStringLiteral("screenshot"), QStringLiteral("render the main window to FILE once the demo is shown, then quit"),
                            QStringLiteral("FILE"));
    QCommandLineOption frames(QStringLiteral("frame-times"),
                              QStringLiteral("benchmark: repaint every view of the first run 20 times, write the median and worst "
                                             "frame time per view as JSON to FILE, then quit"),
                              QStringLiteral("FILE"));
    p.addOption(demo);
    p.addOption(shot);
    p.addOption(frames);
    p.process(app);
    const auto args = p.positionalArguments();
    const QString db = args.isEmpty() ? QString::fromStdString(ampscope::storage::default_db_path()) : args.first();

    ampscope::ui::MainWindow w;
    if (!w.openDatabase(db)) return 2;
    w.show();
    auto finish = [&] {
        if (p.isSet(frames)) {
            // One frame = a full repaint of the window showing that tab (charts included).
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
            QFile f(p.value(frames));
            if (f.open(QIODevice::WriteOnly)) f.write(QJsonDocument(out).toJson());
            app.quit();
            return;
        }
        if (p.isSet(shot)) {
            w.grab().save(p.value(shot));
            app.quit();
        }
    };
    if (p.isSet(demo) && w.runModel()->rowCount() == 0) {
        QObject::connect(w.controller(), &ampscope::ui::RunController::finished, &w, [&] { QTimer::singleShot(300, finish); });
        w.startRun(ampscope::RunSpec{});
    } else if (w.runModel()->rowCount() > 0) {
        w.showRun(w.runModel()->index(0, 0).data(ampscope::ui::RunListModel::UuidRole).toString());
        QTimer::singleShot(300, finish);
    } else {
        QTimer::singleShot(300, finish);
    }
    return app.exec();
}
