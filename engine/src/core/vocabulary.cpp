// SPDX-License-Identifier: MIT
#include "ampscope/engine/vocabulary.h"

#include <cstddef>
#include <string>
#include <vector>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/fp8.h"
#include "ampscope/engine/run.h"

namespace ampscope {

namespace {

/// An enum's names in its order: value i is names[i].
template <class E>
struct Names {
    std::vector<std::string> all;  ///< index = the enum's value
    size_t first_listed = 0;       ///< names before it are not offered (LossKind::Auto's "")

    std::string format(E v) const {
        const auto i = size_t(v);
        return i < all.size() ? all[i] : "?";
    }
    std::vector<std::string> listed() const { return {all.begin() + std::ptrdiff_t(first_listed), all.end()}; }
    /// "a, b or c"
    std::string expected() const {
        const auto l = listed();
        std::string s;
        for (size_t i = 0; i < l.size(); ++i) s += (i == 0 ? "" : i + 1 == l.size() ? " or " : ", ") + l[i];
        return s;
    }
    E parse(const std::string& s, const std::string& field) const {
        for (size_t i = 0; i < all.size(); ++i)
            if (all[i] == s) return E(i);
        throw InputError("", field, "'" + s + "'; expected " + expected());
    }
};

const Names<LossKind> kLoss{{"", "ce", "mse", "lm", "model"}, 1};
const Names<OptimizerKind> kOptimizer{{"sgd", "adam", "adamw"}};
const Names<LrSchedule> kSchedule{{"constant", "cosine"}};
const Names<ReplayStageKind> kStage{{"checkpoint", "input", "forward", "loss", "backward", "unscale", "optimizer"}};
const Names<ReplaySide> kSide{{"amp", "reference", "both"}};
const Names<ReviewStatus> kReview{{"open", "accepted", "rejected"}};
const Names<RealGemm> kRealGemm{{"auto", "on", "off"}};
const Names<MxScaling> kMxScaling{{"floor", "rceil"}};

}  // namespace

std::string to_string(LossKind v) {
    return kLoss.format(v);
}
std::string to_string(OptimizerKind v) {
    return kOptimizer.format(v);
}
std::string to_string(LrSchedule v) {
    return kSchedule.format(v);
}
std::string to_string(ReplayStageKind v) {
    return kStage.format(v);
}
std::string to_string(ReplaySide v) {
    return kSide.format(v);
}
std::string to_string(RealGemm v) {
    return kRealGemm.format(v);
}
std::string to_string(MxScaling v) {
    return kMxScaling.format(v);
}
std::string to_string(ReviewStatus v) {
    return kReview.format(v);
}

LossKind parse_loss_kind(const std::string& s, const std::string& field) {
    return kLoss.parse(s, field);
}
OptimizerKind parse_optimizer_kind(const std::string& s, const std::string& field) {
    return kOptimizer.parse(s, field);
}
LrSchedule parse_lr_schedule(const std::string& s, const std::string& field) {
    return kSchedule.parse(s, field);
}
ReplayStageKind parse_replay_stage(const std::string& s, const std::string& field) {
    return kStage.parse(s, field);
}
ReplaySide parse_replay_side(const std::string& s, const std::string& field) {
    return kSide.parse(s, field);
}
RealGemm parse_real_gemm(const std::string& s, const std::string& field) {
    return kRealGemm.parse(s, field);
}
MxScaling parse_mx_scaling(const std::string& s, const std::string& field) {
    return kMxScaling.parse(s, field);
}
ReviewStatus parse_review_status(const std::string& s, const std::string& field) {
    return kReview.parse(s, field);
}

const std::vector<std::string>& loss_kind_names() {
    static const auto names = kLoss.listed();
    return names;
}
const std::vector<std::string>& optimizer_kind_names() {
    static const auto names = kOptimizer.listed();
    return names;
}
const std::vector<std::string>& lr_schedule_names() {
    static const auto names = kSchedule.listed();
    return names;
}
const std::vector<std::string>& replay_stage_names() {
    static const auto names = kStage.listed();
    return names;
}
const std::vector<std::string>& replay_side_names() {
    static const auto names = kSide.listed();
    return names;
}
const std::vector<std::string>& real_gemm_names() {
    static const auto n = kRealGemm.listed();
    return n;
}
const std::vector<std::string>& mx_scaling_names() {
    static const auto n = kMxScaling.listed();
    return n;
}
const std::vector<std::string>& review_status_names() {
    static const auto names = kReview.listed();
    return names;
}

}  // namespace ampscope
