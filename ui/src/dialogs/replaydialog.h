// SPDX-License-Identifier: MIT
#pragma once
// File → Replay incident…: the user's model, the checkpoint their training code wrote before
// the failing step (a file, or a Hugging Face Trainer checkpoint-N/ folder), the failing batch,
// the loss, the job's AMP precision, optional optimizer and GradScaler state files, a key
// prefix to strip, steps, non-strict key matching, device; the job's settings the checkpoint
// does not hold (optimizer kind for PyTorch <= 2.6 states, param groups file, clipping norm,
// no GradScaler). Filled from an incident bundle by File → Open incident…. What `ampscope-cli replay` takes, as
// a form; a field that cannot work (empty, a file that is not there) keeps the dialog open with
// the field and the file named.

#include <optional>

#include "ampscope/engine/replay.h"
#include "specdialog.h"

class QCheckBox;
class QFormLayout;

namespace ampscope::ui {

class ReplayDialog : public SpecDialogFor<ReplaySpec> {
    Q_OBJECT
public:
    explicit ReplayDialog(QWidget* parent = nullptr);
    void setSpec(const ReplaySpec& s) override;
    /// Throws InputError naming the field and the file when a file is missing.
    ReplaySpec spec() const override;

private:
    void addFiles(QFormLayout* form);
    /// `field` with File… and Folder… buttons (a checkpoint is either).
    QHBoxLayout* withFileOrFolder(QLineEdit* field);
    void addJobSettings(QFormLayout* form);
    QComboBox *model_, *loss_, *precision_, *mx_scaling_, *device_, *optimizerKind_;
    QLineEdit *checkpoint_, *batch_, *optimizer_, *scaler_, *prefix_, *groups_, *clip_;
    QSpinBox* steps_;
    QCheckBox *non_strict_, *noScaler_;
    QCheckBox* all_gemms_;                    ///< FP8 recipes: ReplaySpec::fp8_all_gemms
    QCheckBox* gw_hp_;                        ///< fp8-rowwise: ReplaySpec::rowwise_gw_hp
    std::optional<ReplayIncident> incident_;  ///< an incident bundle's: kept with the spec
};

}  // namespace ampscope::ui
