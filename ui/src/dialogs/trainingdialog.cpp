// SPDX-License-Identifier: MIT
#include "trainingdialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QSpinBox>

#include <algorithm>
#include <cmath>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"
#include "ampscope/engine/vocabulary.h"

namespace ampscope::ui {

namespace {
/// The LR schedule item that advances per iteration, not per effective update.
constexpr int kPerIteration = Qt::UserRole + 1;

/// Whether recipe `p` trains the model's own products in FP8 (train --fp8-all-gemms; not nvfp4).
bool quantizesProducts(Precision p) {
    return is_fp8(p) && p != Precision::Nvfp4;
}
}  // namespace

TrainingDialog::TrainingDialog(QWidget* parent) : SpecDialogFor(parent) {
    setWindowTitle(QStringLiteral("New training run (FP32 reference and AMP side by side)"));
    auto* form = new QFormLayout;
    model_ = modelField();
    form->addRow(QStringLiteral("Model"), withBrowse(model_, QStringLiteral("Model file"),
                                                     QStringLiteral("Models (*.pt *.pth *.pt2);;All files (*)"),
                                                     [this](const QString& f) { model_->setCurrentText(f); }));
    data_ = new QLineEdit(QStringLiteral("demo"));
    data_->setToolTip(
        QStringLiteral("\"demo\", or a .pt/.csv file with inputs and labels or targets (file order, no shuffling)"));
    form->addRow(QStringLiteral("Data"),
                 withBrowse(data_, QStringLiteral("Training data"), QStringLiteral("Data (*.pt *.csv);;All files (*)"),
                            [this](const QString& f) { data_->setText(f); }));
    addSchedule(form);
    addPrecisionPolicy(form);
    device_ = deviceField();
    form->addRow(QStringLiteral("Device"), device_);
    seed_ = integer(0, 1 << 30, 0);
    form->addRow(QStringLiteral("Seed"), seed_);
    checkpoint_every_ = integer(0, 1000000, 0);
    checkpoint_every_->setToolTip(QStringLiteral("0: no checkpoints"));
    form->addRow(QStringLiteral("Checkpoint every N iterations"), checkpoint_every_);
    checkpoint_dir_ = new QLineEdit(QStringLiteral("."));
    form->addRow(QStringLiteral("Checkpoint folder"), checkpoint_dir_);
    guards_ = new QCheckBox(QStringLiteral("Per-step guards (finiteness, origins, underflow; intrusive)"));
    guards_->setChecked(true);
    form->addRow(QString(), guards_);
    finish(form);
}

void TrainingDialog::addSchedule(QFormLayout* form) {
    steps_ = integer(1, 1000000, 50);
    form->addRow(QStringLiteral("Iterations"), steps_);
    batch_ = integer(1, 1 << 20, 16);
    form->addRow(QStringLiteral("Batch size"), batch_);
    accumulate_ = integer(1, 1024, 1);
    form->addRow(QStringLiteral("Micro-batches per step (accumulation)"), accumulate_);
    loss_ = choiceField(loss_kind_names(), QStringLiteral("auto (ce with labels, mse with targets)"));
    form->addRow(QStringLiteral("Loss"), loss_);
    optimizer_ = choiceField(optimizer_kind_names());
    form->addRow(QStringLiteral("Optimizer"), optimizer_);
    lr_ = number(0, 100, 0.05, 6);
    form->addRow(QStringLiteral("Learning rate"), lr_);
    momentum_ = number(0, 1, 0, 4);
    form->addRow(QStringLiteral("Momentum (SGD)"), momentum_);
    weight_decay_ = number(0, 10, 0, 6);
    form->addRow(QStringLiteral("Weight decay"), weight_decay_);
    // Data: the schedule's name; one that changes the rate twice, over effective updates and
    // over iterations (kPerIteration true).
    schedule_ = new QComboBox;
    for (const auto& name : lr_schedule_names()) {
        const QString n = QString::fromStdString(name);
        if (parse_lr_schedule(name) == LrSchedule::Constant) {
            schedule_->addItem(n, n);
            continue;
        }
        schedule_->addItem(n + QStringLiteral(" (over effective updates)"), n);
        schedule_->addItem(n + QStringLiteral(" (over iterations)"), n);
        schedule_->setItemData(schedule_->count() - 1, true, kPerIteration);
    }
    form->addRow(QStringLiteral("LR schedule"), schedule_);
}

void TrainingDialog::addPrecisionPolicy(QFormLayout* form) {
    precision_ = new QComboBox;
    precision_->setObjectName(QStringLiteral("trainingPrecision"));
    for (const Precision p : kTrainingPrecisions) precision_->addItem(QString::fromStdString(to_string(p)));
    precision_->setToolTip(
        QStringLiteral("fp8 / fp8-rowwise / mxfp8: torchao's float8 training recipes and its MXFP8 training linear, "
                       "simulated: every linear layer's GEMMs in FP8 (E5M2 / E4M3 gradients; mxfp8: E4M3 in blocks of "
                       "32 with power-of-two scales), the rest in BF16 autocast; nvfp4: NVIDIA's NVFP4 training "
                       "recipe (E2M1, 16 x 16 weight tiles, gradients rounded stochastically, a random Hadamard "
                       "transform in the weight-gradient GEMM); fp8-delayed: "
                       "Transformer Engine's delayed scaling, each scale from the amax history of the steps before"));
    form->addRow(QStringLiteral("AMP precision"), precision_);
    auto* delayed = delayedSettings(amax_history_, margin_, QStringLiteral("Micro-batches"));
    weight_cache_ = new QCheckBox(QStringLiteral("weights cast once a step"));
    weight_cache_->setObjectName(QStringLiteral("trainingFp8WeightCache"));
    weight_cache_->setToolTip(
        QStringLiteral("With accumulation: a step's later micro-batches reuse the FP8 weights its first one cast, as "
                       "Transformer Engine does given is_first_microbatch (Megatron-LM passes it)"));
    delayed->insertWidget(delayed->count() - 1, weight_cache_);
    form->addRow(QStringLiteral("fp8-delayed"), delayed);
    keep_bf16_ = regionsField(QStringLiteral("lm_head, blocks.11.*"));
    keep_bf16_->setObjectName(QStringLiteral("trainingKeepBf16"));
    keep_bf16_->setToolTip(QStringLiteral(
        "FP8 recipes: modules whose linear layers stay in BF16, out of FP8 (torchao's module_filter_fn)"));
    form->addRow(QStringLiteral("Keep in BF16 (FP8 recipes)"), withLoad(keep_bf16_, storage::RegionsList::KeepBf16));
    mx_scaling_ = choiceField(mx_scaling_names());
    mx_scaling_->setObjectName(QStringLiteral("trainingMxScaling"));
    mx_scaling_->setToolTip(
        QStringLiteral("mxfp8: each block's E8M0 scale; rceil as torchao's MXFP8Linear trains, "
                       "floor as the OCP MX specification"));
    form->addRow(QStringLiteral("MX block scales"), mx_scaling_);
    all_gemms_ = new QCheckBox(QStringLiteral("Quantize every matrix product"));
    all_gemms_->setObjectName(QStringLiteral("trainingFp8AllGemms"));
    all_gemms_->setToolTip(QStringLiteral(
        "fp8, fp8-rowwise, mxfp8, fp8-delayed: the model's own matrix products (Conv1D's addmm, "
        "torch.matmul, bmm) in FP8 too, forward and backward, and in fp8 / fp8-delayed its convolutions"));
    form->addRow(QString(), all_gemms_);
    gw_hp_ = new QCheckBox(QStringLiteral("Weight gradient in high precision (rowwise_with_gw_hp)"));
    gw_hp_->setObjectName(QStringLiteral("trainingRowwiseGwHp"));
    gw_hp_->setToolTip(
        QStringLiteral("fp8-rowwise as torchao's recipe rowwise_with_gw_hp: grad_input with a "
                       "tensorwise weight, the weight gradient's GEMM unquantized"));
    form->addRow(QString(), gw_hp_);
    const auto enableDelayed = [this] {
        const Precision p = kTrainingPrecisions[std::max(0, precision_->currentIndex())];
        amax_history_->setEnabled(p == Precision::Fp8Delayed);
        margin_->setEnabled(p == Precision::Fp8Delayed);
        weight_cache_->setEnabled(p == Precision::Fp8Delayed);
        keep_bf16_->setEnabled(is_fp8(p));
        mx_scaling_->setEnabled(p == Precision::Mxfp8);
        all_gemms_->setEnabled(quantizesProducts(p));
        gw_hp_->setEnabled(p == Precision::Fp8Rowwise);
    };
    connect(precision_, &QComboBox::currentIndexChanged, this, enableDelayed);
    enableDelayed();
    isolation_ = new QComboBox;
    isolation_->addItems({QStringLiteral("autocast + loss scaling"), QStringLiteral("autocast only (no scaler)"),
                          QStringLiteral("loss scaling only (FP32 compute)")});
    isolation_->setToolTip(QStringLiteral("Isolation modes tell which half of AMP causes trouble"));
    form->addRow(QStringLiteral("Isolation"), isolation_);
    init_scale_ = number(1, 1e30, 65536, 1);
    form->addRow(QStringLiteral("Initial loss scale"), init_scale_);
    growth_interval_ = integer(1, 1 << 30, 2000);
    form->addRow(QStringLiteral("Scale growth interval"), growth_interval_);
    clip_ = number(0, 1e9, 0, 4);
    clip_->setToolTip(QStringLiteral("0: off. Applied after unscaling"));
    form->addRow(QStringLiteral("Clip gradient norm"), clip_);
    keep_fp32_ = regionsField(QStringLiteral("head, blocks.1.*"));
    form->addRow(QStringLiteral("Keep in FP32"), withLoad(keep_fp32_, storage::RegionsList::KeepFp32));
}

void TrainingDialog::setSpec(const TrainSpec& s) {
    model_->setCurrentText(QString::fromStdString(s.model));
    data_->setText(QString::fromStdString(s.data));
    steps_->setValue(s.steps);
    batch_->setValue(s.batch_size);
    accumulate_->setValue(s.accumulate);
    setChoice(loss_, to_string(s.loss));
    setChoice(optimizer_, to_string(s.optimizer));
    lr_->setValue(s.lr);
    momentum_->setValue(s.momentum);
    weight_decay_->setValue(s.weight_decay);
    setChoice(schedule_, to_string(s.lr_schedule));  // the first of its items: over effective updates
    const int perIteration = schedule_->currentIndex() + 1;
    if (s.lr_per_iteration && schedule_->itemData(perIteration, kPerIteration).toBool())
        schedule_->setCurrentIndex(perIteration);
    const auto at = std::find(std::begin(kTrainingPrecisions), std::end(kTrainingPrecisions), s.precision);
    precision_->setCurrentIndex(at == std::end(kTrainingPrecisions) ? 0 : int(at - std::begin(kTrainingPrecisions)));
    amax_history_->setValue(s.fp8_amax_history);
    margin_->setValue(s.fp8_margin);
    weight_cache_->setChecked(s.fp8_weight_cache);
    isolation_->setCurrentIndex(!s.autocast ? 2 : !s.scaler.enabled ? 1 : 0);
    init_scale_->setValue(s.scaler.init_scale);
    growth_interval_->setValue(s.scaler.growth_interval);
    clip_->setValue(s.clip_grad_norm);
    setRegions(keep_fp32_, s.keep_fp32);
    setRegions(keep_bf16_, s.keep_bf16);
    setChoice(mx_scaling_, to_string(s.mx_scaling));
    all_gemms_->setChecked(s.fp8_all_gemms);
    gw_hp_->setChecked(s.rowwise_gw_hp);
    if (!s.device.empty()) device_->setCurrentText(QString::fromStdString(s.device));
    seed_->setValue(int(s.seed));
    checkpoint_every_->setValue(s.checkpoint_every);
    checkpoint_dir_->setText(QString::fromStdString(s.checkpoint_dir));
    guards_->setChecked(s.guards);
}

TrainSpec TrainingDialog::spec() const {
    TrainSpec s;
    s.model = model_->currentText().trimmed().toStdString();
    if (s.model.empty()) throw InputError("Model", "", "empty; expected demo:NAME or a TorchScript file");
    s.data = data_->text().trimmed().toStdString();
    if (s.data.empty()) throw InputError("Data", "", "empty; expected \"demo\" or a .pt/.csv file");
    s.steps = steps_->value();
    s.batch_size = batch_->value();
    s.accumulate = accumulate_->value();
    s.loss = parse_loss_kind(choice(loss_));
    s.optimizer = parse_optimizer_kind(choice(optimizer_));
    s.lr = lr_->value();
    if (!(s.lr > 0)) throw InputError("Learning rate", "", "expected a number > 0");
    s.momentum = momentum_->value();
    s.weight_decay = weight_decay_->value();
    s.lr_schedule = parse_lr_schedule(choice(schedule_));
    s.lr_per_iteration = schedule_->currentData(kPerIteration).toBool();
    s.precision = kTrainingPrecisions[std::max(0, precision_->currentIndex())];
    if (s.precision == Precision::Fp8Delayed) {
        s.fp8_amax_history = amax_history_->value();
        s.fp8_margin = margin_->value();
        s.fp8_weight_cache = weight_cache_->isChecked() && isolation_->currentIndex() != 2;  // FP32 compute: none
    }
    s.autocast = isolation_->currentIndex() != 2;
    s.scaler.enabled = isolation_->currentIndex() != 1;
    s.scaler.init_scale = init_scale_->value();
    s.scaler.growth_interval = growth_interval_->value();
    s.clip_grad_norm = clip_->value();
    s.keep_fp32 = regions(keep_fp32_);
    if (is_fp8(s.precision) && s.autocast) s.keep_bf16 = regions(keep_bf16_);  // no autocast: no recipe runs
    if (s.precision == Precision::Mxfp8) s.mx_scaling = parse_mx_scaling(choice(mx_scaling_));
    s.fp8_all_gemms = quantizesProducts(s.precision) && s.autocast && all_gemms_->isChecked();
    s.rowwise_gw_hp = s.precision == Precision::Fp8Rowwise && s.autocast && gw_hp_->isChecked();
    s.device = device_->currentText().toStdString();
    s.seed = uint64_t(seed_->value());
    s.checkpoint_every = checkpoint_every_->value();
    s.checkpoint_dir = checkpoint_dir_->text().trimmed().toStdString();
    if (s.checkpoint_every > 0 && s.checkpoint_dir.empty())
        throw InputError("Checkpoint folder", "", "empty; expected a folder");
    s.guards = guards_->isChecked();
    return s;
}

}  // namespace ampscope::ui
