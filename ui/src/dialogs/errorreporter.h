// SPDX-License-Identifier: MIT
#pragma once
// How the main window tells the user about an error or asks a yes/no question. The product
// uses message boxes; tests install one that records (and answers) without a dialog.

#include <QString>

class QWidget;

namespace ampscope::ui {

class ErrorReporter {
public:
    virtual ~ErrorReporter() = default;
    virtual void error(QWidget* parent, const QString& title, const QString& message) = 0;
    /// A yes/no question; true for yes.
    virtual bool confirm(QWidget* parent, const QString& title, const QString& question) = 0;
};

/// Message boxes (the product's reporter).
class MessageBoxReporter : public ErrorReporter {
public:
    void error(QWidget* parent, const QString& title, const QString& message) override;
    bool confirm(QWidget* parent, const QString& title, const QString& question) override;
};

}  // namespace ampscope::ui
