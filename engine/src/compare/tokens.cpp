// SPDX-License-Identifier: MIT
// Per-token comparison of sequence outputs [N, T, V] (language models). Each unmasked position is
// one decision (argmax over V with the tie rule). The figures follow llama.cpp's
// `perplexity --kl-divergence`: KL(ref || amp) of the softmax distributions per position (mean,
// 99th percentile with linear interpolation, maximum), the fraction of positions with the same
// top-1 token, and the RMS of the change in probability of a token; llama.cpp takes the text's
// next token there, a probe set has no text, so ampscope takes the reference's top-1 token.
// Top-5 overlap: |top5(ref) & top5(amp)| / 5 per position, averaged (ties in value: the lower
// token index first). Softmax in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>

#include "ampscope/engine/text.h"
#include "ampscope/engine/compare.h"

namespace ampscope {
namespace {

constexpr size_t kBoundaryPositions = 10;

/// log_softmax of `v` scores, in double.
void log_softmax(const float* x, int v, std::vector<double>& out) {
    double m = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < v; ++j) m = std::max(m, double(x[j]));
    double s = 0;
    for (int j = 0; j < v; ++j) s += std::exp(double(x[j]) - m);
    const double lse = m + std::log(s);
    out.resize(size_t(v));
    for (int j = 0; j < v; ++j) out[size_t(j)] = double(x[j]) - lse;
}

/// Indices of the k largest scores (ties: the lower index first).
std::vector<int> top_k(const float* x, int v, int k) {
    std::vector<int> idx(static_cast<size_t>(v));
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [x](int a, int b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
    idx.resize(size_t(k));
    std::sort(idx.begin(), idx.end());
    return idx;
}

/// The first index of the largest score (torch.argmax).
int argmax(const float* x, int v) {
    int best = 0;
    for (int j = 1; j < v; ++j)
        if (x[j] > x[best]) best = j;
    return best;
}

/// numpy's default percentile: linear interpolation between the closest ranks.
double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const double rank = q * double(v.size() - 1);
    const auto lo = size_t(std::floor(rank));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (rank - double(lo));
}

/// Running sums over the compared positions.
struct Sums {
    std::vector<double> kld;
    double dp2 = 0, overlap = 0;
    int64_t same = 0, flips = 0;
};

/// Whether the AMP logits of a position hold a non-finite value the reference does not have at
/// the same index (a -inf both passes have is a masked entry, not an overflow).
bool new_nonfinite(const float* rs, const float* as, int v) {
    for (int j = 0; j < v; ++j)
        if (!std::isfinite(as[j]) && !(std::isinf(as[j]) && as[j] == rs[j])) return true;
    return false;
}

/// One unmasked position whose logits are finite in both passes, or -inf at the same entries.
void compare_position(const float* rs, const float* as, int v, Sums& s, float& kld_out) {
    std::vector<double> lr, la;
    log_softmax(rs, v, lr);
    log_softmax(as, v, la);
    double kld = 0;
    for (int j = 0; j < v; ++j) {
        const double p = std::exp(lr[size_t(j)]);
        if (p > 0) kld += p * (lr[size_t(j)] - la[size_t(j)]);  // 0 log(0 / q) = 0: a masked (-inf) entry
    }
    s.kld.push_back(kld);
    kld_out = float(kld);
    const int t = argmax(rs, v);
    const double dp = std::exp(la[size_t(t)]) - std::exp(lr[size_t(t)]);
    s.dp2 += dp * dp;
    const int k = std::min(5, v);
    const auto tr = top_k(rs, v, k), ta = top_k(as, v, k);
    std::vector<int> both;
    std::set_intersection(tr.begin(), tr.end(), ta.begin(), ta.end(), std::back_inserter(both));
    s.overlap += double(both.size()) / double(k);
}

void criteria_results(const TokenStats& t, const Sums& s, const std::set<std::string>& flipped, const Criteria& c,
                      std::vector<CriterionResult>& results) {
    const double n = double(t.positions);
    const double rate = t.positions ? double(s.flips) / n : 0.0;
    CriterionResult flips{"decision_flips", rate <= c.max_flip_rate, "", {flipped.begin(), flipped.end()}};
    flips.detail = std::to_string(s.flips) + " of " + std::to_string(t.positions) +
                   " positions change their top-1 token (rate " + short_number(rate) + ", allowed " +
                   short_number(c.max_flip_rate) + ", tie rule " + to_string(c.tie_rule) + "; " +
                   std::to_string(t.masked) + " masked positions not compared)";
    CriterionResult kld{"mean_kld", t.mean_kld <= c.max_mean_kld, "", {}};
    kld.detail = "mean KL(ref || amp) " + short_number(t.mean_kld) + " per position (at most " +
                 short_number(c.max_mean_kld) + "); p99 " + short_number(t.p99_kld) + ", max " +
                 short_number(t.max_kld);
    CriterionResult same{"same_top", t.same_top >= c.min_same_top, "", {}};
    same.detail = "same top-1 token at " + short_number(100 * t.same_top) + "% of positions (at least " +
                  short_number(100 * c.min_same_top) + "%); top-5 overlap " + short_number(100 * t.top5_overlap) +
                  "%, RMS dp " + short_number(t.rms_dp);
    results.push_back(flips);
    results.push_back(kld);
    results.push_back(same);
}

void boundary_positions(std::vector<BoundaryPosition>& all, TokenStats& t) {
    const size_t k = std::min(kBoundaryPositions, all.size());
    std::partial_sort(all.begin(), all.begin() + long(k), all.end(),
                      [](const BoundaryPosition& a, const BoundaryPosition& b) { return a.ref_margin < b.ref_margin; });
    t.boundary.assign(all.begin(), all.begin() + long(k));
}

}  // namespace

