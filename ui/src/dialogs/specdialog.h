// SPDX-License-Identifier: MIT
#pragma once
// What the run dialogs share: fields for a model, a device and FP32 regions, Browse… rows,
// Start/Cancel, and validation in accept(): a spec that cannot run keeps the dialog open
// with the reason shown in it.

#include <QDialog>

#include <functional>
#include <string>
#include <vector>

#include "ampscope/storage/input_file.h"

class QComboBox;
class QDoubleSpinBox;
class QHBoxLayout;
class QLabel;
class QLayout;
class QLineEdit;
class QSpinBox;

namespace ampscope::ui {

class SpecDialog : public QDialog {
    Q_OBJECT
public:
    /// Closes only when validate() accepts the fields; otherwise shows why (errorText()).
    void accept() override;
    QString errorText() const;
    /// The globs of a regions file (the CLI's --keep-fp32-file / --keep-bf16-file rules: a bounded
    /// read, an advise JSON's list or one glob a line, an unverified set refused); throws
    /// InputError(path, field, expectation).
    static std::vector<std::string> readRegionsFile(const QString& path,
                                                    storage::RegionsList list = storage::RegionsList::KeepFp32);
    /// Fills Keep in FP32 from `path`: the JSON `ampscope-cli advise` and Save set… write (its
    /// "keep_fp32" list) or one glob a line. A bad file: the dialog's error line names the file
    /// and what was expected, the field is left as it was. True when filled.
    bool loadRegions(const QString& path);
    /// Fills Keep in BF16 (FP8) from `path` alike: an FP8 recipe's advise JSON (its "keep_bf16"
    /// list; an fp16/bf16 advice refused, naming keep_fp32) or one glob a line.
    bool loadBf16Set(const QString& path);

protected:
    explicit SpecDialog(QWidget* parent);
    /// Throws InputError naming the field when the entered spec is not usable.
    virtual void validate() const = 0;
    /// Shows `message` on the error line (empty: hides it).
    void showError(const QString& message);
    /// Lays out `fields` above the error line and the Start/Cancel buttons.
    void finish(QLayout* fields, QWidget* below = nullptr);

    /// `field` with a Browse… button that sets it from a chosen file.
    QHBoxLayout* withBrowse(QWidget* field, const QString& title, const QString& filter,
                            std::function<void(const QString&)> set);
    /// Editable: the demo models, or a model file.
    static QComboBox* modelField();
    /// cpu and the CUDA devices present.
    static QComboBox* deviceField();
    /// A choice among a vocabulary's names (vocabulary.h), each item's data its name; `none`,
    /// when given, comes first with data "" (the engine's default).
    static QComboBox* choiceField(const std::vector<std::string>& names, const QString& none = {});
    /// Selects the item whose data is `name` (not there: the first); the selected item's name.
    static void setChoice(QComboBox* field, const std::string& name);
    static std::string choice(const QComboBox* field);
    /// `field` with a Load… button for `list` (Load FP32 regions… / Load BF16 set…, object names
    /// loadRegions / loadBf16Set) that fills it from a file (loadInto).
    QHBoxLayout* withLoad(QLineEdit* field, storage::RegionsList list);
    /// `field` filled from `path`'s `list` (readRegionsFile). A bad file: the error line names the
    /// file and what was expected, the field is left as it was. True when filled.
    bool loadInto(QLineEdit* field, const QString& path, storage::RegionsList list);
    static QLineEdit* regionsField(const QString& example);
    static std::vector<std::string> regions(const QLineEdit* field);
    static void setRegions(QLineEdit* field, const std::vector<std::string>& globs);
    static QDoubleSpinBox* number(double lo, double hi, double value, int decimals);
    static QSpinBox* integer(int lo, int hi, int value);
    /// fp8-delayed's settings (Transformer Engine's amax_history_len and margin) as one row:
    /// `history` and `margin` created (object names fp8AmaxHistory, fp8Margin) with the engine's
    /// defaults; `unit` says what one history entry is (batches of a run, steps of a training).
    static QHBoxLayout* delayedSettings(QSpinBox*& history, QSpinBox*& margin, const QString& unit);

    /// The dialog's Keep in FP32 and Keep in BF16 fields (each subclass creates those it has).
    QLineEdit* keep_fp32_ = nullptr;
    QLineEdit* keep_bf16_ = nullptr;

private:
    QLabel* error_ = nullptr;
};

/// A SpecDialog for one kind of spec: what it validates is the spec it would give.
template <class Spec>
class SpecDialogFor : public SpecDialog {
public:
    /// Prefills the fields from `spec`.
    virtual void setSpec(const Spec& spec) = 0;
    /// The spec as entered; throws InputError naming the field when it is not usable (accept()
    /// shows why and keeps the dialog open).
    virtual Spec spec() const = 0;

protected:
    using SpecDialog::SpecDialog;
    void validate() const override { (void)spec(); }
};

}  // namespace ampscope::ui
