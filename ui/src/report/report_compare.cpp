// SPDX-License-Identifier: MIT
// The Compare view's text: two comparison runs side by side.
#include <QStringList>

#include "report.h"
#include "uitext.h"

namespace ampscope::ui {

namespace {

enum Row { VerdictRow, MaxDelta, Flips, NonFinite, Origin, Regions, NUM_ROWS };

/// What row `what` says of `r`'s comparison in precision `p` ("—" when it has none).
QString cell(const RunResult& r, Precision p, int what) {
    for (size_t i = 0; i < r.comparisons.size(); ++i) {
        const auto& c = r.comparisons[i];
        if (c.precision != p) continue;
        if (i + 1 >= r.passes.size()) break;  // a file edited by hand: no pass for this comparison
        const auto& pass = r.passes[i + 1];
        switch (what) {
            case VerdictRow: return htmlText(to_string(c.verdict));
            case MaxDelta: return QString::number(c.max_abs_delta, 'g', 3);
            case Flips: return QString::number(c.flips.size());
            case NonFinite: return QString::number(pass.nonfinite_samples.size());
            case Origin:
                return pass.origin ? htmlText(pass.origin->module + " " + pass.origin->op) : QStringLiteral("-");
            case Regions: {
                QStringList k;
                for (const auto& g : pass.keep_fp32) k << htmlText(g);
                if (is_fp8(pass.precision))  // an FP8 pass's modules left out of FP8
                    for (const auto& g : r.spec.keep_bf16) k << htmlText(g) + QStringLiteral(" (bf16)");
                return k.isEmpty() ? QStringLiteral("-") : k.join(QStringLiteral(", "));
            }
        }
    }
    return QStringLiteral("—");
}

QString row(const QString& name, const QString& a, const QString& b) {
    return QStringLiteral("<tr><td>%1</td><td>%2</td><td>%3</td></tr>").arg(name, a, b);
}

}  // namespace

QString compareHtml(const RunResult& ra, const RunResult& rb) {
    const QString a = htmlText(ra.run_id.substr(0, 8)), b = htmlText(rb.run_id.substr(0, 8));
    QString h = QStringLiteral("<h2>Compare A = %1 and B = %2</h2>").arg(a, b);
    const bool same_inputs = ra.model.weights_sha256 == rb.model.weights_sha256 && ra.probes.sha256 == rb.probes.sha256;
    h +=
        same_inputs
            ? QStringLiteral("<p>Same model weights and probe set: the differences come from the precision policy.</p>")
            : QStringLiteral("<p style='color:#c82828'>Different model weights or probe sets: compare with care.</p>");
    h += QStringLiteral("<table border=1 cellspacing=0 cellpadding=4><tr><th></th><th>A %1</th><th>B %2</th></tr>")
             .arg(a, b);
    h += row(QStringLiteral("model"), htmlText(ra.model.source), htmlText(rb.model.source));
    h += row(QStringLiteral("verdict"), htmlText(to_string(ra.verdict)), htmlText(to_string(rb.verdict)));
    static const char* rows[] = {"verdict",         "max |delta|", "flips", "non-finite samples",
                                 "NaN/Inf born at", "FP32 regions"};
    for (auto p : {Precision::Fp16, Precision::Bf16})
        for (int w = 0; w < NUM_ROWS; ++w)
            h += row(QString::fromStdString(to_string(p)) + QLatin1Char(' ') + QString::fromLatin1(rows[w]),
                     cell(ra, p, w), cell(rb, p, w));
    return h + QStringLiteral("</table>");
}

}  // namespace ampscope::ui
