// SPDX-License-Identifier: MIT
#pragma once
/// \file vocabulary.h
/// The engine's closed sets of names: loss kinds, optimizer kinds, learning-rate schedules,
/// replay stages and sides, review statuses. One enum each, with one parse/format pair; the
/// names are those the CLI accepts, the GUI offers and storage reads and writes (database and
/// JSON contents are these strings). Kept apart from types.h so that a new name rebuilds only
/// the files that use the vocabulary.

#include <string>
#include <vector>

namespace ampscope {

/// What a training or replay step scores. Auto ("") picks by the data: ce with labels, lm with
/// label sequences, mse with targets.
enum class LossKind { Auto, Ce, Mse, Lm, Model };
/// The optimizers the training session and the replay step.
enum class OptimizerKind { Sgd, Adam, Adamw };
/// The training session's learning-rate schedule.
enum class LrSchedule { Constant, Cosine };
/// Where a replay first saw non-finite values.
enum class ReplayStageKind { Checkpoint, Input, Forward, Loss, Backward, Unscale, Optimizer };
/// Which side of a replay: the AMP job, the FP32 reference, or both (the checkpoint's weights).
enum class ReplaySide { Amp, Reference, Both };
/// A human review of a recorded run.
enum class ReviewStatus { Open, Accepted, Rejected };
/// RunSpec::fp8_real_gemm (run.h): auto, on, off.
enum class RealGemm;
/// How an MX block's E8M0 scale is chosen (fp8.h QuantSpec::mx_scaling): floor, rceil.
enum class MxScaling;

/// The name of a value, as stored and as the CLI spells it (LossKind::Auto: "").
std::string to_string(LossKind v);
std::string to_string(OptimizerKind v);
std::string to_string(LrSchedule v);
std::string to_string(ReplayStageKind v);
std::string to_string(ReplaySide v);
std::string to_string(ReviewStatus v);
std::string to_string(RealGemm v);
std::string to_string(MxScaling v);

/// The value a name stands for (exact spelling). Throws InputError naming `field` and listing
/// the accepted names: "field 'loss': 'xx'; expected ce, mse, lm or model".
LossKind parse_loss_kind(const std::string& s, const std::string& field = "loss");  ///< "" is Auto
OptimizerKind parse_optimizer_kind(const std::string& s, const std::string& field = "optimizer");
LrSchedule parse_lr_schedule(const std::string& s, const std::string& field = "lr_schedule");
ReplayStageKind parse_replay_stage(const std::string& s, const std::string& field = "stage");
ReplaySide parse_replay_side(const std::string& s, const std::string& field = "side");
ReviewStatus parse_review_status(const std::string& s, const std::string& field = "status");
RealGemm parse_real_gemm(const std::string& s, const std::string& field = "fp8_real_gemm");
MxScaling parse_mx_scaling(const std::string& s, const std::string& field = "mx_scaling");

/// Every name, in the enum's order: for the CLI's checks and the GUI's choices. Auto's "" is
/// not listed among the loss kinds (it is the option left out).
const std::vector<std::string>& loss_kind_names();
const std::vector<std::string>& optimizer_kind_names();
const std::vector<std::string>& lr_schedule_names();
const std::vector<std::string>& replay_stage_names();
const std::vector<std::string>& replay_side_names();
const std::vector<std::string>& review_status_names();
const std::vector<std::string>& real_gemm_names();
const std::vector<std::string>& mx_scaling_names();

}  // namespace ampscope
