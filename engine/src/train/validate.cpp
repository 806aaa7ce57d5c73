// SPDX-License-Identifier: MIT
// A training spec's options checked before anything runs.
#include <c10/util/StringUtil.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <system_error>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/train.h"
#include "ampscope/engine/vocabulary.h"
#include "train/train_parts.h"

namespace ampscope::train_parts {

void validate_spec(const TrainSpec& s) {
    auto finite_at_least = [](double v, double lo, bool strict, const char* field) {
        if (!std::isfinite(v) || (strict ? !(v > lo) : !(v >= lo)))
            throw InputError("", field,
                             std::string("expected a finite number ") + (strict ? "> " : ">= ") + c10::str(lo) +
                                 ", got " + c10::str(v));
    };
    if (s.steps < 1) throw InputError("", "steps", "expected an integer >= 1");
    if (s.batch_size < 1) throw InputError("", "batch_size", "expected an integer >= 1");
    if (s.accumulate < 1) throw InputError("", "accumulate", "expected an integer >= 1");
    if (s.precision == Precision::Fp32 && s.autocast)
        throw InputError("", "precision", "expected " + training_precisions_listed());
    if (!trains(s.precision) && s.precision != Precision::Fp32)
        throw InputError("", "precision",
                         "'" + to_string(s.precision) + "'; expected " + training_precisions_listed() +
                             " (a training step's FP8 recipes, as torchao and Transformer Engine train them; " +
                             to_string(s.precision) + " runs with `run` and `advise` only)");
    if (s.fp8_amax_history < 1 || s.fp8_amax_history > kMaxAmaxHistory)
        throw InputError(
            "", "fp8_amax_history",
            std::to_string(s.fp8_amax_history) + "; expected an integer from 1 to " + std::to_string(kMaxAmaxHistory));
    if (s.fp8_margin < 0 || s.fp8_margin > kMaxFp8Margin)
        throw InputError(
            "", "fp8_margin",
            std::to_string(s.fp8_margin) + "; expected an integer from 0 to " + std::to_string(kMaxFp8Margin));
    if (!s.autocast && is_fp8(s.precision))  // the isolation mode "loss scaling only": FP32 compute
        for (const auto& [given, field] :
             {std::pair{!s.keep_bf16.empty(), "keep_bf16"}, std::pair{s.fp8_weight_cache, "fp8_weight_cache"},
              std::pair{s.fp8_all_gemms, "fp8_all_gemms"}, std::pair{s.rowwise_gw_hp, "rowwise_gw_hp"}})
            if (given)
                throw InputError("", field,
                                 "given without autocast; expected autocast (without it the AMP side computes in "
                                 "FP32 with loss scaling only, and no FP8 recipe runs)");
    if (s.fp8_weight_cache && s.precision != Precision::Fp8Delayed)
        throw InputError("", "fp8_weight_cache",
                         "given with " + to_string(s.precision) +
                             "; expected precision fp8-delayed (Transformer Engine's cached FP8 weights; the other "
                             "recipes cast each weight when it is used)");
    if (s.fp8_all_gemms && s.precision != Precision::Fp8 && s.precision != Precision::Fp8Rowwise &&
        s.precision != Precision::Mxfp8 && s.precision != Precision::Fp8Delayed)
        throw InputError("", "fp8_all_gemms",
                         "given with " + to_string(s.precision) +
                             "; expected precision fp8, fp8-rowwise, mxfp8 or fp8-delayed (the recipes whose "
                             "training GEMMs a matrix product can follow; NVIDIA's NVFP4 recipe defines its linear "
                             "layers' GEMMs only)");
    if (s.rowwise_gw_hp && s.precision != Precision::Fp8Rowwise)
        throw InputError("", "rowwise_gw_hp",
                         "given with " + to_string(s.precision) +
                             "; expected precision fp8-rowwise (torchao's recipe rowwise_with_gw_hp)");
    finite_at_least(s.lr, 0, true, "lr");
    finite_at_least(s.momentum, 0, false, "momentum");
    finite_at_least(s.weight_decay, 0, false, "weight_decay");
    finite_at_least(s.clip_grad_norm, 0, false, "clip_grad_norm");
    finite_at_least(s.scaler.init_scale, 0, true, "init_scale");
    finite_at_least(s.scaler.growth_factor, 1, true, "growth_factor");
    if (!std::isfinite(s.scaler.backoff_factor) || !(s.scaler.backoff_factor > 0 && s.scaler.backoff_factor < 1))
        throw InputError("", "backoff_factor",
                         "expected a number in (0, 1) (torch.amp.GradScaler asserts backoff_factor < 1), got " +
                             c10::str(s.scaler.backoff_factor));
    if (s.scaler.growth_interval < 1) throw InputError("", "growth_interval", "expected an integer >= 1");
    if (s.checkpoint_every < 0)
        throw InputError("", "checkpoint_every", "expected an integer >= 0 (0 = no checkpoints)");
    if (s.checkpoint_every > 0) {
        std::error_code ec;
        if (!std::filesystem::is_directory(s.checkpoint_dir, ec))
            throw InputError(s.checkpoint_dir, "checkpoint_dir",
                             std::filesystem::exists(s.checkpoint_dir, ec)
                                 ? "is not a directory; expected a directory for checkpoints"
                                 : "does not exist; expected an existing directory for checkpoints");
        if (::access(s.checkpoint_dir.c_str(), W_OK) != 0)
            throw InputError(s.checkpoint_dir, "checkpoint_dir",
                             "is not writable; expected a directory checkpoints can be written to");
    }
}

}  // namespace ampscope::train_parts
