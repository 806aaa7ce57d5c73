// SPDX-License-Identifier: MIT
// The overview's part of a sequence run (a language model compared per position): the
// per-token figures of each AMP precision and the per-position criteria.
#include <QTextStream>

#include <cmath>

#include "report.h"
#include "uitext.h"

namespace ampscope::ui {

namespace {
QString percent(double v) {
    return std::isfinite(v) ? QString::number(100 * v, 'f', 2) + QStringLiteral(" %") : QStringLiteral("-");
}
void row(QTextStream& o, const QString& name, const QString& value) {
    o << "<tr><td>" << name << "</td><td>" << value << "</td></tr>";
}
constexpr size_t kBoundaryShown = 8;
}  // namespace

bool isSequenceRun(const RunResult& r) {
    for (const auto& c : r.comparisons)
        if (c.tokens) return true;
    return false;
}

QString sequenceCriteriaHtml(const Criteria& c) {
    return QStringLiteral(
               "<br>per position: flip rate ≤ %1, mean KL(ref ‖ amp) ≤ %2, same top-1 ≥ %3; mask input %4; sequence "
               "axis %5")
        .arg(figure(c.max_flip_rate, 4), figure(c.max_mean_kld, 4), figure(c.min_same_top, 4),
             c.mask_input.empty() ? QStringLiteral("(none)") : htmlText(c.mask_input),
             c.sequence_axis < 0 ? QStringLiteral("1") : QString::number(c.sequence_axis));
}

void tokensHtml(QTextStream& o, const Comparison& c) {
    if (!c.tokens) return;
    const TokenStats& t = *c.tokens;
    o << "<p><b>Per token</b> (llama.cpp's <code>perplexity --kl-divergence</code> definitions) over " << t.positions
      << " positions compared, " << t.masked << " excluded by the mask; sequence length " << t.length << ", vocabulary "
      << t.vocab << "</p><table border=1 cellspacing=0 cellpadding=3>";
    row(o, QStringLiteral("KL(ref ‖ amp) mean / p99 / max"),
        figure(t.mean_kld, 4) + QStringLiteral(" / ") + figure(t.p99_kld, 4) + QStringLiteral(" / ") +
            figure(t.max_kld, 4));
    row(o, QStringLiteral("same top-1"), percent(t.same_top));
    row(o, QStringLiteral("top-5 overlap"), percent(t.top5_overlap));
    row(o, QStringLiteral("RMS Δp (reference's top token)"), percent(t.rms_dp));
    const double rate = t.positions ? double(c.flips.size()) / double(t.positions) : 0;
    row(o, QStringLiteral("flips"),
        QString::number(c.flips.size()) + QStringLiteral(" (") + percent(rate) + QStringLiteral(")"));
    if (t.label_tokens > 0)
        row(o, QStringLiteral("perplexity reference / AMP"),
            figure(t.ref_ppl, 4) + QStringLiteral(" / ") + figure(t.amp_ppl, 4) + QStringLiteral(" (") +
                QString::number(t.label_tokens) + QStringLiteral(" labels; cross-entropy ") + figure(t.ref_ce, 4) +
                QStringLiteral(" / ") + figure(t.amp_ce, 4) + QStringLiteral(" nats)"));
    if (!t.boundary.empty()) {
        QString b;
        for (size_t i = 0; i < std::min(kBoundaryShown, t.boundary.size()); ++i)
            b += QStringLiteral("%1@%2 (%3) ")
                     .arg(htmlText(t.boundary[i].sample))
                     .arg(t.boundary[i].position)
                     .arg(figure(t.boundary[i].ref_margin, 4));
        if (t.boundary.size() > kBoundaryShown) b += QStringLiteral("…");
        row(o, QStringLiteral("boundary positions (sample@position, reference top-2 margin)"), b);
    }
    o << "</table>";
}

}  // namespace ampscope::ui
