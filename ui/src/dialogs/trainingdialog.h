// SPDX-License-Identifier: MIT
#pragma once
// The new-training-run dialog: model, data, schedule, optimizer, precision policy and
// isolation mode (both halves / autocast only / scaler only), scaler parameters, FP32
// regions, checkpoints. What `ampscope-cli train` takes, as a form.

#include "ampscope/engine/train.h"
#include "specdialog.h"

class QCheckBox;
class QFormLayout;

namespace ampscope::ui {

class TrainingDialog : public SpecDialogFor<TrainSpec> {
    Q_OBJECT
public:
    explicit TrainingDialog(QWidget* parent = nullptr);
    void setSpec(const TrainSpec& s) override;
    TrainSpec spec() const override;

private:
    void addSchedule(QFormLayout* form);
    void addPrecisionPolicy(QFormLayout* form);
    QComboBox *model_, *loss_, *optimizer_, *precision_, *mx_scaling_, *isolation_, *schedule_, *device_;
    QLineEdit *data_, *checkpoint_dir_;
    QSpinBox *steps_, *batch_, *accumulate_, *growth_interval_, *checkpoint_every_, *seed_;
    QSpinBox *amax_history_, *margin_;  ///< fp8-delayed's settings
    QDoubleSpinBox *lr_, *momentum_, *weight_decay_, *init_scale_, *clip_;
    QCheckBox* guards_;
    QCheckBox* weight_cache_;  ///< fp8-delayed: TrainSpec::fp8_weight_cache
    QCheckBox* all_gemms_;     ///< fp8, fp8-rowwise, mxfp8, fp8-delayed: TrainSpec::fp8_all_gemms
    QCheckBox* gw_hp_;         ///< fp8-rowwise: TrainSpec::rowwise_gw_hp
};

}  // namespace ampscope::ui
