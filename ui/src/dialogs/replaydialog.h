// SPDX-License-Identifier: MIT
#pragma once
// File → Replay incident…: the user's model, the checkpoint their training code wrote before
// the failing step (a file, or a Hugging Face Trainer checkpoint-N/ folder), the failing batch,
// the loss, the job's AMP precision, optional optimizer and GradScaler state files, a key
// prefix to strip, steps, non-strict key matching, device. What `ampscope-cli replay` takes, as
// a form; a field that cannot work (empty, a file that is not there) keeps the dialog open with
// the field and the file named.

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
    /// The losses offered (the first: the engine's default, ce with labels, mse with targets).
    static QStringList losses();

private:
    void addFiles(QFormLayout* form);
    /// `field` with File… and Folder… buttons (a checkpoint is either).
    QHBoxLayout* withFileOrFolder(QLineEdit* field);
    QComboBox *model_, *loss_, *precision_, *device_;
    QLineEdit *checkpoint_, *batch_, *optimizer_, *scaler_, *prefix_, *keep_fp32_;
    QSpinBox* steps_;
    QCheckBox* non_strict_;
};

}  // namespace ampscope::ui
