// SPDX-License-Identifier: MIT
#include "ampscope/engine/compare.h"

#include "ampscope/engine/text.h"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <limits>
#include <sstream>

namespace ampscope {

int decide(const float* scores, int n, double tie_tolerance, TieRule rule) {
    int best = -1;
    for (int i = 0; i < n; ++i) {
        if (std::isnan(scores[i]) || scores[i] == std::numeric_limits<float>::infinity()) return kNonFinite;
        if (std::isinf(scores[i])) continue;  // -inf: a masked entry, never the choice
        if (best < 0 || scores[i] > scores[best]) best = i;
    }
    if (best < 0) return kNonFinite;  // no scores, or every one -inf
    int first_tied = best, tied = 0;
    for (int i = 0; i < n; ++i) {
        if (std::isinf(scores[i])) continue;
        const bool within = (scores[i] == scores[best]) || (double(scores[best]) - double(scores[i]) <= tie_tolerance);
        if (within) {
            ++tied;
            first_tied = std::min(first_tied, i);
        }
    }
    if (tied > 1) return rule == TieRule::Abstain ? kAbstain : first_tied;
    return best;
}

std::string decision_label(int d) {
    return d == kAbstain ? "abstain" : d == kNonFinite ? "non-finite" : std::to_string(d);
}

double margin(const float* scores, int n) {
    double top1 = -std::numeric_limits<double>::infinity(), top2 = top1;
    int finite = 0;
    for (int i = 0; i < n; ++i) {
        if (!std::isfinite(scores[i])) continue;
        ++finite;
        const double v = scores[i];
        if (v > top1) {
            top2 = top1;
            top1 = v;
        } else if (v > top2)
            top2 = v;
    }
    return finite < 2 ? 0.0 : top1 - top2;
}

namespace {

/// Perplexity or token accuracy of token labels [N, T] against scores laid out [T, V] per sample.
std::optional<double> token_quality(const PassResult& pass, size_t n, const Truth& truth, QualityMetric m) {
    const int t = truth.label_width;
    if (t <= 0 || pass.num_outputs % t != 0) return std::nullopt;
    const SequenceLayout seq{t, pass.num_outputs / t, {}};
    int64_t scored = 0, correct = 0;
    const auto ce = token_cross_entropy(pass.outputs.data(), n, seq, truth, &scored, &correct);
    if (!ce) return std::nullopt;
    return m == QualityMetric::Perplexity ? std::exp(*ce) : double(correct) / double(scored);
}

}  // namespace

bool is_classifier(int num_outputs, const Truth& truth) {
    if (!truth.labels.empty()) return true;
    if (!truth.targets.empty()) return false;
    return num_outputs >= 2;
}

std::optional<double> quality(const PassResult& pass, const Truth& truth, const Criteria& c, int* worst_sample) {
    const int k = pass.num_outputs;
    const size_t n = k > 0 ? pass.outputs.size() / size_t(k) : 0;
    if (worst_sample) *worst_sample = -1;
    if (n == 0) return std::nullopt;
    if (c.quality_metric == QualityMetric::Perplexity || c.quality_metric == QualityMetric::TokenAccuracy)
        return token_quality(pass, n, truth, c.quality_metric);
    if (c.quality_metric == QualityMetric::Accuracy) {
        if (truth.labels.size() != n) return std::nullopt;
        size_t correct = 0;
        for (size_t i = 0; i < n; ++i) {
            const int d = decide(&pass.outputs[i * k], k, c.tie_tolerance, c.tie_rule);
            if (d >= 0 && d == truth.labels[i]) ++correct;
        }
        return double(correct) / double(n);
    }
    if (truth.targets.size() != pass.outputs.size()) return std::nullopt;
    double sum = 0, worst = -1;
    for (size_t i = 0; i < n; ++i) {
        double sample_worst = 0;
        for (int j = 0; j < k; ++j) {
            const double e = double(pass.outputs[i * k + j]) - double(truth.targets[i * k + j]);
            const double a = std::isfinite(e) ? std::fabs(e) : std::numeric_limits<double>::infinity();
            sum += e * e;
            sample_worst = std::max(sample_worst, a);
        }
        if (sample_worst > worst) {
            worst = sample_worst;
            if (worst_sample) *worst_sample = int(i);
        }
    }
    if (c.quality_metric == QualityMetric::Mse) return sum / double(n * size_t(k));
    return worst;
}

namespace {

/// Tolerances that apply to score index j.
std::pair<double, double> tolerance_for(const Criteria& c, int j) {
    for (const auto& h : c.heads)
        if (j >= h.begin && j < h.end) return {h.atol, h.rtol};
    return {c.atol, c.rtol};
}

/// Which scores of a sample are compared: all, or for a sequence output with a mask, those of the
/// positions the mask keeps (`mask` is the sample's row of T entries, `vocab` scores each).
struct ScoreMask {
    const uint8_t* mask = nullptr;
    int vocab = 1;
    bool keeps(int j) const { return !mask || mask[j / vocab] != 0; }
};

/// One sample's largest deltas over its K scores, and whether every score is finite and within
/// its tolerance; worst_index is the score furthest beyond its tolerance. Masked scores are not
/// compared (no delta, never non-finite).
SampleDelta sample_delta(const float* ref, const float* amp, int k, const SampleInfo& sample, const Criteria& c,
                         ScoreMask m) {
    SampleDelta d;
    d.sample = sample.id;
    d.tag = sample.tag;
    double worst_excess = -1;
    for (int j = 0; j < k; ++j) {
        if (!m.keeps(j)) continue;
        const double r = ref[j], a = amp[j];
        if (std::isinf(a) && a == r) continue;  // the same infinity in both passes (a masked entry): not new, no delta
        const auto [atol, rtol] = tolerance_for(c, j);
        if (!std::isfinite(a)) {
            d.finite = false;
            d.within_tolerance = false;
            d.worst_index = j;
            worst_excess = std::numeric_limits<double>::infinity();
            continue;
        }
        const double diff = std::fabs(a - r);
        const double rel = diff == 0 ? 0.0 : diff / std::max(std::fabs(r), 1e-12);
        d.abs = std::max(d.abs, diff);
        d.rel = std::max(d.rel, rel);
        const double allowed = atol + rtol * std::fabs(r);
        if (diff > allowed) d.within_tolerance = false;
        if (diff - allowed > worst_excess && std::isfinite(worst_excess)) {
            worst_excess = diff - allowed;
            d.worst_index = j;
        }
    }
    return d;
}

/// Per-sample deltas, and the finite_outputs and score_tolerance criteria they decide.
void compare_scores(const PassResult& ref, const PassResult& amp, const std::vector<SampleInfo>& samples,
                    const Criteria& c, Comparison& out, CriterionResult& finite, CriterionResult& tol,
                    const SequenceLayout* seq = nullptr) {
    const int k = ref.num_outputs;
    const size_t n = samples.size();
    out.deltas.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        ScoreMask m;
        if (seq && !seq->mask.empty() &&
            seq->mask.size() >= (i + 1) * size_t(seq->length)) {  // setup_sequence checked the size
            m.mask = seq->mask.data() + i * size_t(seq->length);
            m.vocab = std::max(seq->vocab, 1);
        }
        SampleDelta d = sample_delta(ref.outputs.data() + i * k, amp.outputs.data() + i * k, k, samples[i], c, m);
        // A non-finite sample is counted once, by finite_outputs (which allow_nonfinite may
        // pass); it is excluded from the tolerance and flip checks.
        if (!d.finite)
            finite.samples.push_back(d.sample);
        else if (!d.within_tolerance)
            tol.samples.push_back(d.sample);
        if (d.finite) {
            out.max_abs_delta = std::max(out.max_abs_delta, d.abs);
            out.max_rel_delta = std::max(out.max_rel_delta, d.rel);
        }
        out.deltas.push_back(d);
    }

