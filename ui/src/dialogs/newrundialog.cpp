// SPDX-License-Identifier: MIT
#include "newrundialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMimeData>
#include <QPushButton>
#include <QSpinBox>
#include <QUrl>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/vocabulary.h"
#include "ampscope/storage/input_file.h"

namespace ampscope::ui {

NewRunDialog::NewRunDialog(QWidget* parent) : SpecDialogFor(parent) {
    setWindowTitle(QStringLiteral("New comparison run"));
    setAcceptDrops(true);
    auto* form = buildInputs();
    finish(form, buildCriteria());
}

QFormLayout* NewRunDialog::buildInputs() {
    auto* form = new QFormLayout;
    model_ = modelField();
    form->addRow(QStringLiteral("Model"), withBrowse(model_, QStringLiteral("Model file"),
                                                     QStringLiteral("Models (*.pt *.pth *.pt2);;All files (*)"),
                                                     [this](const QString& f) { model_->setCurrentText(f); }));
    probes_ = new QLineEdit(QStringLiteral("demo"));
    form->addRow(QStringLiteral("Probes"), withBrowse(probes_, QStringLiteral("Probe set"),
                                                      QStringLiteral("Probe sets (*.pt *.csv);;All files (*)"),
                                                      [this](const QString& f) { probes_->setText(f); }));
    fp16_ = new QCheckBox(QStringLiteral("FP16"));
    bf16_ = new QCheckBox(QStringLiteral("BF16"));
    fp16_->setChecked(true);
    bf16_->setChecked(true);
    auto* precs = new QHBoxLayout;
    precs->addWidget(fp16_);
    precs->addWidget(bf16_);
    precs->addStretch();
    form->addRow(QStringLiteral("AMP passes (FP32 reference always runs)"), precs);
    buildFp8(form);
    device_ = deviceField();
    form->addRow(QStringLiteral("Device"), device_);
    mode_ = new QComboBox;
    mode_->addItems({QStringLiteral("eval"), QStringLiteral("train")});
    form->addRow(QStringLiteral("Mode"), mode_);
    keep_fp32_ = regionsField(QStringLiteral("embed, blocks.1.*"));
    form->addRow(QStringLiteral("Keep in FP32"), withLoad(keep_fp32_, storage::RegionsList::KeepFp32));
    seed_ = integer(0, 1 << 30, 0);
    form->addRow(QStringLiteral("Seed"), seed_);
    batch_ = integer(1, 1 << 20, 64);
    form->addRow(QStringLiteral("Batch size"), batch_);
    return form;
}

namespace {
const Precision kFp8Recipes[] = {Precision::Fp8, Precision::Fp8Delayed, Precision::Fp8Rowwise, Precision::Mxfp8,
                                 Precision::Nvfp4};
}  // namespace

void NewRunDialog::buildFp8(QFormLayout* form) {
    auto* recipes = new QHBoxLayout;
    for (Precision p : kFp8Recipes) {
        const auto name = QString::fromStdString(to_string(p));
        auto* b = new QCheckBox(name);
        b->setObjectName(QStringLiteral("precision_") + name);
        fp8_[p] = b;
        recipes->addWidget(b);
    }
    recipes->addStretch();
    form->addRow(QStringLiteral("FP8 passes (simulated, as torchao / Transformer Engine)"), recipes);
    what_if_ = new QCheckBox(QStringLiteral("FP8 what-if in the BF16 pass"));
    what_if_->setObjectName(QStringLiteral("fp8WhatIf"));
    what_if_->setToolTip(QStringLiteral(
        "The BF16 pass also counts what fp8, fp8-rowwise, mxfp8 and nvfp4 would do to its linear layers' operands "
        "(its outputs unchanged)"));
    form->addRow(QString(), what_if_);
    all_gemms_ = new QCheckBox(QStringLiteral("Quantize every matrix product, not only linear layers"));
    all_gemms_->setObjectName(QStringLiteral("fp8AllGemms"));
    all_gemms_->setToolTip(QStringLiteral(
        "FP8 passes and the what-if also quantize the model's own addmm, mm, bmm and baddbmm (transformers' Conv1D, "
        "attention's products), each operand as the recipe quantizes a linear layer's, and in fp8 and fp8-delayed "
        "its convolutions (one scale per tensor). Off: linear layers only, as torchao and Transformer Engine do"));
    form->addRow(QString(), all_gemms_);
    real_gemm_ = choiceField(real_gemm_names());
    real_gemm_->setObjectName(QStringLiteral("fp8RealGemm"));
    real_gemm_->setToolTip(QStringLiteral(
        "fp8 / fp8-rowwise passes run again with real FP8 GEMMs (torch._scaled_mm), beside the simulated ones: "
        "auto on a CUDA GPU with compute capability >= 8.9; on wherever PyTorch has the kernel (the CPU's takes "
        "tensorwise scales only); off"));
    form->addRow(QStringLiteral("Real FP8 GEMMs"), real_gemm_);
    mx_scaling_ = choiceField(mx_scaling_names());
    mx_scaling_->setObjectName(QStringLiteral("mxScaling"));
    mx_scaling_->setToolTip(
        QStringLiteral("mxfp8 passes and the FP8 what-if: each MX block's E8M0 scale, floor as "
                       "the OCP MX specification, rceil as torchao's MXFP8 training recipes"));
    form->addRow(QStringLiteral("MX block scales"), mx_scaling_);
    keep_bf16_ = regionsField(QStringLiteral("fc1, blocks.0.*"));
    keep_bf16_->setObjectName(QStringLiteral("keepBf16"));
    keep_bf16_->setToolTip(QStringLiteral("FP8 passes: modules whose linear layers stay in BF16, not quantized"));
    form->addRow(QStringLiteral("Keep in BF16 (FP8 passes)"), withLoad(keep_bf16_, storage::RegionsList::KeepBf16));
    form->addRow(QStringLiteral("fp8-delayed"), delayedSettings(amax_history_, margin_, QStringLiteral("Batches")));
}

QGroupBox* NewRunDialog::buildCriteria() {
    criteria_ = new QGroupBox(QStringLiteral("Criteria (fixed before the first pass)"));
    auto* cf = new QFormLayout(criteria_);
    atol_ = number(0, 1e6, 1e-3, 6);
    rtol_ = number(0, 1e6, 1e-2, 6);
    tie_tol_ = number(0, 1e6, 0, 6);
    quality_ = number(0, 1e9, 0, 4);
    max_flips_ = integer(0, 1 << 30, 0);
    tie_rule_ = new QComboBox;
    tie_rule_->addItems({QStringLiteral("lowest-index"), QStringLiteral("abstain")});
    allow_nonfinite_ = new QCheckBox(QStringLiteral("allow non-finite outputs"));
    cf->addRow(QStringLiteral("atol"), atol_);
    cf->addRow(QStringLiteral("rtol"), rtol_);
    cf->addRow(QStringLiteral("Tie tolerance"), tie_tol_);
    cf->addRow(QStringLiteral("Tie rule"), tie_rule_);
    cf->addRow(QStringLiteral("Allowed flips"), max_flips_);
    cf->addRow(QStringLiteral("Quality threshold (accuracy ≥)"), quality_);
    cf->addRow(QString(), allow_nonfinite_);
    cf->addRow(QStringLiteral("Per position (language models)"), buildSequenceCriteria());
    cf->addRow(QStringLiteral("Sequence output"), buildSequenceLayout());
    return criteria_;
}

QHBoxLayout* NewRunDialog::buildSequenceCriteria() {
    const Criteria defaults;
    max_flip_rate_ = number(0, 1, defaults.max_flip_rate, 6);
    max_flip_rate_->setObjectName(QStringLiteral("maxFlipRate"));
    max_flip_rate_->setToolTip(QStringLiteral("Largest fraction of compared positions whose top-1 token may change"));
    max_mean_kld_ = number(0, 1e6, defaults.max_mean_kld, 6);
    max_mean_kld_->setObjectName(QStringLiteral("maxMeanKld"));
    max_mean_kld_->setToolTip(
        QStringLiteral("Largest mean KL(ref ‖ amp) of the softmax over the vocabulary, per position"));
    min_same_top_ = number(0, 1, defaults.min_same_top, 4);
    min_same_top_->setObjectName(QStringLiteral("minSameTop"));
    min_same_top_->setToolTip(QStringLiteral("Smallest fraction of compared positions with the same top-1 token"));
    auto* row = new QHBoxLayout;
    for (auto [label, box] : {std::pair{QStringLiteral("flip rate ≤"), max_flip_rate_},
                              std::pair{QStringLiteral("mean KL ≤"), max_mean_kld_},
                              std::pair{QStringLiteral("same top-1 ≥"), min_same_top_}}) {
        row->addWidget(new QLabel(label));
        row->addWidget(box);
    }
    return row;
}

QHBoxLayout* NewRunDialog::buildSequenceLayout() {
    mask_input_ = new QLineEdit;
    mask_input_->setObjectName(QStringLiteral("maskInput"));
    mask_input_->setPlaceholderText(QStringLiteral("attention_mask when the model has one"));
    mask_input_->setToolTip(QStringLiteral("The input whose nonzero entries mark the positions compared"));
    sequence_axis_ = integer(0, 2, 0);
    sequence_axis_->setObjectName(QStringLiteral("sequenceAxis"));
    sequence_axis_->setSpecialValueText(QStringLiteral("auto"));  // 0: not set (an output [N, T, V]: axis 1)
    sequence_axis_->setToolTip(QStringLiteral("The output axis holding positions when the layout is not [N, T, V]"));
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(QStringLiteral("mask input")));
    row->addWidget(mask_input_, 1);
    row->addWidget(new QLabel(QStringLiteral("positions on axis")));
    row->addWidget(sequence_axis_);
    return row;
}

