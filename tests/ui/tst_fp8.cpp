// SPDX-License-Identifier: MIT
// The FP8 headroom chart (issue 30) on a recorded run: demo:mlp run with the fp8, mxfp8 and
// fp8-delayed passes and recorded in a database, opened in the main window; in the Layers tab,
// selecting an FP8 pass shows the "FP8 headroom" chart, whose series hold, per GEMM operand in
// the stored order, the figures the database holds (log2 window of the format after scaling,
// log2 amax, saturated and underflow shares); selecting the FP32 reference hides it. The New-run
// dialog offers the FP8 recipes, the BF16 list and fp8-delayed's settings, and a run started
// from it keeps the listed module out of FP8.
#include <QCategoryAxis>
#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QLineEdit>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QSpinBox>
#include <QPushButton>
#include <QTabWidget>
#include <QTableView>
#include <QTextBrowser>
#include <QTemporaryDir>
#include <QXYSeries>
#include <QtTest>

#include <cmath>
#include <memory>

#include "test_file.h"
#include "ampscope/engine/run.h"
#include "ampscope/storage/store.h"
#include "chart_probe.h"
#include "charts.h"
#include "errorreporter.h"
#include "layermodel.h"
#include "mainwindow.h"
#include "newrundialog.h"
#include "replaydialog.h"
#include "trainingdialog.h"
#include "runcontroller.h"

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
    struct LayersTab {
        QComboBox* passBox = nullptr;
        QTabWidget* charts = nullptr;
        ChartWidget* fp8 = nullptr;
    };
    /// `w` on the database, showing run `uuid`'s Layers tab at 1280 x 820: its pass box, chart tabs and FP8 chart.
    LayersTab openLayers(MainWindow& w, const std::string& uuid) {
        if (!w.openDatabase(db_)) return {};
        w.resize(1280, 820);
        w.show();
        w.showRun(QString::fromStdString(uuid));
        w.tabs()->setCurrentIndex(MainWindow::kLayersTab);
        auto* tab = w.tabs()->widget(MainWindow::kLayersTab);
        return {tab->findChild<QComboBox*>(), tab->findChild<QTabWidget*>(QStringLiteral("layerCharts")),
                tab->findChild<ChartWidget*>(QStringLiteral("fp8HeadroomChart"))};
    }

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
        const LayersTab t = openLayers(w, uuid_);
        auto* passBox = t.passBox;
        auto* charts = t.charts;
        auto* fp8 = t.fp8;
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

    void whatIfChartShowsTheRecipesSideBySide() {
        RunSpec spec;
        spec.model = "demo:mlp";
        spec.device = "cpu";
        spec.precisions = {Precision::Bf16};
        spec.fp8_what_if = true;
        std::string uuid;
        {
            storage::Store store(db_.toStdString());
            storage::RunWriter w(store);
            uuid = run_comparison(spec, &w).run_id;
        }
        const auto stored = storage::Store(db_.toStdString(), storage::Store::Mode::ReadOnly).load_run(uuid);
        const auto& ops = stored.passes.at(1).fp8_operands;
        QCOMPARE(ops.size(), size_t(3 * 2 * 4));  // demo:mlp's linears, input and weight, four recipes
        MainWindow w(std::make_unique<Recorder>(&messages_));
        const LayersTab t = openLayers(w, uuid);
        auto* passBox = t.passBox;
        auto* charts = t.charts;
        auto* fp8 = t.fp8;
        QVERIFY(passBox && charts && fp8);
        passBox->setCurrentIndex(1);
        QCOMPARE(passBox->currentText(), QStringLiteral("bf16"));
        QVERIFY(charts->isTabVisible(charts->indexOf(fp8)));
        charts->setCurrentIndex(charts->indexOf(fp8));
        QTRY_VERIFY(fp8->chart() && fp8->chart()->title().contains(QStringLiteral("FP8 what-if, bf16 pass")));
        auto* amax = series(fp8->chart(), QStringLiteral("amax"));
        QVERIFY(amax);
        QCOMPARE(amax->count(), int(ops.size()));
        const auto axes = fp8->chart()->axes(Qt::Horizontal);
        QVERIFY(!axes.isEmpty());
        const auto labels = qobject_cast<QCategoryAxis*>(axes.first())->categoriesLabels();
        QCOMPARE(labels.size(), int(ops.size()));
        for (size_t k = 0; k < ops.size(); ++k)
            QVERIFY2(
                labels[int(k)].endsWith(QString::fromStdString(" · " + to_string(what_if_recipe(ops[k].stats.scheme)))),
                qPrintable(labels[int(k)]));
        QVERIFY2(messages_.isEmpty(), qPrintable(messages_.join(QLatin1Char('\n'))));
    }

    /// Load BF16 set… beside Keep in BF16: an FP8 recipe's advice JSON fills it; an fp16/bf16
    /// advice is refused on the error line, naming its keep_fp32 list, and the field is kept.
    void newRunDialogLoadsTheBf16Set() {
        auto write = [this](const QString& name, const QByteArray& bytes) { return writeTestFile(dir_, name, bytes); };
        NewRunDialog d;
        QVERIFY(d.findChild<QPushButton*>(QStringLiteral("loadBf16Set")));
        QVERIFY(
            d.loadBf16Set(write(QStringLiteral("fp8-advice.json"),
                                R"({"outcome": "found", "kept_in": "bf16", "keep_fp32": [], "keep_bf16": ["fc2"]})")));
        QCOMPARE(d.spec().keep_bf16, std::vector<std::string>{"fc2"});
        QVERIFY(d.spec().keep_fp32.empty());
        const QString fp16 = write(QStringLiteral("fp16-advice.json"), R"({"outcome": "found", "keep_fp32": ["fc1"]})");
        QVERIFY(!d.loadBf16Set(fp16));
        QVERIFY2(d.errorText().contains(fp16) && d.errorText().contains(QStringLiteral("keep_fp32")),
                 qPrintable(d.errorText()));
        QCOMPARE(d.spec().keep_bf16, std::vector<std::string>{"fc2"});
        QVERIFY(d.loadRegions(fp16));  // where it belongs
        QCOMPARE(d.spec().keep_fp32, std::vector<std::string>{"fc1"});
    }

    /// The training and replay dialogs load the advised sets as the New run dialog does (Load BF16
    /// set…, Load FP32 regions…: an advice of the other kind refused on the error line); the BF16
    /// set's button follows its field, off without an FP8 recipe.
    void trainingAndReplayDialogsLoadTheAdvisedSets() {
        auto write = [this](const QString& name, const QByteArray& bytes) { return writeTestFile(dir_, name, bytes); };
        const QString fp8 = write(QStringLiteral("fp8-advice-tr.json"),
                                  R"({"outcome": "found", "kept_in": "bf16", "keep_fp32": [], "keep_bf16": ["fc2"]})");
        const QString fp16 =
            write(QStringLiteral("fp16-advice-tr.json"), R"({"outcome": "found", "keep_fp32": ["fc1"]})");
        TrainingDialog t;
        ReplayDialog r;
        TrainSpec ts;
        ReplaySpec rs;
        rs.model = "demo:mlp";
        rs.checkpoint = rs.batch = db_.toStdString();  // the dialog checks that they exist
        for (const Precision p : {Precision::Mxfp8, Precision::Bf16}) {
            ts.precision = rs.precision = p;
            t.setSpec(ts);
            r.setSpec(rs);
            for (SpecDialog* d : std::initializer_list<SpecDialog*>{&t, &r}) {
                auto* load = d->findChild<QPushButton*>(QStringLiteral("loadBf16Set"));
                QVERIFY(load && d->findChild<QPushButton*>(QStringLiteral("loadRegions")));
                QCOMPARE(load->isEnabled(), is_fp8(p));
            }
        }
        ts.precision = rs.precision = Precision::Mxfp8;
        t.setSpec(ts);
        r.setSpec(rs);
        QVERIFY(t.loadBf16Set(fp8));
        QVERIFY(r.loadBf16Set(fp8));
        QCOMPARE(t.spec().keep_bf16, std::vector<std::string>{"fc2"});
        QCOMPARE(r.spec().keep_bf16, std::vector<std::string>{"fc2"});
        for (SpecDialog* d : std::initializer_list<SpecDialog*>{&t, &r}) {
            QVERIFY(!d->loadBf16Set(fp16));
            QVERIFY2(d->errorText().contains(fp16) && d->errorText().contains(QStringLiteral("keep_fp32")),
                     qPrintable(d->errorText()));
            QVERIFY(d->loadRegions(fp16));
        }
        QCOMPARE(t.spec().keep_bf16, std::vector<std::string>{"fc2"});  // kept
        QCOMPARE(t.spec().keep_fp32, std::vector<std::string>{"fc1"});
        QCOMPARE(r.spec().keep_fp32, std::vector<std::string>{"fc1"});
    }

    /// Layers tab, an FP8 pass selected: the keep button keeps the selected module in BF16 (left
    /// out of FP8), not in FP32, and starts the same run again; for the FP32 reference it is off.
    void keepButtonKeepsAnFp8PassModuleInBf16() {
        MainWindow w(std::make_unique<Recorder>(&messages_));
        const LayersTab t = openLayers(w, uuid_);
        QVERIFY(t.passBox);
        auto* keep = w.findChild<QPushButton*>(QStringLiteral("keepModule"));
        QVERIFY(keep);
        t.passBox->setCurrentText(QStringLiteral("fp32"));
        QVERIFY(!keep->isEnabled());
        t.passBox->setCurrentText(QStringLiteral("mxfp8"));
        QVERIFY(keep->isEnabled());
        QVERIFY2(keep->text().contains(QStringLiteral("BF16")), qPrintable(keep->text()));
        auto* table = w.tabs()->widget(MainWindow::kLayersTab)->findChild<QTableView*>();
        QVERIFY(table);
        int row = -1;
        for (int r = 0; r < table->model()->rowCount() && row < 0; ++r)
            if (table->model()->index(r, 0).data(LayerModel::ModuleRole).toString() == QStringLiteral("fc1")) row = r;
        QVERIFY2(row >= 0, "an op of fc1 in the mxfp8 pass's layers");
        table->setCurrentIndex(table->model()->index(row, 0));
        QSignalSpy done(w.controller(), &RunController::finished);
        keep->click();
        QVERIFY(done.wait(60000));
        const auto run = storage::Store(db_.toStdString(), storage::Store::Mode::ReadOnly)
                             .load_run(done.at(0).at(0).toString().toStdString());
        QCOMPARE(run.spec.keep_bf16, std::vector<std::string>{"fc1"});
        QVERIFY(run.spec.keep_fp32.empty());
        QCOMPARE(run.spec.precisions,
                 (std::vector<Precision>{Precision::Fp8, Precision::Mxfp8, Precision::Fp8Delayed}));
        for (const auto& p : run.passes)
            for (const auto& o : p.fp8_operands) QVERIFY2(o.module != "fc1", "fc1 still quantized");
        // back on the recorded run: its other FP8 pass offers BF16 as well
        w.showRun(QString::fromStdString(uuid_));
        w.tabs()->setCurrentIndex(MainWindow::kLayersTab);
        t.passBox->setCurrentText(QStringLiteral("fp8"));
        QVERIFY(keep->text().contains(QStringLiteral("BF16")));
        QVERIFY2(messages_.isEmpty(), qPrintable(messages_.join(QLatin1Char('\n'))));
    }

    /// The training and replay dialogs offer torchao's float8 training recipes beside fp16 and
    /// bf16, and hand the chosen one to the spec (and back).
    void trainingAndReplayDialogsOfferTheFp8Recipes() {
        TrainingDialog t;
        auto* box = t.findChild<QComboBox*>(QStringLiteral("trainingPrecision"));
        QVERIFY(box);
        QStringList offered;
        for (int i = 0; i < box->count(); ++i) offered << box->itemText(i);
        QCOMPARE(offered, (QStringList{QStringLiteral("fp16"), QStringLiteral("bf16"), QStringLiteral("fp8"),
                                       QStringLiteral("fp8-rowwise"), QStringLiteral("mxfp8"), QStringLiteral("nvfp4"),
                                       QStringLiteral("fp8-delayed")}));
        auto* history = t.findChild<QSpinBox*>(QStringLiteral("fp8AmaxHistory"));
        auto* margin = t.findChild<QSpinBox*>(QStringLiteral("fp8Margin"));
        QVERIFY(history && margin);
        for (const Precision p : {Precision::Fp8Delayed, Precision::Nvfp4, Precision::Mxfp8, Precision::Fp8Rowwise,
                                  Precision::Fp8, Precision::Bf16, Precision::Fp16}) {
            TrainSpec ts;
            ts.precision = p;
            ts.fp8_amax_history = 16;  // fp8-delayed's settings: kept for it, the defaults for the others
            ts.fp8_margin = 2;
            ts.fp8_weight_cache = true;
            ts.keep_bf16 = {"fc2"};  // an FP8 recipe's modules left in BF16: kept for the recipes only
            t.setSpec(ts);
            QCOMPARE(t.spec().precision, p);
            QCOMPARE(t.spec().keep_bf16, is_fp8(p) ? ts.keep_bf16 : std::vector<std::string>{});
            QCOMPARE(t.findChild<QLineEdit*>(QStringLiteral("trainingKeepBf16"))->isEnabled(), is_fp8(p));
            QCOMPARE(t.findChild<QComboBox*>(QStringLiteral("trainingMxScaling"))->isEnabled(), p == Precision::Mxfp8);
            ts.mx_scaling = MxScaling::Floor;  // mxfp8's setting: kept for it, the default (rceil) for the others
            t.setSpec(ts);
            QCOMPARE(t.spec().mx_scaling, p == Precision::Mxfp8 ? MxScaling::Floor : MxScaling::Rceil);
            const bool delayed = p == Precision::Fp8Delayed;
            QCOMPARE(history->isEnabled(), delayed);
            QCOMPARE(margin->isEnabled(), delayed);
            QCOMPARE(t.spec().fp8_amax_history, delayed ? 16 : TrainSpec{}.fp8_amax_history);
            QCOMPARE(t.spec().fp8_margin, delayed ? 2 : TrainSpec{}.fp8_margin);
            QCOMPARE(t.findChild<QCheckBox*>(QStringLiteral("trainingFp8WeightCache"))->isEnabled(), delayed);
            QCOMPARE(t.spec().fp8_weight_cache, delayed);  // TE's is_first_microbatch caching: fp8-delayed's
            const bool products = is_fp8(p) && p != Precision::Nvfp4;  // train --fp8-all-gemms
            ts.fp8_all_gemms = true;
            t.setSpec(ts);
            auto* allGemms = t.findChild<QCheckBox*>(QStringLiteral("trainingFp8AllGemms"));
            QVERIFY(allGemms);
            QCOMPARE(allGemms->isEnabled(), products);
            QCOMPARE(t.spec().fp8_all_gemms, products);
            ts.fp8_all_gemms = false;
            t.setSpec(ts);
            QVERIFY(!t.spec().fp8_all_gemms);
            ts.rowwise_gw_hp = true;  // torchao's rowwise_with_gw_hp: fp8-rowwise's only
            t.setSpec(ts);
            auto* gwHp = t.findChild<QCheckBox*>(QStringLiteral("trainingRowwiseGwHp"));
            QVERIFY(gwHp);
            QCOMPARE(gwHp->isEnabled(), p == Precision::Fp8Rowwise);
            QCOMPARE(t.spec().rowwise_gw_hp, p == Precision::Fp8Rowwise);
            ts.rowwise_gw_hp = false;
        }
        // the replay dialog: a job trained with a float8 recipe is replayed in it
        ReplayDialog r;
        auto* rbox = r.findChild<QComboBox*>(QStringLiteral("replayPrecision"));
        QVERIFY(rbox);
        QStringList replayed;
        for (int i = 0; i < rbox->count(); ++i) replayed << rbox->itemText(i);
        offered.removeLast();  // a Transformer Engine job's delayed-scaling state is not replayed,
        offered.removeLast();  // nor torchao's NVFP4 linears' sign vectors and seeds
        QCOMPARE(replayed, offered);
        for (const Precision p :
             {Precision::Mxfp8, Precision::Fp8Rowwise, Precision::Fp8, Precision::Bf16, Precision::Fp16}) {
            ReplaySpec rs;
            rs.model = "demo:mlp";
            rs.checkpoint = rs.batch = db_.toStdString();  // the dialog checks that they exist
            rs.precision = p;
            rs.keep_bf16 = {"fc1"};
            r.setSpec(rs);
            QCOMPARE(r.spec().precision, p);
            QCOMPARE(r.spec().keep_bf16, is_fp8(p) ? rs.keep_bf16 : std::vector<std::string>{});
            rs.mx_scaling = MxScaling::Floor;
            r.setSpec(rs);
            QCOMPARE(r.spec().mx_scaling, p == Precision::Mxfp8 ? MxScaling::Floor : MxScaling::Rceil);
            rs.fp8_all_gemms = true;  // replay --fp8-all-gemms: the FP8 recipes' only
            r.setSpec(rs);
            auto* replayAll = r.findChild<QCheckBox*>(QStringLiteral("replayFp8AllGemms"));
            QVERIFY(replayAll);
            QCOMPARE(replayAll->isEnabled(), is_fp8(p));
            QCOMPARE(r.spec().fp8_all_gemms, is_fp8(p));
            rs.rowwise_gw_hp = true;
            r.setSpec(rs);
            auto* replayGwHp = r.findChild<QCheckBox*>(QStringLiteral("replayRowwiseGwHp"));
            QVERIFY(replayGwHp);
            QCOMPARE(r.spec().rowwise_gw_hp, p == Precision::Fp8Rowwise);
            rs.rowwise_gw_hp = false;
        }
    }

    void newRunDialogStartsFp8PassesWithAModuleKeptInBf16() {
        NewRunDialog d;
        RunSpec in;
        in.model = "demo:mlp";
        in.precisions = {Precision::Bf16, Precision::Fp8Delayed, Precision::Nvfp4};
        in.keep_bf16 = {"fc2"};
        in.fp8_amax_history = 3;
        in.fp8_margin = 1;
        d.setSpec(in);
        RunSpec s = d.spec();
        QCOMPARE(s.precisions, in.precisions);  // FP16/BF16, then the recipes in the dialog's order
        QCOMPARE(s.keep_bf16, in.keep_bf16);
        QCOMPARE(s.fp8_amax_history, 3);
        QCOMPARE(s.fp8_margin, 1);
        QVERIFY(!s.fp8_what_if);
        auto* whatIf = d.findChild<QCheckBox*>(QStringLiteral("fp8WhatIf"));
        QVERIFY(whatIf);
        whatIf->setChecked(true);
        QVERIFY(d.spec().fp8_what_if);
        in.fp8_what_if = true;
        d.setSpec(in);
        QVERIFY(d.spec().fp8_what_if);
        in.fp8_what_if = false;
        auto* allGemms = d.findChild<QCheckBox*>(QStringLiteral("fp8AllGemms"));
        QVERIFY(allGemms);
        QVERIFY(!d.spec().fp8_all_gemms);
        allGemms->setChecked(true);
        QVERIFY(d.spec().fp8_all_gemms);
        d.setSpec(in);
        QVERIFY(!d.spec().fp8_all_gemms);  // the spec's, not the box's last state
        in.fp8_all_gemms = true;           // the run below quantizes every product (demo:mlp has linears only)
        auto* mx = d.findChild<QCheckBox*>(QStringLiteral("precision_mxfp8"));
        QVERIFY(mx);
        mx->setChecked(true);
        QVERIFY(d.spec().has_pass(Precision::Mxfp8));
        QCOMPARE(d.spec().mx_scaling, MxScaling::Floor);  // the probe passes' default, the OCP MX specification's
        in.mx_scaling = MxScaling::Rceil;                 // a run recorded with torchao's training scales keeps them
        d.setSpec(in);
        QCOMPARE(d.spec().mx_scaling, MxScaling::Rceil);
        in.mx_scaling = MxScaling::Floor;
        in.precisions = {Precision::Fp8};
        in.fp8_real_gemm = RealGemm::On;  // the CPU's torch._scaled_mm, beside the simulated pass
        d.setSpec(in);
        s = d.spec();
        QCOMPARE(s.fp8_real_gemm, RealGemm::On);
        auto* realGemm = d.findChild<QComboBox*>(QStringLiteral("fp8RealGemm"));
        QVERIFY(realGemm);
        QCOMPARE(realGemm->currentText(), QStringLiteral("on"));
        s.device = "cpu";
        s.batch_size = 8;
        RunController c;
        QSignalSpy finished(&c, &RunController::finished);
        QVERIFY(c.start(s, db_));
        QVERIFY(finished.wait(60000));
        const auto run = storage::Store(db_.toStdString(), storage::Store::Mode::ReadOnly)
                             .load_run(finished.at(0).at(0).toString().toStdString());
        QCOMPARE(run.spec.keep_bf16, std::vector<std::string>{"fc2"});
        QVERIFY(run.spec.fp8_all_gemms);
        QCOMPARE(run.passes.size(), size_t(2));
        std::vector<std::string> quantized;
        for (const auto& o : run.passes[1].fp8_operands) quantized.push_back(o.module);
        QCOMPARE(quantized, (std::vector<std::string>{"fc1", "fc1", "out", "out"}));  // fc2 stays in BF16
        QVERIFY(run.passes[1].real_gemm && run.passes[1].real_gemm->ran);
        MainWindow w(std::make_unique<Recorder>(&messages_));
        QVERIFY(w.openDatabase(db_));
        w.showRun(QString::fromStdString(run.run_id));
        QWidget* tab = w.tabs()->widget(MainWindow::kOverviewTab);
        auto* text =
            qobject_cast<QTextBrowser*>(tab) ? qobject_cast<QTextBrowser*>(tab) : tab->findChild<QTextBrowser*>();
        QVERIFY(text);
        QVERIFY2(
            text->toPlainText().contains(QRegularExpression(QStringLiteral("Kept in BF16 \\(FP8 passes\\)\\s+fc2"))),
            qPrintable(text->toPlainText()));
        QVERIFY2(text->toPlainText().contains(QRegularExpression(QStringLiteral("FP8 GEMMs\\s+every matrix product"))),
                 qPrintable(text->toPlainText()));
        QVERIFY2(text->toPlainText().contains(QStringLiteral("This pass is simulated")) &&
                     text->toPlainText().contains(QStringLiteral("Real FP8 GEMMs (aten::_scaled_mm on cpu")),
                 qPrintable(text->toPlainText()));
    }
};

QTEST_MAIN(TstFp8)
#include "tst_fp8.moc"
