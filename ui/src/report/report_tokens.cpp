// SPDX-License-Identifier: MIT
// The overview's part of a sequence run (a language model compared per position): the
// per-token figures of each AMP precision and the per-position criteria.
#include <QTextStream>

#include <cmath>

#include "report.h"

namespace ampscope::ui {

namespace {
/// A figure; NaN and infinities as such ("nan", "inf", "-inf"): an incident's perplexity is one.
QString num(double v) {
    return QString::number(v, 'g', 4);
}
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
    return QStringLiteral("<br>per position: flip rate ≤ %1, mean KL(ref ‖ amp) ≤ %2, same top-1 ≥ %3; mask input %4; sequence axis %5")
        .arg(num(c.max_flip_rate), num(c.max_mean_kld), num(c.min_same_top),
             c.mask_input.empty() ? QStringLiteral("(none)") : htmlText(c.mask_input),
             c.sequence_axis < 0 ? QStringLiteral("1") : QString::number(c.sequence_axis));
}

void tokensHtml(QTextStream& o, const Comparison& c) {
    if (!c.tokens) return;
    const TokenStats& t = *c.tokens;
    o << "<p><b>Per token</b> (llama.cpp's <code>perplexity --kl-divergence</code> definitions) over " << t.positions
      << " positions compared, " << t.masked << " excluded by the mask; sequence length " << t.length << ", vocabulary " << t.vocab
      << "</p><table border=1 cellspacing=0 cellpadding=3>";
    row(o, QStringLiteral("KL(ref ‖ amp) mean / p99 / max"),
        num(t.mean_kld) + QStringLiteral(" / ") + num(t.p99_kld) + QStringLiteral(" / ") + num(t.max_kld));
    row(o, QStringLiteral("same top-1"), percent(t.same_top));
    row(o, QStringLiteral("top-5 overlap"), percent(t.top5_overlap));
    row(o, QStringLiteral("RMS Δp (reference's top token)"), percent(t.rms_dp));
    const double rate = t.positions ? double(c.flips.size()) / double(t.positions) : 0;
    row(o, QStringLiteral("flips"), QString::number(c.flips.size()) + QStringLiteral(" (") + percent(rate) + QStringLiteral(")"));
    if (t.label_tokens > 0)
        row(o, QStringLiteral("perplexity reference / AMP"),
            num(t.ref_ppl) + QStringLiteral(" / ") + num(t.amp_ppl) + QStringLiteral(" (") + QString::number(t.label_tokens) +
                QStringLiteral(" labels; cross-entropy ") + num(t.ref_ce) + QStringLiteral(" / ") + num(t.amp_ce) +
                QStringLiteral(" nats)"));
    if (!t.boundary.empty()) {
        QString b;
        for (size_t i = 0; i < std::min(kBoundaryShown, t.boundary.size()); ++i)
            b += QStringLiteral("%1@%2 (%3) ")
                     .arg(htmlText(t.boundary[i].sample))
                     .arg(t.boundary[i].position)
                     .arg(num(t.boundary[i].ref_margin));
        if (t.boundary.size() > kBoundaryShown) b += QStringLiteral("…");
        row(o, QStringLiteral("boundary positions (sample@position, reference top-2 margin)"), b);
    }
    o << "</table>";
}

}  // namespace ampscope::ui