void NewRunDialog::setSpec(const RunSpec& s) {
    model_->setCurrentText(QString::fromStdString(s.model));
    probes_->setText(QString::fromStdString(s.probes));
    fp16_->setChecked(std::find(s.precisions.begin(), s.precisions.end(), Precision::Fp16) != s.precisions.end());
    bf16_->setChecked(std::find(s.precisions.begin(), s.precisions.end(), Precision::Bf16) != s.precisions.end());
    for (auto& [p, box] : fp8_) box->setChecked(s.has_pass(p));
    setRegions(keep_bf16_, s.keep_bf16);
    amax_history_->setValue(s.fp8_amax_history);
    margin_->setValue(s.fp8_margin);
    what_if_->setChecked(s.fp8_what_if);
    all_gemms_->setChecked(s.fp8_all_gemms);
    setChoice(real_gemm_, to_string(s.fp8_real_gemm));
    setChoice(mx_scaling_, to_string(s.mx_scaling));
    const int d = device_->findText(QString::fromStdString(s.device.empty() ? "cpu" : s.device));
    if (d >= 0) device_->setCurrentIndex(d);
    mode_->setCurrentIndex(s.mode == Mode::Train ? 1 : 0);
    setRegions(keep_fp32_, s.keep_fp32);
    seed_->setValue(int(s.seed));
    batch_->setValue(s.batch_size);
    atol_->setValue(s.criteria.atol);
    rtol_->setValue(s.criteria.rtol);
    tie_tol_->setValue(s.criteria.tie_tolerance);
    tie_rule_->setCurrentIndex(s.criteria.tie_rule == TieRule::Abstain ? 1 : 0);
    max_flips_->setValue(s.criteria.max_flips);
    quality_->setValue(s.criteria.quality_threshold);
    allow_nonfinite_->setChecked(s.criteria.allow_nonfinite);
    max_flip_rate_->setValue(s.criteria.max_flip_rate);
    max_mean_kld_->setValue(s.criteria.max_mean_kld);
    min_same_top_->setValue(s.criteria.min_same_top);
    mask_input_->setText(QString::fromStdString(s.criteria.mask_input));
    sequence_axis_->setValue(std::max(0, s.criteria.sequence_axis));
}

