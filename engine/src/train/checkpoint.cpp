// SPDX-License-Identifier: MIT
// Training checkpoints: both sides' parameters and buffers, optimizers, GradScaler state, RNG,
// counters, data cursor and precision policy.
#include <torch/serialize.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "ampscope/engine/errors.h"
#include "train/train_parts.h"

namespace ampscope::train_parts {

/// fp8-delayed's state across the steps (none for other precisions, or without autocast), and the
/// run's warning when a GradScaler scales the gradients it casts.
std::optional<detail::DelayedTraining> delayed_training_of(const TrainSpec& s, TrainResult& res) {
    if (!s.autocast || s.precision != Precision::Fp8Delayed) return std::nullopt;
    if (s.scaler.enabled)
        res.warnings.push_back(
            "fp8-delayed with GradScaler: grad_output's amax history follows the loss scale (each "
            "growth clamps values, an overflow freezes its scale for the history's length); "
            "Transformer Engine trains FP8 without one (no scaler: the isolation autocast only)");
    if (s.fp8_weight_cache && s.accumulate == 1)
        res.warnings.push_back(
            "fp8-delayed weight cache with one micro-batch a step: every micro-batch is a step's "
            "first, so each casts its weights (the cache changes nothing; --accumulate N)");
    detail::DelayedTraining d(detail::DelayedOptions{s.fp8_amax_history, s.fp8_margin});
    d.weight_cache = s.fp8_weight_cache;
    return d;
}

std::string policy_string(const TrainSpec& s) {
    std::string k;
    for (const auto& g : s.keep_fp32) k += g + ",";
    if (!s.keep_bf16.empty()) k += "|bf16:";  // FP8 recipes: the modules kept out of FP8
    for (const auto& g : s.keep_bf16) k += g + ",";
    const std::string delayed = s.precision == Precision::Fp8Delayed
                                    ? "(amax history " + std::to_string(s.fp8_amax_history) + ", margin " +
                                          std::to_string(s.fp8_margin) + (s.fp8_weight_cache ? ", weight cache" : "") +
                                          ")"
                                    : "";
    const std::string mx = s.precision == Precision::Mxfp8 ? "(" + to_string(s.mx_scaling) + " scales)" : "";
    return to_string(s.precision) + delayed + mx + (s.fp8_all_gemms ? "(all GEMMs)" : "") +
           (s.rowwise_gw_hp ? "(weight gradient in high precision)" : "") + (s.autocast ? "+autocast" : "") +
           (s.scaler.enabled ? "+scaler" : "") + "|" + k;
}

namespace {

/// fp8-delayed's state: "fp8.delayed.count", then per tensor i "fp8.delayed.<i>.name" | element |
/// history (FP32 [amax_history]) | scale | steps.
void save_delayed(torch::serialize::OutputArchive& ar, const detail::DelayedTraining& d) {
    ar.write("fp8.delayed.count", c10::IValue(int64_t(d.slots.size())));
    int64_t i = 0;
    for (const auto& [name, slot] : d.slots) {
        const std::string k = "fp8.delayed." + std::to_string(i++) + ".";
        ar.write(k + "name", c10::IValue(name));
        ar.write(k + "element", c10::IValue(to_string(slot.element())));
        ar.write(k + "history", at::tensor(slot.history(), at::kFloat));
        ar.write(k + "scale", c10::IValue(double(slot.scale())));
        ar.write(k + "steps", c10::IValue(int64_t(slot.steps())));
    }
}

/// What save_delayed wrote, into `d`; InputError naming the key. False when the checkpoint has
/// no fp8-delayed state at all.
bool load_delayed(torch::serialize::InputArchive& ar, const std::string& path, detail::DelayedTraining& d) {
    c10::IValue count;
    if (!ar.try_read("fp8.delayed.count", count)) return false;
    const auto value = [&](const std::string& key, bool (c10::IValue::*is)() const, const char* expected) {
        c10::IValue v;
        if (!ar.try_read(key, v))
            throw InputError(path, key, "missing: the checkpoint's fp8-delayed state is incomplete");
        if (!(v.*is)()) throw InputError(path, key, std::string("has a ") + v.tagKind() + "; expected " + expected);
        return v;
    };
    const int64_t n = value("fp8.delayed.count", &c10::IValue::isInt, "an integer").toInt();
    if (n < 0 || n > (int64_t(1) << 20))
        throw InputError(path, "fp8.delayed.count", std::to_string(n) + "; expected 0 to 1048576 FP8 tensors");
    if (c10::IValue extra; ar.try_read("fp8.delayed." + std::to_string(n) + ".name", extra))
        throw InputError(path, "fp8.delayed.count",
                         std::to_string(n) + ", yet fp8.delayed." + std::to_string(n) +
                             " is there too; expected the number of FP8 tensors the checkpoint holds");
    d.slots.clear();
    d.restored.clear();
    for (int64_t i = 0; i < n; ++i) {
        const std::string k = "fp8.delayed." + std::to_string(i) + ".";
        const std::string name = value(k + "name", &c10::IValue::isString, "a string").toStringRef();
        if (name.empty()) throw InputError(path, k + "name", "empty; expected the name of an FP8 tensor");
        if (d.slots.count(name))
            throw InputError(path, k + "name", "'" + name + "' comes twice; expected each FP8 tensor once");
        const std::string element = value(k + "element", &c10::IValue::isString, "a string").toStringRef();
        if (element != "e4m3" && element != "e5m2")
            throw InputError(path, k + "element", "'" + element + "'; expected e4m3 or e5m2");
        // the recipe's formats: E5M2 for the gradients, E4M3 for the forward's operands
        const bool gradient = name.size() >= 11 && name.compare(name.size() - 11, 11, "grad_output") == 0;
        if ((element == "e5m2") != gradient)
            throw InputError(path, k + "element",
                             "'" + element + "' for '" + name + "'; expected " + (gradient ? "e5m2" : "e4m3") +
                                 " (fp8-delayed casts gradients to E5M2, a forward's operands to E4M3)");
        const double scale = value(k + "scale", &c10::IValue::isDouble, "a number").toDouble();
        if (!std::isfinite(scale) || !(scale > 0) || scale > std::numeric_limits<float>::max())
            throw InputError(path, k + "scale", c10::str(scale) + "; expected a finite scale > 0");
        const int64_t steps = value(k + "steps", &c10::IValue::isInt, "an integer").toInt();
        if (steps < 0 || steps > std::numeric_limits<int>::max())
            throw InputError(path, k + "steps", std::to_string(steps) + "; expected a count >= 0");
        at::Tensor history;
        if (!ar.try_read(k + "history", history))
            throw InputError(path, k + "history", "missing: the checkpoint's fp8-delayed state is incomplete");
        if (history.dim() != 1 || !at::isFloatingType(history.scalar_type()))
            throw InputError(path, k + "history",
                             "has shape " + c10::str(history.sizes()) + " of " + c10::toString(history.scalar_type()) +
                                 "; expected a 1-D floating tensor of amaxes");
        if (history.size(0) != d.options.amax_history)
            throw InputError(path, k + "history",
                             "holds " + std::to_string(history.numel()) + " steps of amax history; this run keeps " +
                                 std::to_string(d.options.amax_history) +
                                 (history.numel() > 0 && history.numel() <= kMaxAmaxHistory
                                      ? ": resume with an amax history of " + std::to_string(history.numel())
                                      : ": expected 1 to " + std::to_string(kMaxAmaxHistory) + " steps"));
        const auto h = history.to(at::kCPU, at::kFloat).contiguous();
        if ((h < 0).any().item<bool>())  // inf and NaN are what a non-finite step records (the scale then stays)
            throw InputError(path, k + "history", "holds a negative amax; expected amaxes >= 0");
        d.slot(name, element == "e5m2" ? Fp8Element::E5M2 : Fp8Element::E4M3)
            .restore(std::vector<float>(h.data_ptr<float>(), h.data_ptr<float>() + h.numel()), float(scale),
                     int(steps));
        d.restored.insert(name);
    }
    d.used.clear();
    return true;
}

/// Both sides' buffers and parameters from the archive; InputError naming the key of one
/// missing or of another shape.
void restore_tensors(torch::serialize::InputArchive& ar, const std::string& path, const std::string& format,
                     const TrainSpec& s, Side& ref, Side& amp) {
    for (auto* side : {&ref, &amp})
        for (auto& [name, buf] : side->buffers) {
            const std::string key = (side == &ref ? "ref.buffer." : "amp.buffer.") + name;
            at::Tensor t;
            if (!ar.try_read(key, t))
                throw InputError(path, key,
                                 format == "ampscope-checkpoint-1"
                                     ? "missing: checkpoints of this format did not keep buffers (e.g. "
                                       "BatchNorm statistics); resuming would not continue the run faithfully"
                                     : "missing: the checkpoint is for another model than " + s.model);
            if (t.sizes() != buf.sizes())
                throw InputError(path, key,
                                 "has shape " + c10::str(t.sizes()) + "; the model's is " + c10::str(buf.sizes()));
            torch::NoGradGuard ng;
            buf.copy_(t);
        }
    for (auto* side : {&ref, &amp}) {
        const std::string prefix = side == &ref ? "ref." : "amp.";
        for (size_t i = 0; i < side->params.size(); ++i) {
            at::Tensor t;
            if (!ar.try_read(prefix + side->names[i], t))
                throw InputError(path, prefix + side->names[i],
                                 "missing: the checkpoint is for another model than " + s.model);
            if (t.sizes() != side->params[i].sizes())
                throw InputError(path, prefix + side->names[i],
                                 "has shape " + c10::str(t.sizes()) + "; the model's is " +
                                     c10::str(side->params[i].sizes()) + " (another model?)");
            torch::NoGradGuard ng;
            side->params[i].copy_(t);
        }
    }
}

}  // namespace

void save_checkpoint(const std::string& path, const TrainSpec& s, Side& ref, Side& amp, GradScaler& scaler,
                     const detail::DelayedTraining* delayed, const Position& pos, const std::string& weights_hash,
                     const at::Device& device) {
    const int step = pos.step, effective = pos.effective;
    torch::serialize::OutputArchive ar;
    ar.write("ampscope.format", c10::IValue(std::string("ampscope-checkpoint-2")));
    ar.write("data.cursor", c10::IValue(pos.cursor));
    for (auto* side : {&ref, &amp})
        for (const auto& [name, t] : side->buffers)
            ar.write((side == &ref ? "ref.buffer." : "amp.buffer.") + name, t.detach(), true);
    ar.write("model.source", c10::IValue(s.model));
    ar.write("model.weights_sha256_at_start", c10::IValue(weights_hash));
    ar.write("policy", c10::IValue(policy_string(s)));
    ar.write("step", c10::IValue(int64_t(step)));
    ar.write("effective_updates", c10::IValue(int64_t(effective)));
    for (size_t i = 0; i < ref.params.size(); ++i) {
        ar.write("ref." + ref.names[i], ref.params[i].detach());
        ar.write("amp." + amp.names[i], amp.params[i].detach());
    }
    torch::serialize::OutputArchive ro, ao;
    ref.opt->save(ro);
    amp.opt->save(ao);
    ar.write("ref_optimizer", ro);
    ar.write("amp_optimizer", ao);
    const auto st = scaler.state_dict();
    ar.write("scaler.scale", c10::IValue(st.scale));
    ar.write("scaler.growth_factor", c10::IValue(st.growth_factor));
    ar.write("scaler.backoff_factor", c10::IValue(st.backoff_factor));
    ar.write("scaler.growth_interval", c10::IValue(int64_t(st.growth_interval)));
    ar.write("scaler._growth_tracker", c10::IValue(int64_t(st.growth_tracker)));
    if (delayed) save_delayed(ar, *delayed);
    ar.write("rng.cpu", at::detail::getDefaultCPUGenerator().get_state());
    if (device.is_cuda()) ar.write("rng.cuda", at::globalContext().defaultGenerator(device).get_state());
    const std::string tmp = path + ".partial";
    ar.save_to(tmp);
    std::filesystem::rename(tmp, path);
}

namespace {

/// The archive `ar` of checkpoint `path` read key by key, each value checked for its type
/// (InputError naming the key).
struct Reader {
    torch::serialize::InputArchive& ar;
    const std::string& path;

