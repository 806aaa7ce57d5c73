// SPDX-License-Identifier: MIT
// ReplayView: the remedies as specs, and a replay's outcome and a remedy's change in words.
#include <algorithm>

#include "ampscope/engine/text.h"
#include "ampscope/engine/vocabulary.h"
#include "replaymodel.h"
#include "replayview.h"
#include "uitext.h"

namespace ampscope::ui {

namespace {

QString precisionName(Precision p) {
    return storedText(to_string(p)).toUpper();
}

/// A stage in words (unscale: by its name).
QString stageName(ReplayStageKind stage) {
    switch (stage) {
        case ReplayStageKind::Checkpoint: return QStringLiteral("in the checkpoint's weights");
        case ReplayStageKind::Input: return QStringLiteral("in the batch's inputs");
        case ReplayStageKind::Forward: return QStringLiteral("in the forward pass");
        case ReplayStageKind::Loss: return QStringLiteral("in the loss");
        case ReplayStageKind::Backward: return QStringLiteral("in the backward pass");
        case ReplayStageKind::Optimizer: return QStringLiteral("in the optimizer update");
        case ReplayStageKind::Unscale: break;
    }
    return QStringLiteral("at stage ") + storedText(to_string(stage));
}

/// A side in words.
QString sideName(ReplaySide side) {
    switch (side) {
        case ReplaySide::Amp: return QStringLiteral("the AMP side");
        case ReplaySide::Reference: return QStringLiteral("the FP32 reference");
        case ReplaySide::Both: return QStringLiteral("both sides");
    }
    return storedText(to_string(side));
}

}  // namespace

ReplaySpec ReplayView::remedySpec(const ReplayResult& original, Remedy remedy, double value,
                                  const std::vector<std::string>& set) {
    ReplaySpec s = original.spec;
    s.original_run_id = original.run_id;
    auto keep = [&s](const std::string& m) {  // a glob
        if (!m.empty() && std::find(s.keep_fp32.begin(), s.keep_fp32.end(), m) == s.keep_fp32.end())
            s.keep_fp32.push_back(m);
    };
    switch (remedy) {
        case Remedy::KeepModule:
            // the module path, matched alone (a ModuleDict key may hold glob characters)
            if (original.first_nonfinite && !original.first_nonfinite->module.empty())
                keep(exact_glob(original.first_nonfinite->module));
            break;
        case Remedy::Bf16: s.precision = Precision::Bf16; break;
        case Remedy::InitScale: s.init_scale = value; break;
        case Remedy::GrowthInterval: s.growth_interval = int(value); break;
        case Remedy::Clip: s.clip_grad_norm = value; break;
        case Remedy::AdvisorSet:
            for (const auto& m : set) keep(m);
            break;
        case Remedy::Count: break;
    }
    return s;
}

QString ReplayView::changeText(const ReplayResult& original, const ReplaySpec& r) {
    const ReplaySpec& o = original.spec;
    QStringList parts;
    if (r.precision != o.precision)
        parts << precisionName(o.precision) + QStringLiteral(" → ") + precisionName(r.precision);
    QStringList kept;
    for (const auto& m : r.keep_fp32)
        if (std::find(o.keep_fp32.begin(), o.keep_fp32.end(), m) == o.keep_fp32.end()) kept << storedText(m);
    if (!kept.isEmpty()) parts << kept.join(QStringLiteral(", ")) + QStringLiteral(" kept in FP32");
    if (r.init_scale && r.init_scale != o.init_scale) {
        const QString from = o.init_scale             ? replayNumber(*o.init_scale, 7)
                             : original.steps.empty() ? QStringLiteral("the checkpoint's")
                                                      : replayNumber(original.steps.front().scale, 7);
        parts << QStringLiteral("initial scale %1 → %2").arg(from, replayNumber(*r.init_scale, 7));
    }
    if (r.growth_interval && r.growth_interval != o.growth_interval)
        parts << QStringLiteral("growth interval → %1").arg(*r.growth_interval);
    if (r.clip_grad_norm != o.clip_grad_norm)
        parts << (r.clip_grad_norm > 0
                      ? QStringLiteral("gradient norm clipped at %1").arg(replayNumber(r.clip_grad_norm, 6))
                      : QStringLiteral("no gradient clipping"));
    return parts.isEmpty() ? QStringLiteral("same as the original") : parts.join(QStringLiteral("; "));
}

QString ReplayView::verdictText(const ReplayResult& r) {
    if (!r.first_nonfinite) {
        const auto n = r.steps.size();
        return QStringLiteral("no non-finite values in %1 step%2").arg(n).arg(n == 1 ? QString() : QStringLiteral("s"));
    }
    const auto& f = *r.first_nonfinite;
    QString t = storedText(to_string(f.stage)) + QStringLiteral(" at step %1").arg(f.step + 1);
    if (!f.module.empty()) t += QStringLiteral(" in ") + storedText(f.module);
    if (!f.node.empty())
        t += QStringLiteral(" (") + storedText(f.node) + QLatin1Char(')');
    else if (!f.op.empty())
        t += QStringLiteral(" (") + storedText(f.op) + QLatin1Char(')');
    return t;
}

QString ReplayView::stageInWords(const ReplayResult& r) {
    if (!r.first_nonfinite) {
        const QString v = verdictText(r);
        return v.left(1).toUpper() + v.mid(1) + QLatin1Char('.');
    }
    const auto& f = *r.first_nonfinite;
    QString t = QStringLiteral("First non-finite values %1 at step %2, on %3")
                    .arg(stageName(f.stage))
                    .arg(f.step + 1)
                    .arg(sideName(f.side));
    if (!f.module.empty()) t += QStringLiteral("; module ") + storedText(f.module);
    if (!f.op.empty()) t += QStringLiteral("; op ") + storedText(f.op);
    if (!f.node.empty()) t += QStringLiteral("; autograd node ") + storedText(f.node);
    return t + QLatin1Char('.');
}

}  // namespace ampscope::ui