RunSpec NewRunDialog::spec() const {
    RunSpec s;
    s.model = model_->currentText().trimmed().toStdString();
    s.probes = probes_->text().trimmed().toStdString();
    s.precisions.clear();
    if (fp16_->isChecked()) s.precisions.push_back(Precision::Fp16);
    if (bf16_->isChecked()) s.precisions.push_back(Precision::Bf16);
    for (Precision p : kFp8Recipes)
        if (fp8_.at(p)->isChecked()) s.precisions.push_back(p);
    if (s.precisions.empty()) throw InputError("AMP passes", "", "choose FP16, BF16 and/or an FP8 recipe");
    if (s.model.empty()) throw InputError("Model", "", "choose a demo model or a TorchScript file");
    s.device = device_->currentText().toStdString();
    s.mode = mode_->currentIndex() == 1 ? Mode::Train : Mode::Eval;
    s.keep_fp32 = regions(keep_fp32_);
    s.keep_bf16 = regions(keep_bf16_);
    s.fp8_amax_history = amax_history_->value();
    s.fp8_margin = margin_->value();
    s.fp8_what_if = what_if_->isChecked();
    s.fp8_all_gemms = all_gemms_->isChecked();
    s.fp8_real_gemm = parse_real_gemm(choice(real_gemm_), "Real FP8 GEMMs");
    s.mx_scaling = parse_mx_scaling(choice(mx_scaling_), "MX block scales");
    s.seed = uint64_t(seed_->value());
    s.batch_size = batch_->value();
    s.criteria.atol = atol_->value();
    s.criteria.rtol = rtol_->value();
    s.criteria.tie_tolerance = tie_tol_->value();
    s.criteria.tie_rule = tie_rule_->currentIndex() == 1 ? TieRule::Abstain : TieRule::LowestIndex;
    s.criteria.max_flips = max_flips_->value();
    s.criteria.quality_threshold = quality_->value();
    s.criteria.quality_threshold_set = quality_->value() > 0;
    s.criteria.allow_nonfinite = allow_nonfinite_->isChecked();
    s.criteria.max_flip_rate = max_flip_rate_->value();
    s.criteria.max_mean_kld = max_mean_kld_->value();
    s.criteria.min_same_top = min_same_top_->value();
    s.criteria.mask_input = mask_input_->text().trimmed().toStdString();
    s.criteria.sequence_axis = sequence_axis_->value() == 0 ? -1 : sequence_axis_->value();
    return s;
}

void NewRunDialog::lockCriteria() {
    criteria_->setEnabled(false);
    criteria_->setTitle(QStringLiteral("Criteria (locked: fixed before the first pass)"));
}

bool NewRunDialog::criteriaLocked() const {
    return !criteria_->isEnabled();
}

void NewRunDialog::dragEnterEvent(QDragEnterEvent* e) {
    if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void NewRunDialog::dropEvent(QDropEvent* e) {
    for (const auto& url : e->mimeData()->urls()) {
        const auto f = url.toLocalFile();
        if (f.endsWith(QStringLiteral(".csv")) || f.contains(QStringLiteral("probe")))
            probes_->setText(f);
        else
            model_->setCurrentText(f);
    }
}

}  // namespace ampscope::ui
