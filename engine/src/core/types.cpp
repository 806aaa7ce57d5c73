// SPDX-License-Identifier: MIT
#include "ampscope/engine/types.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace ampscope {

namespace {
std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}
}  // namespace

std::string to_string(Precision p) {
    switch (p) {
    case Precision::Fp32: return "fp32";
    case Precision::Fp16: return "fp16";
    case Precision::Bf16: return "bf16";
    }
    return "?";
}

std::optional<Precision> parse_precision(const std::string& s) {
    const auto l = lower(s);
    if (l == "fp32" || l == "float32") return Precision::Fp32;
    if (l == "fp16" || l == "float16" || l == "half") return Precision::Fp16;
    if (l == "bf16" || l == "bfloat16") return Precision::Bf16;
    return std::nullopt;
}

std::string to_string(Mode m) { return m == Mode::Eval ? "eval" : "train"; }

std::string to_string(TieRule r) { return r == TieRule::LowestIndex ? "lowest-index" : "abstain"; }

std::optional<TieRule> parse_tie_rule(const std::string& s) {
    const auto l = lower(s);
    if (l == "lowest-index" || l == "lowest_index") return TieRule::LowestIndex;
    if (l == "abstain") return TieRule::Abstain;
    return std::nullopt;
}

std::string to_string(QualityMetric m) {
    switch (m) {
    case QualityMetric::Accuracy: return "accuracy";
    case QualityMetric::Mse: return "mse";
    case QualityMetric::MaxAbsError: return "max_abs_error";
    }
    return "?";
}

std::optional<QualityMetric> parse_quality_metric(const std::string& s) {
    const auto l = lower(s);
    if (l == "accuracy") return QualityMetric::Accuracy;
    if (l == "mse") return QualityMetric::Mse;
    if (l == "max_abs_error" || l == "max-abs-error") return QualityMetric::MaxAbsError;
    return std::nullopt;
}

std::string to_string(Verdict v) {
    switch (v) {
    case Verdict::Accepted: return "accepted";
    case Verdict::Rejected: return "rejected";
    case Verdict::InvalidReference: return "invalid_reference";
    }
    return "?";
}

void TensorStats::merge(const TensorStats& o) {
    if (o.count == 0) return;
    if (count == 0) { *this = o; return; }
    const int64_t fin_a = count - nonfinite(), fin_b = o.count - o.nonfinite();
    const int64_t fin = fin_a + fin_b;
    if (fin > 0) {
        mean = (mean * double(fin_a) + o.mean * double(fin_b)) / double(fin);
        rms = std::sqrt((rms * rms * double(fin_a) + o.rms * o.rms * double(fin_b)) / double(fin));
    }
    if (fin_a == 0) { min = o.min; max = o.max; }
    else if (fin_b > 0) { min = std::min(min, o.min); max = std::max(max, o.max); }
    absmax = std::max(absmax, o.absmax);
    if (min_nonzero_abs == 0) min_nonzero_abs = o.min_nonzero_abs;
    else if (o.min_nonzero_abs != 0) min_nonzero_abs = std::min(min_nonzero_abs, o.min_nonzero_abs);
    count += o.count;
    nan += o.nan; posinf += o.posinf; neginf += o.neginf; zeros += o.zeros;
    fp16_overflow += o.fp16_overflow; fp16_subnormal += o.fp16_subnormal;
    fp16_underflow += o.fp16_underflow; bf16_overflow += o.bf16_overflow;
    bf16_subnormal += o.bf16_subnormal; bf16_underflow += o.bf16_underflow;
}

}  // namespace ampscope
