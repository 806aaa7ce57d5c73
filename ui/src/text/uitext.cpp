// SPDX-License-Identifier: MIT
#include "uitext.h"

#include <cmath>

#include "ampscope/engine/text.h"

namespace ampscope::ui {

QString plainText(const std::string& s) {
    return QString::fromStdString(s);
}

QString storedText(const std::string& s) {
    return QString::fromStdString(visible_controls(s));
}

QString htmlText(const std::string& s, bool keep_newline) {
    QString h = QString::fromStdString(visible_controls(s, keep_newline)).toHtmlEscaped();
    if (keep_newline) h.replace(QLatin1Char('\n'), QStringLiteral("<br>"));
    return h;
}

QString numberOrDash(double v, int digits) {
    return std::isfinite(v) ? QString::number(v, 'g', digits) : QStringLiteral("-");
}

QString figure(double v, int digits) {
    return QString::number(v, 'g', digits);
}

}  // namespace ampscope::ui