    if (!finite.samples.empty()) {
        finite.passed = c.allow_nonfinite;
        finite.detail = std::to_string(finite.samples.size()) + " of " + std::to_string(n) +
                        " samples have non-finite scores" + (c.allow_nonfinite ? " (allowed by allow_nonfinite)" : "");
    } else {
        finite.detail = "all " + std::to_string(n) + " samples finite";
    }
    tol.passed = tol.samples.empty();
    const size_t finite_n = n - finite.samples.size();
    tol.detail =
        std::to_string(tol.samples.size()) + " of " + std::to_string(finite_n) +
        " finite samples outside |amp-ref| <= atol + rtol*|ref|; max |delta| " + short_number(out.max_abs_delta) +
        (finite.samples.empty() ? ""
                                : "; " + std::to_string(finite.samples.size()) + " non-finite samples not compared");
}

/// Decisions of both passes (classifiers) and the decision_flips criterion.
void compare_decisions(const PassResult& ref, const PassResult& amp, const std::vector<SampleInfo>& samples,
                       const Truth& truth, const Criteria& c, Comparison& out, CriterionResult& flips) {
    const int k = ref.num_outputs;
    const size_t n = samples.size();
    if (!is_classifier(k, truth)) {
        flips.detail = "not a classifier: no decisions to flip";
        return;
    }
    size_t uncounted = 0;
    out.ref_decisions.resize(n);
    out.amp_decisions.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const float* rs = &ref.outputs[i * k];
        const float* as = &amp.outputs[i * k];
        const int rd = decide(rs, k, c.tie_tolerance, c.tie_rule);
        const int ad = decide(as, k, c.tie_tolerance, c.tie_rule);
        out.ref_decisions[i] = rd;
        out.amp_decisions[i] = ad;
        if (rd != ad) {  // listed; counted only when both sides decided and no new non-finite score (finite_outputs
                         // counts those)
            out.flips.push_back({samples[i].id, samples[i].tag, rd, ad, margin(rs, k), margin(as, k)});
            if (rd != kNonFinite && ad != kNonFinite && out.deltas[i].finite)
                flips.samples.push_back(samples[i].id);
            else
                ++uncounted;
        }
    }
    flips.passed = int(flips.samples.size()) <= c.max_flips;
    flips.detail = std::to_string(flips.samples.size()) + " decision flips (allowed " + std::to_string(c.max_flips) +
                   ", tie rule " + to_string(c.tie_rule) + ")" +
                   (uncounted ? "; " + std::to_string(uncounted) + " non-finite samples not counted" : "");
}

