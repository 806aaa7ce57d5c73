// SPDX-License-Identifier: MIT
#include "specdialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QEvent>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include <algorithm>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/run.h"

namespace ampscope::ui {

namespace {

/// Keeps a Load… button enabled as its field is (a field disabled for the chosen precision).
class FollowEnabled : public QObject {
public:
    FollowEnabled(QWidget* field, QWidget* button) : QObject(button), button_(button) {
        field->installEventFilter(this);
        button->setEnabled(field->isEnabled());
    }
    bool eventFilter(QObject* watched, QEvent* e) override {
        if (e->type() == QEvent::EnabledChange) button_->setEnabled(static_cast<QWidget*>(watched)->isEnabled());
        return false;
    }

private:
    QWidget* button_;
};

}  // namespace

SpecDialog::SpecDialog(QWidget* parent) : QDialog(parent) {}

void SpecDialog::finish(QLayout* fields, QWidget* below) {
    error_ = new QLabel;
    error_->setObjectName(QStringLiteral("specError"));
    error_->setWordWrap(true);
    error_->setStyleSheet(QStringLiteral("QLabel { color: #c82828; }"));
    error_->hide();
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Cancel);
    buttons->addButton(QStringLiteral("Start"), QDialogButtonBox::AcceptRole)->setDefault(true);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* v = new QVBoxLayout(this);
    v->addLayout(fields);
    if (below) v->addWidget(below);
    v->addWidget(error_);
    v->addWidget(buttons);
}

void SpecDialog::accept() {
    try {
        validate();
    } catch (const InputError& e) {
        error_->setText(QString::fromStdString(e.what()));
        error_->show();
        return;
    }
    error_->hide();
    QDialog::accept();
}

void SpecDialog::showError(const QString& message) {
    error_->setText(message);
    error_->setVisible(!message.isEmpty());
}

QString SpecDialog::errorText() const {
    return error_ && !error_->isHidden() ? error_->text() : QString();
}

QHBoxLayout* SpecDialog::withBrowse(QWidget* field, const QString& title, const QString& filter,
                                    std::function<void(const QString&)> set) {
    auto* row = new QHBoxLayout;
    auto* b = new QPushButton(QStringLiteral("Browse…"));
    connect(b, &QPushButton::clicked, this, [this, title, filter, set = std::move(set)] {
        const auto f = QFileDialog::getOpenFileName(this, title, {}, filter);
        if (!f.isEmpty()) set(f);
    });
    row->addWidget(field, 1);
    row->addWidget(b);
    return row;
}

QComboBox* SpecDialog::modelField() {
    auto* m = new QComboBox;
    m->setEditable(true);
    for (const auto& name : demo_models()) m->addItem(QStringLiteral("demo:") + QString::fromStdString(name));
    m->setToolTip(QStringLiteral("A built-in demo model or a model file (TorchScript, torch.export)"));
    return m;
}

QComboBox* SpecDialog::deviceField() {
    auto* d = new QComboBox;
    d->addItem(QStringLiteral("cpu"));
    const auto b = backend_report("cpu");
    for (int i = 0; i < b.cuda_device_count; ++i) d->addItem(QStringLiteral("cuda:%1").arg(i));
    return d;
}

QComboBox* SpecDialog::choiceField(const std::vector<std::string>& names, const QString& none) {
    auto* c = new QComboBox;
    if (!none.isEmpty()) c->addItem(none, QString());
    for (const auto& n : names) c->addItem(QString::fromStdString(n), QString::fromStdString(n));
    return c;
}

void SpecDialog::setChoice(QComboBox* field, const std::string& name) {
    field->setCurrentIndex(std::max(0, field->findData(QString::fromStdString(name))));
}

std::string SpecDialog::choice(const QComboBox* field) {
    return field->currentData().toString().toStdString();
}

QLineEdit* SpecDialog::regionsField(const QString& example) {
    auto* e = new QLineEdit;
    e->setPlaceholderText(QStringLiteral("module globs, comma-separated, e.g. ") + example);
    return e;
}

