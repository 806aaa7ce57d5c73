// SPDX-License-Identifier: MIT
#include "uitext.h"

#include <cmath>
#include <map>

#include "ampscope/engine/errors.h"
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

QString errorText(const std::exception& e) {
    const auto* input = dynamic_cast<const InputError*>(&e);
    if (input == nullptr || !input->file().empty() || input->field().empty()) return QString::fromStdString(e.what());
    static const std::map<std::string, const char*> labels = {{"keep_fp32", "Keep in FP32"},
                                                              {"keep_bf16", "Keep in BF16"},
                                                              {"fp8_all_gemms", "Quantize every matrix product"},
                                                              {"backoff_factor", "Backoff factor"},
                                                              {"growth_factor", "Growth factor"},
                                                              {"lr", "Learning rate"},
                                                              {"momentum", "Momentum"},
                                                              {"weight_decay", "Weight decay"},
                                                              {"precision", "Precision"},
                                                              {"device", "Device"},
                                                              {"batch_size", "Batch size"},
                                                              {"steps", "Steps"},
                                                              {"optimizer", "Optimizer"},
                                                              {"loss", "Loss"},
                                                              {"growth_interval", "Growth interval"},
                                                              {"init_scale", "Initial scale"},
                                                              {"clip_grad_norm", "Clip gradient norm"},
                                                              {"accumulate", "Accumulate"},
                                                              {"checkpoint_every", "Checkpoint every"},
                                                              {"lr_schedule", "LR schedule"},
                                                              {"output", "Output"},
                                                              {"mask_input", "Mask input"},
                                                              {"sequence_axis", "Sequence axis"},
                                                              {"granularity", "Granularity"},
                                                              {"repeats", "Repeats"},
                                                              {"warmup", "Warm-up"},
                                                              {"layer", "Layer"},
                                                              {"sample", "Sample"}};
    const std::string& field = input->field();
    const auto bracket = field.find('[');
    const auto it = labels.find(field.substr(0, bracket));
    if (it == labels.end()) return QString::fromStdString(e.what());
    QString label = QString::fromUtf8(it->second);
    if (bracket != std::string::npos && field.back() == ']') {
        bool ok = false;
        const int i = QString::fromStdString(field.substr(bracket + 1, field.size() - bracket - 2)).toInt(&ok);
        if (ok) label += QStringLiteral(" (region %1)").arg(i + 1);
    }
    return label + QStringLiteral(": ") + QString::fromStdString(input->expected());
}

}  // namespace ampscope::ui
