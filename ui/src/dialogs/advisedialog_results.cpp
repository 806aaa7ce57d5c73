// SPDX-License-Identifier: MIT
// AdviseDialog: the result shown (sensitivity, set, reasons, shares, outcome) and what the
// user does with it (apply and re-run, save the set, copy the Python snippet).
#include <QApplication>
#include <QClipboard>
#include <QFile>
#include <QFileDialog>
#include <QLabel>
#include <QPushButton>
#include <QTabWidget>
#include <QTableWidget>

#include "advisedialog.h"
#include "advisemodel.h"
#include "ampscope/engine/text.h"
#include "ampscope/storage/json_io.h"
#include "errorreporter.h"
#include "uitext.h"

namespace ampscope::ui {

void AdviseDialog::showResult(const AdviseResult& r, bool complete) {
    result_ = r;
    complete_ = complete;
    sensitivity_->resetData(r.sensitivity);
    showSet(r);
    showOutcome();
    QStringList said;
    for (const auto& w : r.warnings) said << QStringLiteral("Warning: ") + storedText(w);
    warnings_->setText(said.join(QLatin1Char('\n')));
    warnings_->setVisible(!said.isEmpty());
    if (complete && r.outcome == AdviseResult::Outcome::Found) tabs_->setCurrentIndex(kSetTab);
    updateButtons();
}

void AdviseDialog::showOutcome() {
    if (!result_) return;
    const AdviseResult& r = *result_;
    if (!complete_) {
        outcome_->setStyleSheet(QString());
        outcome_->setText(
            r.sensitivity.empty()
                ? QStringLiteral("Cancelled before any module's sensitivity was measured.")
                : QStringLiteral(
                      "Cancelled: the sensitivity of %1 module(s) measured so far is shown; no set was proposed.")
                      .arg(r.sensitivity.size()));
        return;
    }
    const bool fixable =
        r.outcome == AdviseResult::Outcome::Found || r.outcome == AdviseResult::Outcome::AlreadyAccepted;
    QString prefix;
    if (r.outcome == AdviseResult::Outcome::Unverified)
        prefix = QStringLiteral("Unverified: ");
    else if (!fixable)
        prefix = QStringLiteral("No FP32 set can fix this run. ");
    QString suffix;
    if (r.outcome == AdviseResult::Outcome::Found && verifiedVerdict_.isEmpty())
        suffix = QStringLiteral(
            " Not verified yet: Apply and re-run records the verifying run; the set can be saved or copied as a "
            "Python snippet once that run accepts it.");
    outcome_->setText(prefix + plainText(r.message) + suffix);
    outcome_->setStyleSheet(fixable ? QString() : QStringLiteral("QLabel { color: #c82828; }"));
}

void AdviseDialog::showSet(const AdviseResult& r) {
    reasons_->setRowCount(0);
    for (const auto& x : r.reasons) {
        const int row = reasons_->rowCount();
        reasons_->insertRow(row);
        reasons_->setItem(row, 0, new QTableWidgetItem(plainText(x.module)));
        reasons_->setItem(row, 1, new QTableWidgetItem(plainText(x.why)));
        reasons_->setItem(row, 2, new QTableWidgetItem(plainText(x.detail)));
    }
    reasons_->resizeColumnsToContents();
    QString text;
    const QString kept = r.kept_in == Precision::Bf16 ? QStringLiteral("BF16") : QStringLiteral("FP32");
    if (!r.keep_fp32.empty())
        text = QStringLiteral("Keep %1 module(s) in %5: %2.\nLeft in %5: %3% of the ops, %4% of the FLOPs.\n")
                   .arg(r.keep_fp32.size())
                   .arg(QString::fromStdString([&] {
                       std::string s;
                       for (const auto& m : r.keep_fp32) s += (s.empty() ? "" : ", ") + m;
                       return s;
                   }()))
                   .arg(100 * r.fp32_share_ops, 0, 'f', 1)
                   .arg(100 * r.fp32_share_flops, 0, 'f', 1)
                   .arg(kept);
    else
        text = QStringLiteral("No set proposed.\n");
    text += QStringLiteral("Search: %1 candidate set(s) checked by real passes, %2 forward passes in all.")
                .arg(r.evaluations)
                .arg(r.passes_used);
    summary_->setText(text);
    if (verifiedVerdict_.isEmpty()) verified_->hide();
}

bool AdviseDialog::verified() const {
    return complete_ && result_ && result_->outcome == AdviseResult::Outcome::Found && !result_->keep_fp32.empty() &&
           verifiedVerdict_ == QStringLiteral("accepted");
}

void AdviseDialog::updateButtons() {
    const bool found =
        complete_ && result_ && result_->outcome == AdviseResult::Outcome::Found && !result_->keep_fp32.empty();
    apply_->setEnabled(found && !running());
    save_->setEnabled(verified());  // advice only once a verifying run accepted the set
    copy_->setEnabled(verified());
}

RunSpec AdviseDialog::verifySpec() const {
    RunSpec spec = adviseSpec().run;
    // an FP8 recipe's set is left out of FP8, in BF16; an fp16/bf16 pass's runs in FP32
    if (!result_) return spec;
    auto& globs = result_->kept_in == Precision::Bf16 ? spec.keep_bf16 : spec.keep_fp32;
    globs.clear();
    for (const auto& m : result_->keep_fp32) globs.push_back(exact_glob(m));  // module paths, each matched alone
    return spec;
}

void AdviseDialog::applyAndRerun() {
    if (!result_ || result_->keep_fp32.empty()) return;
    verified_->setText(QStringLiteral("Verifying run started: this run's spec and criteria with the set in %1.")
                           .arg(result_->kept_in == Precision::Bf16 ? QStringLiteral("BF16") : QStringLiteral("FP32")));
    verified_->show();
    Q_EMIT applyRequested(verifySpec());
}

void AdviseDialog::setVerified(const QString& uuid, const QString& verdict) {
    const bool accepted = verdict == QStringLiteral("accepted");
    verifiedRun_ = uuid;
    verifiedVerdict_ = verdict;
    if (result_ && !accepted)
        apply_verification(
            *result_, verdict == QStringLiteral("invalid_reference") ? Verdict::InvalidReference : Verdict::Rejected);
    showOutcome();
    verified_->setText(
        QStringLiteral("%1 run %2: %3")
            .arg(accepted ? QStringLiteral("Verified by") : QStringLiteral("Verifying"), uuid.left(8), verdict));
    verified_->setStyleSheet(accepted ? QStringLiteral("QLabel { color: #1e8c3c; }")
                                      : QStringLiteral("QLabel { color: #c82828; }"));
    verified_->show();
    updateButtons();
}

QString AdviseDialog::saveSet(const QString& path) const {
    if (!result_ || result_->keep_fp32.empty()) return QStringLiteral("no set has been found yet");
    if (result_->outcome == AdviseResult::Outcome::Unverified)
        return QStringLiteral("the set is unverified: its verifying run was %1, so it is not advice")
            .arg(verifiedVerdict_);
    if (!verified())
        return QStringLiteral(
            "the set has not been verified yet: Apply and re-run, and save it once that run accepts it");
    json::AdviseRecord record;
    record.advised_from = run_.run_id;
    record.granularity = to_string(adviseSpec().granularity);
    record.verified_run = verifiedRun_.toStdString();
    record.verified_verdict = verifiedVerdict_.toStdString();
    const std::string json = json::advise_to_json(*result_, record);
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        return QStringLiteral("cannot write %1: %2").arg(path, f.errorString());
    if (f.write(json.data(), qint64(json.size())) != qint64(json.size()) || !f.flush())
        return QStringLiteral("cannot write %1: %2").arg(path, f.errorString());
    return {};
}

void AdviseDialog::saveSetInteractively() {
    const auto path =
        QFileDialog::getSaveFileName(this, QStringLiteral("Save FP32 set"), QStringLiteral("fp32-regions.json"),
                                     QStringLiteral("JSON (*.json);;All files (*)"));
    if (path.isEmpty()) return;
    const auto err = saveSet(path);
    if (!err.isEmpty() && reporter_) reporter_->error(this, QStringLiteral("Cannot save the set"), err);
}

void AdviseDialog::copyPythonSnippet() {
    if (!verified()) return;
    const auto& precisions = run_.spec.precisions;
    QApplication::clipboard()->setText(plainText(python_snippet(
        result_->keep_fp32, precisions.empty() ? Precision::Fp16 : precisions.front(), run_.spec.fp8_all_gemms)));
}

}  // namespace ampscope::ui
