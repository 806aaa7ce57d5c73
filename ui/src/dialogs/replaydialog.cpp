// SPDX-License-Identifier: MIT
#include "replaydialog.h"

#include <algorithm>
#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>

#include <cmath>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/vocabulary.h"

namespace ampscope::ui {

namespace {

/// The path in `field`; InputError naming the field and the file when it is required and
/// empty, or given and not there (`folder`: a folder is accepted too).
std::string existing(const QLineEdit* field, const char* name, bool required, bool folder, const char* expected) {
    const QString path = field->text().trimmed();
    if (path.isEmpty()) {
        if (required) throw InputError(name, "", std::string("empty; expected ") + expected);
        return {};
    }
    const QFileInfo info(path);
    if (!info.exists()) throw InputError(name, "", path.toStdString() + ": no such file; expected " + expected);
    if (info.isDir() && !folder) throw InputError(name, "", path.toStdString() + ": a folder; expected " + expected);
    return path.toStdString();
}

}  // namespace

ReplayDialog::ReplayDialog(QWidget* parent) : SpecDialogFor(parent) {
    setWindowTitle(QStringLiteral("Replay incident (your checkpoint and failing batch, FP32 and AMP step by step)"));
    auto* form = new QFormLayout;
    addFiles(form);
    loss_ = choiceField(loss_kind_names(), QStringLiteral("default (ce with labels, mse with targets)"));
    loss_->setToolTip(
        QStringLiteral("ce: cross-entropy with labels; mse: with targets; lm: next-token cross-entropy of a language "
                       "model's logits; model: the model returns the loss itself"));
    form->addRow(QStringLiteral("Loss"), loss_);
    precision_ = new QComboBox;
    precision_->setObjectName(QStringLiteral("replayPrecision"));
    for (const Precision p : kReplayPrecisions) precision_->addItem(QString::fromStdString(to_string(p)));
    precision_->setToolTip(
        QStringLiteral("The autocast dtype the job trained with, or its FP8 training recipe (torchao's tensorwise "
                       "fp8, rowwise fp8-rowwise or MXFP8Linear's mxfp8, simulated)"));
    form->addRow(QStringLiteral("AMP precision"), precision_);
    keep_fp32_ = regionsField(QStringLiteral("head, blocks.1.*"));
    keep_fp32_->setToolTip(QStringLiteral("Modules the job already ran without autocast (usually none)"));
    form->addRow(QStringLiteral("Keep in FP32"), withLoad(keep_fp32_, storage::RegionsList::KeepFp32));
    keep_bf16_ = regionsField(QStringLiteral("lm_head"));
    keep_bf16_->setObjectName(QStringLiteral("replayKeepBf16"));
    keep_bf16_->setToolTip(
        QStringLiteral("FP8 recipes: modules whose linear layers the job left in BF16 (its "
                       "module_filter_fn), or a remedy: modules taken out of FP8"));
    form->addRow(QStringLiteral("Keep in BF16 (FP8 recipes)"), withLoad(keep_bf16_, storage::RegionsList::KeepBf16));
    mx_scaling_ = choiceField(mx_scaling_names());
    mx_scaling_->setObjectName(QStringLiteral("replayMxScaling"));
    mx_scaling_->setToolTip(QStringLiteral("mxfp8: the job's block scales; rceil as torchao's MXFP8Linear trains"));
    form->addRow(QStringLiteral("MX block scales"), mx_scaling_);
    all_gemms_ = new QCheckBox(QStringLiteral("Quantize every matrix product"));
    all_gemms_->setObjectName(QStringLiteral("replayFp8AllGemms"));
    all_gemms_->setToolTip(
        QStringLiteral("FP8 recipes: the model's own matrix products (Conv1D's addmm, torch.matmul, "
                       "bmm) in FP8 too, forward and backward, and in fp8 its convolutions"));
    form->addRow(QString(), all_gemms_);
    gw_hp_ = new QCheckBox(QStringLiteral("The job's weight gradient in high precision (rowwise_with_gw_hp)"));
    gw_hp_->setObjectName(QStringLiteral("replayRowwiseGwHp"));
    form->addRow(QString(), gw_hp_);
    const auto enableBf16 = [this] {
        const Precision p = kReplayPrecisions[std::max(0, precision_->currentIndex())];
        keep_bf16_->setEnabled(is_fp8(p));
        mx_scaling_->setEnabled(p == Precision::Mxfp8);
        all_gemms_->setEnabled(is_fp8(p));
        gw_hp_->setEnabled(p == Precision::Fp8Rowwise);
    };
    connect(precision_, &QComboBox::currentIndexChanged, this, enableBf16);
    enableBf16();
    prefix_ = new QLineEdit;
    prefix_->setPlaceholderText(QStringLiteral("e.g. model. (Lightning checkpoints)"));
    form->addRow(QStringLiteral("Strip key prefix"), prefix_);
    steps_ = integer(1, 100000, 1);
    steps_->setToolTip(QStringLiteral("Optimizer steps replayed on the batch"));
    form->addRow(QStringLiteral("Steps"), steps_);
    non_strict_ = new QCheckBox(
        QStringLiteral("Replay even when checkpoint keys do not match the model (they are still listed)"));
    form->addRow(QStringLiteral("Non-strict"), non_strict_);
    addJobSettings(form);
    device_ = deviceField();
    form->addRow(QStringLiteral("Device"), device_);
    finish(form);
    resize(760, sizeHint().height());
}

void ReplayDialog::addJobSettings(QFormLayout* form) {
    optimizerKind_ = choiceField(optimizer_kind_names(), QStringLiteral("as the state says"));
    optimizerKind_->setObjectName(QStringLiteral("optimizerKind"));
    optimizerKind_->setToolTip(
        QStringLiteral("An Adam/AdamW state from PyTorch <= 2.6 with weight decay cannot tell which it is: say it"));
    form->addRow(QStringLiteral("Optimizer"), optimizerKind_);
    groups_ = new QLineEdit;
    groups_->setObjectName(QStringLiteral("paramGroups"));
    groups_->setPlaceholderText(
        QStringLiteral("optional: JSON, a list per param group of its parameter names (groups saved without names)"));
    form->addRow(QStringLiteral("Param groups"),
                 withBrowse(groups_, QStringLiteral("Param groups"), QStringLiteral("JSON (*.json);;All files (*)"),
                            [this](const QString& f) { groups_->setText(f); }));
    clip_ = new QLineEdit;
    clip_->setObjectName(QStringLiteral("clipNorm"));
    clip_->setPlaceholderText(
        QStringLiteral("the job's max_grad_norm / gradient_clip_val (0: it did not clip; empty: not said)"));
    form->addRow(QStringLiteral("Clip gradient norm"), clip_);
    noScaler_ = new QCheckBox(QStringLiteral("The job ran without GradScaler (implied for BF16 without scaler state)"));
    noScaler_->setObjectName(QStringLiteral("noScaler"));
    form->addRow(QStringLiteral("No GradScaler"), noScaler_);
}

QHBoxLayout* ReplayDialog::withFileOrFolder(QLineEdit* field) {
    auto* row = new QHBoxLayout;
    auto* file = new QPushButton(QStringLiteral("File…"));
    file->setObjectName(QStringLiteral("checkpointFile"));
    auto* folder = new QPushButton(QStringLiteral("Folder…"));
    folder->setObjectName(QStringLiteral("checkpointFolder"));
    folder->setToolTip(QStringLiteral("A Hugging Face Trainer checkpoint-N/ folder"));
    connect(file, &QPushButton::clicked, this, [this, field] {
        const auto f = QFileDialog::getOpenFileName(
            this, QStringLiteral("Checkpoint file"), {},
            QStringLiteral("Checkpoints (*.pt *.pth *.ckpt *.bin *.safetensors);;All files (*)"));
        if (!f.isEmpty()) field->setText(f);
    });
    connect(folder, &QPushButton::clicked, this, [this, field] {
        const auto d =
            QFileDialog::getExistingDirectory(this, QStringLiteral("Trainer checkpoint folder (checkpoint-N)"));
        if (!d.isEmpty()) field->setText(d);
    });
    row->addWidget(field, 1);
    row->addWidget(file);
    row->addWidget(folder);
    return row;
}

void ReplayDialog::addFiles(QFormLayout* form) {
    model_ = modelField();
    model_->setToolTip(
        QStringLiteral("A torch.export program (.pt2) or TorchScript file whose state_dict keys the checkpoint holds"));
    form->addRow(QStringLiteral("Model"), withBrowse(model_, QStringLiteral("Model file"),
                                                     QStringLiteral("Models (*.pt2 *.pt *.pth);;All files (*)"),
                                                     [this](const QString& f) { model_->setCurrentText(f); }));
    checkpoint_ = new QLineEdit;
    checkpoint_->setPlaceholderText(
        QStringLiteral("a state_dict, dict, Lightning .ckpt or .safetensors file, or a checkpoint-N/ folder"));
    form->addRow(QStringLiteral("Checkpoint"), withFileOrFolder(checkpoint_));
    batch_ = new QLineEdit;
    batch_->setPlaceholderText(QStringLiteral("a .pt dict: inputs and labels or targets"));
    form->addRow(QStringLiteral("Failing batch"), withBrowse(batch_, QStringLiteral("Failing batch"),
                                                             QStringLiteral("Batches (*.pt *.pth);;All files (*)"),
                                                             [this](const QString& f) { batch_->setText(f); }));
    optimizer_ = new QLineEdit;
    optimizer_->setPlaceholderText(
        QStringLiteral("optional: optimizer.state_dict() saved apart (overrides the checkpoint's)"));
    form->addRow(QStringLiteral("Optimizer state"),
                 withBrowse(optimizer_, QStringLiteral("Optimizer state"),
                            QStringLiteral("State (*.pt *.pth *.bin);;All files (*)"),
                            [this](const QString& f) { optimizer_->setText(f); }));
    scaler_ = new QLineEdit;
    scaler_->setPlaceholderText(
        QStringLiteral("optional: GradScaler.state_dict() saved apart (overrides the checkpoint's)"));
    form->addRow(QStringLiteral("Scaler state"), withBrowse(scaler_, QStringLiteral("GradScaler state"),
                                                            QStringLiteral("State (*.pt *.pth *.bin);;All files (*)"),
                                                            [this](const QString& f) { scaler_->setText(f); }));
}

void ReplayDialog::setSpec(const ReplaySpec& s) {
    model_->setCurrentText(QString::fromStdString(s.model));
    checkpoint_->setText(QString::fromStdString(s.checkpoint));
    batch_->setText(QString::fromStdString(s.batch));
    optimizer_->setText(QString::fromStdString(s.optimizer_state));
    scaler_->setText(QString::fromStdString(s.scaler_state));
    setChoice(loss_, to_string(s.loss));
    const auto at = std::find(std::begin(kReplayPrecisions), std::end(kReplayPrecisions), s.precision);
    precision_->setCurrentIndex(at == std::end(kReplayPrecisions) ? 0 : int(at - std::begin(kReplayPrecisions)));
    setRegions(keep_fp32_, s.keep_fp32);
    setRegions(keep_bf16_, s.keep_bf16);
    setChoice(mx_scaling_, to_string(s.mx_scaling));
    all_gemms_->setChecked(s.fp8_all_gemms);
    gw_hp_->setChecked(s.rowwise_gw_hp);
    prefix_->setText(QString::fromStdString(s.strip_prefix));
    steps_->setValue(s.steps);
    non_strict_->setChecked(s.non_strict);
    if (!s.device.empty()) device_->setCurrentText(QString::fromStdString(s.device));
    setChoice(optimizerKind_, s.optimizer_kind ? to_string(*s.optimizer_kind) : std::string());
    groups_->setText(QString::fromStdString(s.param_groups));
    clip_->setText(s.clip_given || s.clip_grad_norm > 0 ? QString::number(s.clip_grad_norm, 'g', 17) : QString());
    noScaler_->setChecked(s.no_scaler);
    incident_ = s.incident;
    if (incident_)
        setWindowTitle(QStringLiteral("Replay incident bundle %1 (step %2, rank %3)")
                           .arg(QString::fromStdString(incident_->bundle))
                           .arg(incident_->step)
                           .arg(incident_->rank));
}

ReplaySpec ReplayDialog::spec() const {
    ReplaySpec s;
    s.model = model_->currentText().trimmed().toStdString();
    if (s.model.empty()) throw InputError("Model", "", "empty; expected a .pt2 program or a TorchScript file");
    if (s.model.rfind("demo:", 0) != 0 && !QFileInfo::exists(QString::fromStdString(s.model)))
        throw InputError("Model", "", s.model + ": no such file; expected a .pt2 program or a TorchScript file");
    s.checkpoint =
        existing(checkpoint_, "Checkpoint", true, true, "a checkpoint file or a Trainer checkpoint-N/ folder");
    s.batch = existing(batch_, "Failing batch", true, false, "a .pt dict with inputs and labels or targets");
    s.optimizer_state = existing(optimizer_, "Optimizer state", false, false, "a torch.save of optimizer.state_dict()");
    s.scaler_state = existing(scaler_, "Scaler state", false, false, "a torch.save of GradScaler.state_dict()");
    s.loss = parse_loss_kind(choice(loss_));
    s.precision = kReplayPrecisions[std::max(0, precision_->currentIndex())];
    s.keep_fp32 = regions(keep_fp32_);
    if (is_fp8(s.precision)) s.keep_bf16 = regions(keep_bf16_);
    if (s.precision == Precision::Mxfp8) s.mx_scaling = parse_mx_scaling(choice(mx_scaling_));
    s.fp8_all_gemms = is_fp8(s.precision) && all_gemms_->isChecked();
    s.rowwise_gw_hp = s.precision == Precision::Fp8Rowwise && gw_hp_->isChecked();
    s.strip_prefix = prefix_->text().trimmed().toStdString();
    s.steps = steps_->value();
    s.non_strict = non_strict_->isChecked();
    s.device = device_->currentText().toStdString();
    if (const std::string kind = choice(optimizerKind_); !kind.empty()) s.optimizer_kind = parse_optimizer_kind(kind);
    s.param_groups = existing(groups_, "Param groups", false, false, "a JSON list per param group of parameter names");
    const QString clip = clip_->text().trimmed();
    if (!clip.isEmpty()) {
        bool ok = false;
        s.clip_grad_norm = clip.toDouble(&ok);
        if (!ok || !(s.clip_grad_norm >= 0) || !std::isfinite(s.clip_grad_norm))
            throw InputError("Clip gradient norm", "",
                             "'" + clip.toStdString() + "'; expected a number >= 0 (0: the job did not clip)");
        s.clip_given = true;
    }
    s.no_scaler = noScaler_->isChecked();
    s.incident = incident_;
    return s;
}

}  // namespace ampscope::ui
