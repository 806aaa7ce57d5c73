// SPDX-License-Identifier: MIT
#pragma once
// The new-run dialog: model, probes, precisions (FP16, BF16 and the simulated FP8 recipes),
// device, mode, criteria, FP32 regions, the FP8 passes' BF16 list and fp8-delayed's settings.
// Criteria are set here, before Start, and shown locked once the run started.

#include <map>
#include <string>
#include <vector>

#include "ampscope/engine/run.h"
#include "ampscope/storage/input_file.h"
#include "specdialog.h"

class QCheckBox;
class QGroupBox;
class QFormLayout;
class QHBoxLayout;

namespace ampscope::ui {

class NewRunDialog : public SpecDialogFor<RunSpec> {
    Q_OBJECT
public:
    explicit NewRunDialog(QWidget* parent = nullptr);
    RunSpec spec() const override;
    void setSpec(const RunSpec& spec) override;  ///< e.g. "keep in FP32 and re-run"
    /// After Start: criteria widgets become read-only.
    void lockCriteria();
    bool criteriaLocked() const;

protected:
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;

private:
    QFormLayout* buildInputs();
    /// The FP8 recipes' check boxes, Keep in BF16 and fp8-delayed's amax history and margin.
    void buildFp8(QFormLayout* form);
    QGroupBox* buildCriteria();
    QComboBox* model_;
    QLineEdit* probes_;
    QCheckBox *fp16_, *bf16_;
    std::map<Precision, QCheckBox*> fp8_;  ///< one per FP8 recipe, in kFp8Recipes order
    QSpinBox *amax_history_, *margin_;
    QCheckBox* what_if_;     ///< the BF16 pass's FP8 what-if (RunSpec::fp8_what_if)
    QCheckBox* all_gemms_;   ///< RunSpec::fp8_all_gemms: the model's own products quantized too
    QComboBox* real_gemm_;   ///< RunSpec::fp8_real_gemm: auto, on, off
    QComboBox* mx_scaling_;  ///< RunSpec::mx_scaling: floor, rceil
    QComboBox* device_;
    QComboBox* mode_;
    QGroupBox* criteria_;
    QDoubleSpinBox *atol_, *rtol_, *tie_tol_, *quality_;
    QSpinBox* max_flips_;
    QComboBox* tie_rule_;
    QCheckBox* allow_nonfinite_;
    /// Sequence outputs (language models): per-position criteria, the mask input, the axis.
    QDoubleSpinBox *max_flip_rate_, *max_mean_kld_, *min_same_top_;
    QLineEdit* mask_input_;
    QSpinBox* sequence_axis_;
    QHBoxLayout* buildSequenceCriteria();
    QHBoxLayout* buildSequenceLayout();
    QSpinBox* seed_;
    QSpinBox* batch_;
};

}  // namespace ampscope::ui