/// The quality criterion of the AMP pass against the ground truth, when the probe set has one.
void compare_quality(const PassResult& amp, const std::vector<SampleInfo>& samples, const Truth& truth,
                     const Criteria& c, CriterionResult& qual) {
    int worst = -1;
    const auto q = quality(amp, truth, c, &worst);
    if (!q) {
        const bool labels = c.quality_metric != QualityMetric::Mse && c.quality_metric != QualityMetric::MaxAbsError;
        qual.detail =
            "no ground truth (" + std::string(labels ? "labels" : "targets") + ") in the probe set: not evaluated";
        return;
    }
    const bool higher_better =
        c.quality_metric == QualityMetric::Accuracy || c.quality_metric == QualityMetric::TokenAccuracy;
    qual.passed = higher_better ? (*q >= c.quality_threshold) : (*q <= c.quality_threshold);
    const bool report_only = !higher_better && !c.quality_threshold_set;
    if (report_only) qual.passed = true;
    qual.detail =
        to_string(c.quality_metric) + " " + short_number(*q) +
        (report_only ? " (no threshold set)"
                     : (higher_better ? " (at least " : " (at most ") + short_number(c.quality_threshold) + ")");
    if (worst >= 0) {
        qual.samples.push_back(samples[size_t(worst)].id);
        qual.detail += "; largest error at sample " + samples[size_t(worst)].id;
    }
}

}  // namespace

Comparison compare(const PassResult& ref, const PassResult& amp, const std::vector<SampleInfo>& samples,
                   const Truth& truth, const Criteria& c, const SequenceLayout* seq) {
    Comparison out;
    out.precision = amp.precision;

    CriterionResult finite{"finite_outputs", true, "", {}};
    CriterionResult tol{"score_tolerance", true, "", {}};
    CriterionResult flips{"decision_flips", true, "", {}};
    CriterionResult qual{"quality", true, "", {}};

    if (seq) {
        compare_scores(ref, amp, samples, c, out, finite, tol, seq);  // masked positions not compared, not copied
        std::vector<CriterionResult> tokens;
        compare_tokens(ref, amp, samples, truth, c, *seq, out, tokens);
        compare_quality(amp, samples, truth, c, qual);
        out.criteria = {finite, tol};
        out.criteria.insert(out.criteria.end(), tokens.begin(), tokens.end());
        out.criteria.push_back(qual);
    } else {
        compare_scores(ref, amp, samples, c, out, finite, tol);
        compare_decisions(ref, amp, samples, truth, c, out, flips);
        compare_quality(amp, samples, truth, c, qual);
        out.criteria = {finite, tol, flips, qual};
    }
    const bool ok =
        std::all_of(out.criteria.begin(), out.criteria.end(), [](const CriterionResult& r) { return r.passed; });
    out.verdict = ok ? Verdict::Accepted : Verdict::Rejected;
    return out;
}

}  // namespace ampscope