    c10::IValue value(const std::string& key) const {
        c10::IValue v;
        if (!ar.try_read(key, v))
            throw InputError(path, key, "missing from the checkpoint; expected an ampscope checkpoint");
        return v;
    }
    int64_t integer(const std::string& key, int64_t low, int64_t high) const {
        const auto v = value(key);
        if (!v.isInt()) throw InputError(path, key, std::string("has a ") + v.tagKind() + "; expected an integer");
        if (v.toInt() < low || v.toInt() > high)
            throw InputError(path, key,
                             std::to_string(v.toInt()) + "; expected an integer from " + std::to_string(low) + " to " +
                                 std::to_string(high));
        return v.toInt();
    }
    double number(const std::string& key) const {
        const auto v = value(key);
        if (!v.isDouble() && !v.isInt())
            throw InputError(path, key, std::string("has a ") + v.tagKind() + "; expected a number");
        return v.isDouble() ? v.toDouble() : double(v.toInt());
    }
};

/// The checkpoint's GradScaler state, checked as torch.amp.GradScaler's constructor and
/// load_state_dict check it (a finite scale >= 0, growth > 1, backoff in (0, 1), interval >= 1).
ScalerState read_scaler(const Reader& in) {
    ScalerState st;
    st.scale = in.number("scaler.scale");
    // 0 included: a run whose every step overflowed backs the scale off to 0 (FP32 underflow) and saves it
    if (!std::isfinite(st.scale) || !(st.scale >= 0))
        throw InputError(in.path, "scaler.scale", c10::str(st.scale) + "; expected a finite loss scale >= 0");
    st.growth_factor = in.number("scaler.growth_factor");
    if (!std::isfinite(st.growth_factor) || !(st.growth_factor > 1))
        throw InputError(in.path, "scaler.growth_factor",
                         c10::str(st.growth_factor) + "; expected a finite factor > 1");
    st.backoff_factor = in.number("scaler.backoff_factor");
    if (!(st.backoff_factor > 0 && st.backoff_factor < 1))
        throw InputError(in.path, "scaler.backoff_factor",
                         c10::str(st.backoff_factor) + "; expected a factor between 0 and 1");
    st.growth_interval = int(in.integer("scaler.growth_interval", 1, std::numeric_limits<int>::max()));
    st.growth_tracker = int(in.integer("scaler._growth_tracker", 0, st.growth_interval - 1));
    return st;
}

/// The generator states the checkpoint holds, set (a state of another size: InputError).
void restore_rng(torch::serialize::InputArchive& ar, const std::string& path, const at::Device& device) {
    at::Tensor rng;
    for (const bool cuda : {false, true}) {
        const std::string key = cuda ? "rng.cuda" : "rng.cpu";
        if ((cuda && !device.is_cuda()) || !ar.try_read(key, rng)) continue;
        auto gen = cuda ? at::globalContext().defaultGenerator(device) : at::detail::getDefaultCPUGenerator();
        try {
            gen.set_state(rng);
        } catch (const c10::Error& e) {
            const std::string w = e.what_without_backtrace();
            throw InputError(path, key,
                             "not a state of this " + std::string(cuda ? "CUDA" : "CPU") + " generator (" +
                                 w.substr(0, w.find('\n')) + ")");
        }
    }
}

}  // namespace

Resumed load_checkpoint(const std::string& path, const TrainSpec& s, Side& ref, Side& amp, GradScaler& scaler,
                        detail::DelayedTraining* delayed, const at::Device& device) {
    torch::serialize::InputArchive ar;
    try {
        ar.load_from(path);
    } catch (const std::exception& e) {
        std::string w = e.what();
        throw InputError(path, "resume", "not a readable ampscope checkpoint: " + w.substr(0, w.find('\n')));
    }
    const Reader in{ar, path};
    const auto format = in.value("ampscope.format");
    if (!format.isString() ||
        (format.toStringRef() != "ampscope-checkpoint-1" && format.toStringRef() != "ampscope-checkpoint-2"))
        throw InputError(
            path, "ampscope.format",
            "unknown checkpoint format '" + (format.isString() ? format.toStringRef() : format.tagKind()) + "'");
    restore_tensors(ar, path, format.toStringRef(), s, ref, amp);
    torch::serialize::InputArchive ro, ao;
    ar.read("ref_optimizer", ro);
    ar.read("amp_optimizer", ao);
    ref.opt->load(ro);
    amp.opt->load(ao);
    const ScalerState st = read_scaler(in);
    if (scaler.enabled()) scaler.load_state_dict(st);
    restore_rng(ar, path, device);
    Resumed r;
    c10::IValue cursor;
    if (ar.try_read("data.cursor", cursor))
        r.cursor = in.integer("data.cursor", 0, std::numeric_limits<int64_t>::max());
    r.step = int(in.integer("step", 0, std::numeric_limits<int>::max()));
    if (r.step >= s.steps)  // steps: the total a resumed run goes on to
        throw InputError("", "steps",
                         std::to_string(s.steps) + "; the checkpoint " + path + " is at step " +
                             std::to_string(r.step) + ": expected more (the total a resumed run continues to)");
    r.effective = int(in.integer("effective_updates", 0, r.step));  // updates that were not skipped
    const auto policy = in.value("policy");
    if (!policy.isString())
        throw InputError(path, "policy", std::string("has a ") + policy.tagKind() + "; expected a string");
    r.policy = policy.toStringRef();
    r.policy_changed = r.policy != policy_string(s);
    if (delayed && !load_delayed(ar, path, *delayed)) {
        if (!r.policy_changed)
            throw InputError(path, "fp8.delayed.count",
                             "missing: an fp8-delayed checkpoint without its amax histories");
        r.warning = "fp8-delayed: the checkpoint holds no amax history (it was written under " + r.policy +
                    "); the histories start empty, so the first step casts with scale 1";
    }
    return r;
}

void delayed_resume_warnings(detail::DelayedTraining& d, bool policy_changed, std::vector<std::string>& warnings) {
    const auto listed = [](const std::vector<std::string>& names) {
        std::string out;
        for (size_t i = 0; i < names.size() && i < 3; ++i) out += (i ? ", '" : "'") + names[i] + "'";
        return out + (names.size() > 3 ? ", ..." : "");
    };
    std::vector<std::string> unused, fresh;
    for (const auto& name : d.restored)
        if (!d.used.count(name)) unused.push_back(name);
    for (const auto& name : d.used)
        if (!d.restored.count(name)) fresh.push_back(name);
    if (!unused.empty())
        warnings.push_back("fp8-delayed: the checkpoint's amax histories of " + std::to_string(unused.size()) +
                           " FP8 tensors match none the model cast in its first resumed step (" + listed(unused) +
                           "): not used" +
                           (policy_changed ? " (the checkpoint was written under another precision policy)"
                                           : " (a module that did not run in that step, or a checkpoint of another "
                                             "model)"));
    if (!fresh.empty())
        warnings.push_back("fp8-delayed: " + std::to_string(fresh.size()) +
                           " FP8 tensors the model casts have no amax history in the checkpoint (" + listed(fresh) +
                           "): theirs started empty, the first step casting them with scale 1");
    d.restored.clear();
    d.used.clear();
}

}  // namespace ampscope::train_parts
