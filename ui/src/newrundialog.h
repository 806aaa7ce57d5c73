// SPDX-License-Identifier: MIT
#pragma once
// The new-run dialog: model, probes, precisions, device, mode, criteria, FP32 regions.
// Criteria are set here, before Start, and shown locked once the run started.

#include "ampscope/engine/run.h"
#include "specdialog.h"

class QCheckBox;
class QGroupBox;
class QFormLayout;

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
    QGroupBox* buildCriteria();
    QComboBox* model_;
    QLineEdit* probes_;
    QCheckBox *fp16_, *bf16_;
    QComboBox* device_;
    QComboBox* mode_;
    QGroupBox* criteria_;
    QDoubleSpinBox *atol_, *rtol_, *tie_tol_, *quality_;
    QSpinBox* max_flips_;
    QComboBox* tie_rule_;
    QCheckBox* allow_nonfinite_;
    QLineEdit* keep_fp32_;
    QSpinBox* seed_;
    QSpinBox* batch_;
};

}  // namespace ampscope::ui
