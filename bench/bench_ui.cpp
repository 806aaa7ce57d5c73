// SPDX-License-Identifier: MIT
// GUI: a training run shown live. A fake training engine produces N steps on the run
// controller's worker (recorded through TrainWriter, as a real run is); the main window shows
// the run and appends the steps to the Training view's model, table and four charts, exactly
// as for a real run. Reported per N (500, 1000, 2000): the UI heartbeat (largest gap between
// ticks of a 5 ms QTimer on the UI thread; target < 50 ms), the UI thread's CPU time for the
// whole run (its refresh work) and that time per step (constant when the work is linear in the
// steps). Offscreen; its own main (a QApplication).
#include <benchmark/benchmark.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <chrono>
#include <thread>

#include <ctime>

#include "mainwindow.h"
#include "trainingstepmodel.h"
#include "charts.h"
#include "runcontroller.h"

namespace {

using namespace ampscope;

class Silent : public ui::ErrorReporter {
    void error(QWidget*, const QString&, const QString&) override {}
    bool confirm(QWidget*, const QString&, const QString&) override { return true; }
};

double threadCpuMs() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

/// `n` steps, one every `pause` (a real step takes milliseconds; the UI must keep up).
TrainResult fakeRun(int n, TrainSink* sink, std::chrono::microseconds pause) {
    TrainResult r;
    r.run_id = make_uuid();
    r.started_at = now_iso8601();
    sink->train_started(r);
    for (int i = 0; i < n; ++i) {
        TrainStep s;
        s.step = i;
        s.loss_ref = 2.0 / (1 + 0.01 * i);
        s.loss_amp = s.loss_ref * (1 + 0.001 * (i % 7));
        s.scale = 65536.0 / double(1 << (i % 5));
        s.skipped = i % 97 == 3;
        s.found_inf = s.skipped;
        s.effective_updates = i + 1 - i / 97;
        s.grad_norm = 1.0 + 0.1 * (i % 13);
        s.divergence = 1e-5 * (1 + i);
        s.grad_underflow = i % 11;
        sink->step_finished(s);
        std::this_thread::sleep_for(pause);
    }
    r.iterations = n;
    sink->train_finished(r);
    return r;
}

void BM_LiveTrainingRun(benchmark::State& state) {
    const int n = int(state.range(0));
    double worstGap = 0, worstGapAt = 0, uiCpu = 0, deliveries = 0;
    for (auto _ : state) {
        QTemporaryDir dir;
        ui::MainWindow w(std::make_unique<Silent>());
        w.openDatabase(dir.filePath(QStringLiteral("live.sqlite")));
        w.resize(1280, 820);
        w.show();
        w.controller()->setEngines({}, [n](const TrainSpec&, TrainSink* sink, ProgressObserver*) {
            return fakeRun(n, sink, std::chrono::microseconds(250));
        });
        QSignalSpy done(w.controller(), &ui::RunController::finished);
        QSignalSpy batches(w.controller(), &ui::RunController::stepsFinished);
        (void)QTest::qWaitForWindowExposed(&w);  // the window's first paint is not the run's
        QTest::qWait(200);
        QElapsedTimer beat;
        qint64 worst = 0;
        int worstAt = -1;  // the rows shown when the longest gap ended
        QTimer heartbeat;
        QObject::connect(&heartbeat, &QTimer::timeout, [&] {
            const qint64 gap = beat.restart();
            if (gap > worst) {
                worst = gap;
                worstAt = w.stepModel()->rowCount();
            }
        });
        const double cpu0 = threadCpuMs();
        beat.start();
        heartbeat.start(5);
        w.startTraining(TrainSpec{});
        while (done.isEmpty() || w.stepModel()->rowCount() < n)
            QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
        QElapsedTimer settle;  // the last batch's chart refresh
        settle.start();
        while (settle.elapsed() < 2 * ui::kLiveRefreshMs) QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
        uiCpu = threadCpuMs() - cpu0;
        worstGap = double(worst);
        worstGapAt = worstAt;
        deliveries = batches.count();
    }
    state.counters["heartbeat_max_ms"] = worstGap;
    state.counters["heartbeat_max_at_rows"] = worstGapAt;
    state.counters["ui_cpu_ms"] = uiCpu;
    state.counters["ui_cpu_us_per_step"] = 1000.0 * uiCpu / n;
    state.counters["deliveries"] = deliveries;
}
BENCHMARK(BM_LiveTrainingRun)
    ->Arg(500)
    ->Arg(1000)
    ->Arg(2000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