std::vector<std::string> SpecDialog::regions(const QLineEdit* field) {
    std::vector<std::string> out;
    for (const auto& g : field->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
        if (!g.trimmed().isEmpty()) out.push_back(g.trimmed().toStdString());
    return out;
}

void SpecDialog::setRegions(QLineEdit* field, const std::vector<std::string>& globs) {
    QStringList k;
    for (const auto& g : globs) k << QString::fromStdString(g);
    field->setText(k.join(QStringLiteral(", ")));
}

std::vector<std::string> SpecDialog::readRegionsFile(const QString& path, storage::RegionsList list) {
    return storage::read_regions_file(
        path.toStdString(), list == storage::RegionsList::KeepBf16 ? "Keep in BF16 file" : "Keep in FP32 file",
        /*allow_unverified=*/false, list);
}

QHBoxLayout* SpecDialog::withLoad(QLineEdit* field, storage::RegionsList list) {
    const bool bf16 = list == storage::RegionsList::KeepBf16;
    auto* row = new QHBoxLayout;
    auto* b = new QPushButton(bf16 ? QStringLiteral("Load BF16 set…") : QStringLiteral("Load FP32 regions…"));
    b->setObjectName(bf16 ? QStringLiteral("loadBf16Set") : QStringLiteral("loadRegions"));
    b->setToolTip(
        bf16 ? QStringLiteral("From the JSON that Advise… wrote for an FP8 recipe (its keep_bf16 set) or "
                              "ampscope-cli advise --precision fp8 --json, or a file with one module glob a line")
             : QStringLiteral("From the JSON that Advise FP32 regions… (Save set…) or ampscope-cli advise "
                              "--json wrote, or a file with one module glob a line"));
    connect(b, &QPushButton::clicked, this, [this, field, list, bf16] {
        const auto f = QFileDialog::getOpenFileName(
            this, bf16 ? QStringLiteral("Load the BF16 set") : QStringLiteral("Load FP32 regions"), {},
            QStringLiteral("Advice JSON or glob list (*.json *.txt);;All files (*)"));
        if (!f.isEmpty()) loadInto(field, f, list);
    });
    new FollowEnabled(field, b);
    row->addWidget(field, 1);
    row->addWidget(b);
    return row;
}

bool SpecDialog::loadRegions(const QString& path) {
    return keep_fp32_ && loadInto(keep_fp32_, path, storage::RegionsList::KeepFp32);
}

bool SpecDialog::loadBf16Set(const QString& path) {
    return keep_bf16_ && loadInto(keep_bf16_, path, storage::RegionsList::KeepBf16);
}

bool SpecDialog::loadInto(QLineEdit* field, const QString& path, storage::RegionsList list) {
    try {
        setRegions(field, readRegionsFile(path, list));
    } catch (const InputError& e) {
        showError(QString::fromStdString(e.what()));
        return false;
    }
    showError(QString());
    return true;
}

QDoubleSpinBox* SpecDialog::number(double lo, double hi, double value, int decimals) {
    auto* b = new QDoubleSpinBox;
    b->setDecimals(decimals);
    b->setRange(lo, hi);
    b->setValue(value);
    return b;
}

QSpinBox* SpecDialog::integer(int lo, int hi, int value) {
    auto* b = new QSpinBox;
    b->setRange(lo, hi);
    b->setValue(value);
    return b;
}

QHBoxLayout* SpecDialog::delayedSettings(QSpinBox*& history, QSpinBox*& margin, const QString& unit) {
    history = integer(1, kMaxAmaxHistory, RunSpec{}.fp8_amax_history);
    history->setObjectName(QStringLiteral("fp8AmaxHistory"));
    history->setToolTip(QStringLiteral("%1 of amax history each scale comes from (amax_history_len)").arg(unit));
    margin = integer(0, kMaxFp8Margin, RunSpec{}.fp8_margin);
    margin->setObjectName(QStringLiteral("fp8Margin"));
    margin->setToolTip(QStringLiteral("scale = 448 / max(history) / 2^margin"));
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(QStringLiteral("amax history")));
    row->addWidget(history);
    row->addWidget(new QLabel(QStringLiteral("margin")));
    row->addWidget(margin);
    row->addStretch();
    return row;
}

}  // namespace ampscope::ui
