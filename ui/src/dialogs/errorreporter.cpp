// SPDX-License-Identifier: MIT
#include "errorreporter.h"

#include <QMessageBox>

namespace ampscope::ui {

void MessageBoxReporter::error(QWidget* parent, const QString& title, const QString& message) {
    QMessageBox::warning(parent, title, message);
}

bool MessageBoxReporter::confirm(QWidget* parent, const QString& title, const QString& question) {
    return QMessageBox::question(parent, title, question, QMessageBox::Yes | QMessageBox::Cancel) == QMessageBox::Yes;
}

}  // namespace ampscope::ui
