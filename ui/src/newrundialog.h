// SPDX-License-Identifier: MIT
#pragma once
// The new-run dialog: model, probes, precisions, device, mode, criteria, FP32 regions.
// Criteria are set here, before Start, and shown locked once the run started.

#include <QDialog>

#include "ampscope/engine/run.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLineEdit;
class QSpinBox;
class QGroupBox;

namespace ampscope::ui {

class NewRunDialog : public QDialog {
    Q_OBJECT
public:
    explicit NewRunDialog(QWidget* parent = nullptr);
    /// Prefills from an existing spec (e.g. "keep in FP32 and re-run").
    void setSpec(const RunSpec& spec);
    /// The spec as entered; throws InputError for malformed fields.
    RunSpec spec() const;
    /// After Start: criteria widgets become read-only.
    void lockCriteria();
    bool criteriaLocked() const;

protected:
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;

private:
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
