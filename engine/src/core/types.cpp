// SPDX-License-Identifier: MIT
#include "ampscope/engine/types.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace ampscope {

namespace {

/// One spelling of an enum value; the first spelling of a value is its name.
template <class E>
struct Spelling {
    E value;
    const char* text;
};

constexpr Spelling<Precision> kPrecisions[] = {
    {Precision::Fp32, "fp32"},     {Precision::Fp16, "fp16"},    {Precision::Bf16, "bf16"},
    {Precision::Fp32, "float32"},  {Precision::Fp16, "float16"}, {Precision::Fp16, "half"},
    {Precision::Bf16, "bfloat16"}, {Precision::Fp8, "fp8"},      {Precision::Fp8Rowwise, "fp8-rowwise"},
    {Precision::Mxfp8, "mxfp8"},   {Precision::Nvfp4, "nvfp4"},  {Precision::Fp8Delayed, "fp8-delayed"}};
constexpr Spelling<TieRule> kTieRules[] = {
    {TieRule::LowestIndex, "lowest-index"}, {TieRule::Abstain, "abstain"}, {TieRule::LowestIndex, "lowest_index"}};
constexpr Spelling<QualityMetric> kQualityMetrics[] = {{QualityMetric::Accuracy, "accuracy"},
                                                       {QualityMetric::Mse, "mse"},
                                                       {QualityMetric::MaxAbsError, "max_abs_error"},
                                                       {QualityMetric::Perplexity, "perplexity"},
                                                       {QualityMetric::TokenAccuracy, "token_accuracy"},
                                                       {QualityMetric::MaxAbsError, "max-abs-error"},
                                                       {QualityMetric::TokenAccuracy, "token-accuracy"}};
constexpr Spelling<Verdict> kVerdicts[] = {
    {Verdict::Accepted, "accepted"}, {Verdict::Rejected, "rejected"}, {Verdict::InvalidReference, "invalid_reference"}};

template <class E, size_t N>
std::string name_of(const Spelling<E> (&table)[N], E v) {
    for (const auto& e : table)
        if (e.value == v) return e.text;
    return "?";
}

/// Case-insensitive.
template <class E, size_t N>
std::optional<E> parse(const Spelling<E> (&table)[N], std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    for (const auto& e : table)
        if (s == e.text) return e.value;
    return std::nullopt;
}

}  // namespace

std::string to_string(Precision p) {
    return name_of(kPrecisions, p);
}
std::optional<Precision> parse_precision(const std::string& s) {
    return parse(kPrecisions, s);
}
std::string to_string(Mode m) {
    return m == Mode::Eval ? "eval" : "train";
}
std::string to_string(TieRule r) {
    return name_of(kTieRules, r);
}
std::optional<TieRule> parse_tie_rule(const std::string& s) {
    return parse(kTieRules, s);
}
std::string to_string(QualityMetric m) {
    return name_of(kQualityMetrics, m);
}
std::optional<QualityMetric> parse_quality_metric(const std::string& s) {
    return parse(kQualityMetrics, s);
}
std::string to_string(Verdict v) {
    return name_of(kVerdicts, v);
}

void TensorStats::merge(const TensorStats& o) {
    if (o.count == 0) return;
    if (count == 0) {
        *this = o;
        return;
    }
    const int64_t fin_a = count - nonfinite(), fin_b = o.count - o.nonfinite();
    const int64_t fin = fin_a + fin_b;
    if (fin > 0) {
        mean = (mean * double(fin_a) + o.mean * double(fin_b)) / double(fin);
        rms = std::sqrt((rms * rms * double(fin_a) + o.rms * o.rms * double(fin_b)) / double(fin));
    }
    if (fin_a == 0) {
        min = o.min;
        max = o.max;
    } else if (fin_b > 0) {
        min = std::min(min, o.min);
        max = std::max(max, o.max);
    }
    absmax = std::max(absmax, o.absmax);
    if (min_nonzero_abs == 0)
        min_nonzero_abs = o.min_nonzero_abs;
    else if (o.min_nonzero_abs != 0)
        min_nonzero_abs = std::min(min_nonzero_abs, o.min_nonzero_abs);
    count += o.count;
    nan += o.nan;
    posinf += o.posinf;
    neginf += o.neginf;
    zeros += o.zeros;
    fp16_overflow += o.fp16_overflow;
    fp16_subnormal += o.fp16_subnormal;
    fp16_underflow += o.fp16_underflow;
    bf16_overflow += o.bf16_overflow;
    bf16_subnormal += o.bf16_subnormal;
    bf16_underflow += o.bf16_underflow;
}

}  // namespace ampscope
