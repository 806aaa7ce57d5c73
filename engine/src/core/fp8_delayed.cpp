// SPDX-License-Identifier: MIT
// The torch-free part of the FP8 formats (ampscope/engine/fp8.h): names, ranges, and delayed
// scaling as Transformer Engine's DelayedScaling updates its amax history and scale.
#include "ampscope/engine/fp8.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace ampscope {

std::string to_string(Fp8Element e) {
    switch (e) {
        case Fp8Element::E4M3: return "e4m3";
        case Fp8Element::E5M2: return "e5m2";
        case Fp8Element::E2M1: return "e2m1";
    }
    return "?";
}

std::string to_string(Fp8Scheme s) {
    switch (s) {
        case Fp8Scheme::Tensorwise: return "tensorwise";
        case Fp8Scheme::Rowwise: return "rowwise";
        case Fp8Scheme::Mx: return "mx";
        case Fp8Scheme::Nvfp4: return "nvfp4";
    }
    return "?";
}

double max_finite(Fp8Element e) {
    switch (e) {
        case Fp8Element::E4M3: return 448.0;
        case Fp8Element::E5M2: return 57344.0;
        case Fp8Element::E2M1: return 6.0;
    }
    return 0.0;
}

double min_normal(Fp8Element e) {
    switch (e) {
        case Fp8Element::E4M3: return 0.015625;         // 2^-6
        case Fp8Element::E5M2: return 6.103515625e-05;  // 2^-14
        case Fp8Element::E2M1: return 1.0;
    }
    return 0.0;
}

void QuantStats::merge(const QuantStats& o) {
    if (o.numel == 0) return;
    if (numel == 0) {
        *this = o;
        return;
    }
    numel += o.numel;
    nonfinite += o.nonfinite;
    nonzero += o.nonzero;
    underflow += o.underflow;
    subnormal += o.subnormal;
    saturated += o.saturated;
    nonfinite_out += o.nonfinite_out;
    amax = (std::isnan(amax) || std::isnan(o.amax)) ? std::numeric_limits<double>::quiet_NaN() : std::max(amax, o.amax);
    scales += o.scales;
    scale_min = std::isnan(scale_min)     ? o.scale_min
                : std::isnan(o.scale_min) ? scale_min
                                          : std::min(scale_min, o.scale_min);
    scale_max = std::isnan(scale_max)     ? o.scale_max
                : std::isnan(o.scale_max) ? scale_max
                                          : std::max(scale_max, o.scale_max);
    tensor_scale = std::max(tensor_scale, o.tensor_scale);
    signal += o.signal;
    noise += o.noise;
    sqnr_db = sqnr_of(*this);
}

double sqnr_of(const QuantStats& s) {
    if (s.numel - s.nonfinite - s.nonfinite_out <= 0) return std::numeric_limits<double>::quiet_NaN();
    return s.noise == 0.0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(s.signal / s.noise);
}

DelayedScaling::DelayedScaling(Fp8Element element, int history_len, int margin, AmaxAlgo algo)
    : element_(element), margin_(margin), algo_(algo) {
    if (history_len < 1) throw std::invalid_argument("delayed scaling: the amax history holds at least one step");
    if (element == Fp8Element::E2M1) throw std::invalid_argument("delayed scaling: an FP8 element format (e4m3, e5m2)");
    history_.assign(size_t(history_len), 0.0f);
}

void DelayedScaling::record(float amax) {
    // NaN is kept (std::max would drop it): the update then keeps the previous scale, as TE does.
    if (std::isnan(amax) || std::isnan(history_[0]))
        history_[0] = std::numeric_limits<float>::quiet_NaN();
    else
        history_[0] = std::max(history_[0], amax);
}

void DelayedScaling::restore(const std::vector<float>& history, float scale, int steps) {
    if (history.size() != history_.size())
        throw std::invalid_argument("delayed scaling: an amax history of " + std::to_string(history.size()) +
                                    " steps, expected " + std::to_string(history_.size()));
    history_ = history;
    scale_ = scale;
    steps_ = steps;
}

void DelayedScaling::update() {
    float amax = history_[0];
    if (algo_ == AmaxAlgo::Max)
        for (float a : history_)
            amax = (std::isnan(a) || std::isnan(amax)) ? std::numeric_limits<float>::quiet_NaN() : std::max(amax, a);
    // torch.roll(history, -1): slot i takes slot i + 1, the current amax (slot 0) moves to the end
    std::rotate(history_.begin(), history_.begin() + 1, history_.end());
    history_[0] = 0.0f;
    if (std::isfinite(amax) && amax > 0.0f) {
        const float fmax = float(max_finite(element_));
        float sf = fmax / amax;
        sf = sf / std::exp2(float(margin_));
        scale_ = std::isinf(sf) ? std::numeric_limits<float>::max() : sf;
    }
    ++steps_;
}

}  // namespace ampscope
