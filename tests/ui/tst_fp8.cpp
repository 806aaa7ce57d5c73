// SPDX-License-Identifier: MIT
// The FP8 headroom chart (issue 30) on a recorded run: demo:mlp run with the fp8, mxfp8 and
// fp8-delayed passes and recorded in a database, opened in the main window; in the Layers tab,
// selecting an FP8 pass shows the "FP8 headroom" chart, whose series hold, per GEMM operand in
// the stored order, the figures the database holds (log2 window of the format after scaling,
// log2 amax, saturated and underflow shares); selecting the FP32 reference hides it.
#include <QComboBox>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QXYSeries>
#include <QtTest>

#include <cmath>
#include <memory>

#include "ampscope/engine/run.h"
#include "ampscope/storage/store.h"
#include "chart_probe.h"
#include "charts.h"
#include "errorreporter.h"
#include "mainwindow.h"

using namespace ampscope;
using namespace ampscope::ui;
using chart_probe::series;

namespace {

class Recorder : public ErrorReporter {
public:
    explicit Recorder(QStringList* messages) : messages_(messages) {}
    void error(QWidget*, const QString& title, const QString& message) override {
        *messages_ << title + QStringLiteral(": ") + message;
    }
    bool confirm(QWidget*, const QString& title, const QString& question) override {
        *messages_ << title + QStringLiteral("? ") + question;
        return true;
    }

private:
    QStringList* messages_;
};

}  // namespace

class TstFp8 : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir_;
    QString db_;
    std::string uuid_;
    QStringList messages_;

private Q_SLOTS:
    void initTestCase() {
        db_ = dir_.filePath(QStringLiteral("runs.sqlite"));
        storage::Store store(db_.toStdString());
        storage::RunWriter w(store);
        RunSpec spec;
        spec.model = "demo:mlp";
        spec.device = "cpu";
        spec.precisions = {Precision::Fp8, Precision::Mxfp8, Precision::Fp8Delayed};
        spec.batch_size = 8;  // several batches: fp8-delayed's first one runs with scale 1
        uuid_ = run_comparison(spec, &w).run_id;
    }

    void headroomChartHoldsTheStoredFigures() {
        const auto stored = storage::Store(db_.toStdString(), storage::Store::Mode::ReadOnly).load_run(uuid_);
        MainWindow w(std::make_unique<Recorder>(&messages_));
        QVERIFY(w.openDatabase(db_));
        w.resize(1280, 820);
        w.show();
        w.showRun(QString::fromStdString(uuid_));
        w.tabs()->setCurrentIndex(MainWindow::kLayersTab);
        auto* layersTab = w.tabs()->widget(MainWindow::kLayersTab);
        auto* passBox = layersTab->findChild<QComboBox*>();
        auto* charts = layersTab->findChild<QTabWidget*>(QStringLiteral("layerCharts"));
        auto* fp8 = layersTab->findChild<ChartWidget*>(QStringLiteral("fp8HeadroomChart"));
        QVERIFY(passBox && charts && fp8);
        const int fp8Tab = charts->indexOf(fp8);
        QCOMPARE(passBox->count(), int(stored.passes.size()));
        for (int i = 0; i < passBox->count(); ++i) {
            const auto& pass = stored.passes[size_t(i)];
            passBox->setCurrentIndex(i);
            QCOMPARE(passBox->currentText(), QString::fromStdString(to_string(pass.precision)));
            if (!is_fp8(pass.precision)) {
                QVERIFY2(!charts->isTabVisible(fp8Tab), "the FP32 reference has no FP8 headroom");
                continue;
            }
            QVERIFY(!pass.fp8_operands.empty());
            QVERIFY2(charts->isTabVisible(fp8Tab), qPrintable(passBox->currentText()));
            charts->setCurrentIndex(fp8Tab);
            // built when shown, rebuilt when the pass changes: wait for this pass's chart
            QTRY_VERIFY(fp8->chart() &&
                        fp8->chart()->title().contains(passBox->currentText() + QStringLiteral(" pass")));
            auto* low = series(fp8->chart(), QStringLiteral("smallest subnormal / scale"));
            auto* high = series(fp8->chart(), QStringLiteral("max finite / scale"));
            auto* amax = series(fp8->chart(), QStringLiteral("amax"));
            auto* sat = series(fp8->chart(), QStringLiteral("saturated %"));
            auto* under = series(fp8->chart(), QStringLiteral("underflow %"));
            QVERIFY(low && high && amax && sat && under);
            const auto& ops = pass.fp8_operands;
            QCOMPARE(low->count(), int(ops.size()));
            QCOMPARE(amax->count(), int(ops.size()));  // every operand of demo:mlp has a finite amax
            bool saturates = false;
            for (size_t k = 0; k < ops.size(); ++k) {
                const auto& s = ops[k].stats;
                const QString what = passBox->currentText() + QStringLiteral(" operand %1").arg(k);
                const double sub = s.element == Fp8Element::E4M3 ? std::ldexp(1.0, -9) : 0.5;
                QCOMPARE(low->at(int(k)).x(), double(k));
                QCOMPARE(low->at(int(k)).y(), std::log2(sub / s.scale_max));
                QCOMPARE(high->at(int(k)).y(), std::log2(max_finite(s.element) / s.scale_min));
                QCOMPARE(amax->at(int(k)).y(), std::log2(s.amax));
                QCOMPARE(sat->at(int(k)).y(), 100 * double(s.saturated) / double(s.numel));
                QCOMPARE(under->at(int(k)).y(), 100 * double(s.underflow) / double(s.numel));
                QVERIFY2(s.numel > 0, qPrintable(what));
                saturates = saturates || s.saturated > 0;
            }
            if (pass.precision == Precision::Fp8Delayed)  // scale 1 in the first batch
                QVERIFY2(saturates || ops[0].stats.amax < 448, "delayed scaling's first batch saturates");
        }
        QVERIFY2(messages_.isEmpty(), qPrintable(messages_.join(QLatin1Char('\n'))));
    }
};

QTEST_MAIN(TstFp8)
#include "tst_fp8.moc"