std::optional<double> token_cross_entropy(const float* scores, size_t n, const SequenceLayout& seq, const Truth& truth,
                                          int64_t* scored, int64_t* correct) {
    const int T = seq.length, V = seq.vocab;
    if (scored) *scored = 0;
    if (correct) *correct = 0;
    if (truth.label_width != T || truth.labels.size() != n * size_t(T) || V <= 0) return std::nullopt;
    double sum = 0;
    int64_t count = 0, hits = 0;
    std::vector<double> lp;
    for (size_t i = 0; i < n; ++i)
        for (int t = 0; t + 1 < T; ++t) {
            const int64_t label = truth.labels[i * size_t(T) + size_t(t) + 1];
            if (label == kIgnoreLabel || label < 0 || label >= V) continue;
            const float* x = scores + (i * size_t(T) + size_t(t)) * size_t(V);
            log_softmax(x, V, lp);
            sum -= lp[size_t(label)];
            hits += argmax(x, V) == label;
            ++count;
        }
    if (scored) *scored = count;
    if (correct) *correct = hits;
    if (count == 0) return std::nullopt;
    return sum / double(count);
}

void compare_tokens(const PassResult& ref, const PassResult& amp, const std::vector<SampleInfo>& samples,
                    const Truth& truth, const Criteria& c, const SequenceLayout& seq, Comparison& out,
                    std::vector<CriterionResult>& results) {
    const int T = seq.length, V = seq.vocab;
    const size_t n = samples.size();
    TokenStats t;
    t.length = T;
    t.vocab = V;
    t.kld.assign(n * size_t(T), std::numeric_limits<float>::quiet_NaN());
    Sums s;
    std::set<std::string> flipped;
    std::vector<BoundaryPosition> margins;
    for (size_t i = 0; i < n; ++i)
        for (int p = 0; p < T; ++p) {
            const size_t at = i * size_t(T) + size_t(p);
            if (!seq.mask.empty() && seq.mask[at] == 0) {
                ++t.masked;
                continue;
            }
            const float* rs = ref.outputs.data() + at * size_t(V);
            const float* as = amp.outputs.data() + at * size_t(V);
            const int rd = decide(rs, V, c.tie_tolerance, c.tie_rule);
            const int ad = decide(as, V, c.tie_tolerance, c.tie_rule);
            if (rd != kNonFinite) margins.push_back({samples[i].id, p, margin(rs, V)});
            if (rd != ad) out.flips.push_back({samples[i].id, samples[i].tag, rd, ad, margin(rs, V), margin(as, V), p});
            if (rd == kNonFinite || ad == kNonFinite || new_nonfinite(rs, as, V))
                continue;  // counted by finite_outputs
            ++t.positions;
            if (rd == ad)
                ++s.same;
            else {
                ++s.flips;
                flipped.insert(samples[i].id);
            }
            compare_position(rs, as, V, s, t.kld[at]);
        }
    if (t.positions > 0) {
        const double np = double(t.positions);
        t.mean_kld = std::accumulate(s.kld.begin(), s.kld.end(), 0.0) / np;
        t.max_kld = *std::max_element(s.kld.begin(), s.kld.end());
        t.p99_kld = percentile(s.kld, 0.99);
        t.same_top = double(s.same) / np;
        t.top5_overlap = s.overlap / np;
        t.rms_dp = std::sqrt(s.dp2 / np);
    }
    int64_t scored = 0;
    if (auto ce = token_cross_entropy(ref.outputs.data(), n, seq, truth, &scored)) {
        t.label_tokens = scored;
        t.ref_ce = *ce;
        t.amp_ce = token_cross_entropy(amp.outputs.data(), n, seq, truth).value_or(0);
        t.ref_ppl = std::exp(t.ref_ce);
        t.amp_ppl = std::exp(t.amp_ce);
    }
    boundary_positions(margins, t);
    criteria_results(t, s, flipped, c, results);
    out.tokens = std::move(t);
}

}  // namespace ampscope
