// SPDX-License-Identifier: MIT
// The advisor's passes (advise/, see search.cpp): one FP32 reference with every candidate's
// output captured, the plain AMP passes (the verdict to fix, origins), one more FP32 pass (can
// FP32 itself meet the criteria?), a sensitivity pass per candidate and precision (autocast
// only inside that module, so its inputs are exactly the reference's), then the search, each
// candidate set checked by real AMP passes against the same reference.
//
// Sensitivity is measured the same way for every model format (demo zoo, TorchScript,
// torch.export): the pass's FP32 regions are inverted, which each format's interpreter applies
// per op (TorchScript and torch.export per graph node, the demo zoo per module scope), and the
// module's output is the output of its last op, captured by the op observer. One pass per
// module and precision; exact, as no op upstream of the module runs under autocast.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "ampscope/engine/advise.h"
#include "ampscope/engine/hash.h"
#include "ampscope/engine/compare.h"
#include "ampscope/engine/errors.h"
#include "ampscope/engine/text.h"
#include "precision/precision.h"
#include "run/comparison.h"
#include "run/pass.h"

namespace ampscope {
namespace detail {
namespace {

using Outputs = std::map<std::string, std::vector<at::Tensor>>;

std::string key_of(std::vector<std::string> set) {
    std::sort(set.begin(), set.end());
    std::string k;
    for (const auto& s : set) k += s + '\n';
    return k;
}

/// The first criterion a comparison fails ("" when it is accepted).
const CriterionResult* first_failure(const Comparison& c) {
    for (const auto& r : c.criteria)
        if (!r.passed) return &r;
    return nullptr;
}

/// SQNR, relative error, overflow and underflow of `amp` against `ref` (same shapes).
ModuleSensitivity measure(const std::vector<at::Tensor>& ref, const std::vector<at::Tensor>& amp) {
    ModuleSensitivity s;
    double signal = 0, noise = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        const auto r = ref[i].to(at::kDouble), a = amp[i].to(at::kDouble);
        const auto finite_ref = r.isfinite();
        s.overflow += (finite_ref & a.isfinite().logical_not()).sum().item<int64_t>();
        s.underflow += ((r != 0) & (a == 0) & finite_ref).sum().item<int64_t>();
        s.elements += r.numel();
        const auto both = finite_ref & a.isfinite();
        signal += r.masked_select(finite_ref).pow(2).sum().item<double>();
        noise += (a - r).masked_select(both).pow(2).sum().item<double>();
    }
    const double inf = std::numeric_limits<double>::infinity();
    if (s.overflow > 0) noise = inf;  // a non-finite output is the largest error there is
    s.rel_error = signal > 0 ? std::sqrt(noise / signal) : (noise > 0 ? inf : 0.0);
    s.sqnr_db = noise == 0 ? inf : noise == inf ? -inf : 10.0 * std::log10(signal / noise);
    return s;
}

class Advisor {
public:
    Advisor(const AdviseSpec& spec, ProgressObserver* progress, AdviseResult& res)
        : spec_(spec), progress_(progress), res_(res), run_(spec.run, nullptr, progress) {}

    void run() {
        const auto& ps = spec_.run.precisions;
        fp8_ = !ps.empty() && is_fp8(ps.front());
        for (auto p : ps)
            if (is_fp8(p) != fp8_)
                throw InputError("", "precision",
                                 "'" + to_string(p) + "' beside '" + to_string(ps.front()) +
                                     "': an FP8 recipe's set is kept in BF16, an fp16/bf16 pass's in FP32; expected "
                                     "FP8 recipes only or fp16/bf16 only (advise them one after the other; for a "
                                     "recorded run with both, its model and probes with one kind of precision)");
        res_.kept_in = fp8_ ? Precision::Bf16 : Precision::Fp32;
        kept_ = fp8_ ? "BF16" : "FP32";
        run_.fix_criteria();
        run_.choose_backend();
        same_model_file_as_recorded();
        run_.load_inputs();
        res_.backend = run_.res.backend;
        res_.model = run_.res.model;
        res_.warnings = run_.res.warnings;  // the model's own (weights not float32, a static batch, ...)
        same_inputs_as_recorded();
        candidates_ = candidate_modules(run_.model->info.modules, spec_.granularity);
        if (!run_.model->has_module_scopes() || candidates_.empty())
            throw InputError("", "granularity",
                             "the model has no submodules at granularity " + to_string(spec_.granularity) +
                                 " (expected a model with named submodules, as named_modules() lists them)");
        if (!reference()) return;
        if (plain_amp()) return;
        if (!fp32_meets_criteria()) return;
        sensitivity();
        search();
    }

private:
    [[noreturn]] void changed(const std::string& file, const char* what, const std::string& then,
                              const std::string& current) const {
        throw InputError(file, "sha256",
                         std::string("the ") + what + " changed since run " + spec_.recorded_run +
                             " was recorded (sha256 " + then.substr(0, 12) + " then, " + current.substr(0, 12) +
                             " now); expected the file that run used");
    }

    /// Before the model file is loaded: a file replaced since the run is named as such, not by
    /// what the new one lacks (the recorded output name, a shape the probes fit).
    void same_model_file_as_recorded() const {
        const auto& model = spec_.run.model;
        if (spec_.recorded_run.empty() || model.rfind("demo:", 0) == 0 || spec_.recorded_model.sha256.empty()) return;
        std::error_code ec;
        if (!std::filesystem::is_regular_file(model, ec)) return;  // the loader names what is wrong with it
        const std::string now = sha256_file(model);
        if (now != spec_.recorded_model.sha256) changed(model, "model", spec_.recorded_model.sha256, now);
    }

    /// A recorded run's advice is about the files that run used: a model or probe set
    /// replaced since is refused, never silently advised in its place.
    void same_inputs_as_recorded() const {
        if (spec_.recorded_run.empty()) return;
        const auto& now = run_.res;
        const auto& m = spec_.recorded_model;
        if (now.model.sha256 != m.sha256) changed(spec_.run.model, "model", m.sha256, now.model.sha256);
        if (now.model.weights_sha256 != m.weights_sha256)
            changed(spec_.run.model, "model's weights", m.weights_sha256, now.model.weights_sha256);
        if (now.probes.sha256 != spec_.recorded_probes.sha256)
            changed(spec_.run.probes, "probe set", spec_.recorded_probes.sha256, now.probes.sha256);
    }

    void stage(const char* name, int done, int total) {
        if (progress_) {
            if (progress_->cancel_requested()) throw Cancelled();
            progress_->progress(name, done, total);
        }
    }

    void finish(AdviseResult::Outcome o, std::string message) {
        res_.outcome = o;
        res_.message = std::move(message);
    }

    bool reference() {
        stage("reference", 0, 1);
        run_.capture_modules = candidates_;
        run_.module_outputs = &ref_outputs_;
        const bool ok = run_.reference(ref_);
        ++res_.passes_used;
        // Modules with ops of their own outside every candidate (e.g. an attention module's
        // matmuls around its qkv and proj leaves) are candidates too: else no set could reach them.
        for (const auto& l : ref_.layers) {
            const bool covered = std::any_of(candidates_.begin(), candidates_.end(),
                                             [&](const std::string& c) { return within(l.module, c); });
            if (!l.module.empty() && !covered && std::find(owners_.begin(), owners_.end(), l.module) == owners_.end())
                owners_.push_back(l.module);
        }
        if (!ok)
            finish(AdviseResult::Outcome::InvalidReference,
                   "the FP32 reference is not finite for " + std::to_string(ref_.nonfinite_samples.size()) +
                       " samples (first: " + ref_.nonfinite_samples.front() + "); no " + kept_ +
                       " set can be judged against a broken reference: fix the model or the probes first");
        return ok;
    }

    PassResult amp_pass(Precision p, const std::vector<std::string>& keep, bool inspect) {
        PassOptions o = run_.options();
        o.precision = p;
        auto& globs = fp8_ ? o.keep_bf16 : o.keep_fp32;  // an FP8 recipe's set is left out of FP8, in BF16
        globs.clear();
        for (const auto& m : keep) globs.push_back(exact_glob(m));  // module paths, not globs
        o.inspect = inspect;
        ++res_.passes_used;
        return run_.pass(o, false);
    }

    /// The AMP passes without FP32 regions: the verdict to fix, and where non-finite values are born.
    bool plain_amp() {
        std::vector<Comparison> cmps;
        bool accepted = true;
        for (auto p : spec_.run.precisions) {
            stage("amp passes", int(cmps.size()), int(spec_.run.precisions.size()));
            const PassResult amp = amp_pass(p, {}, true);
            if (amp.origin && amp.origin->stage == "forward") origins_[p] = amp.origin->module;
            cmps.push_back(run_.compare_pass(ref_, amp));
            accepted = accepted && cmps.back().verdict == Verdict::Accepted;
        }
        evaluated_[key_of({})] = cmps;
        if (accepted) {
            res_.final_comparisons = cmps;
            finish(AdviseResult::Outcome::AlreadyAccepted,
                   "the AMP passes already meet the criteria: nothing needs to stay in " + kept_);
        }
        return accepted;
    }

    /// A second FP32 pass against the reference: criteria FP32 itself cannot meet (a quality
    /// threshold above the model's own, decisions that change between identical passes).
    bool fp32_meets_criteria() {
        stage("fp32 check", 0, 1);
        PassResult again = run_.pass(run_.options(), false);
        ++res_.passes_used;
        const Comparison c = run_.compare_pass(ref_, again);
        if (const auto* f = first_failure(c)) {
            finish(AdviseResult::Outcome::Fp32CannotPass, "FP32 itself does not meet the criteria (" + f->name + ": " +
                                                              f->detail + "), so no set kept in " + kept_ +
                                                              " can; change the criteria, not the precision");
            return false;
        }
        return true;
    }

    /// The outputs of module `m` over the probes: an FP32 pass, or (AMP) one with autocast only inside `m`.
    std::vector<at::Tensor> module_outputs(const std::string& m, Precision p) {
        PassOptions o = run_.options();
        o.precision = p;
        o.inspect = true;
        if (p != Precision::Fp32) o.amp_only = m;
        o.capture_modules = {m};
        Outputs out;
        o.module_outputs = &out;
        ++res_.passes_used;
        run_.pass(o, false);
        return std::move(out[m]);
    }

    /// One module under autocast on the reference's inputs to it, against its FP32 output.
    void measure_module(const std::string& m, const std::vector<at::Tensor>& ref, Precision p, int order) {
        if (ref.empty()) return;  // never ran on the probes (e.g. an unused branch)
        const auto amp = module_outputs(m, p);
        bool same = amp.size() == ref.size();
        for (size_t k = 0; same && k < amp.size(); ++k) same = amp[k].sizes() == ref[k].sizes();
        if (!same) return;
        ModuleSensitivity s = measure(ref, amp);
        s.module = m;
        s.precision = p;
        s.order = order;
        s.origin = origins_.count(p) && within(origins_[p], m);
        res_.sensitivity.push_back(s);
    }

    /// Execution order of the candidates and of the modules owning ops outside them: the index of
    /// each one's first op in the reference pass.
    std::map<std::string, int> execution_order() const {
        std::vector<std::pair<int, std::string>> first;
        for (const auto* list : {&candidates_, &owners_})
            for (const auto& m : *list) {
                int at = int(ref_.layers.size());
                for (const auto& l : ref_.layers)
                    if (within(l.module, m)) {
                        at = l.index;
                        break;
                    }
                first.emplace_back(at, m);
            }
        std::stable_sort(first.begin(), first.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        std::map<std::string, int> order;
        for (size_t i = 0; i < first.size(); ++i) order[first[i].second] = int(i);
        return order;
    }

    void sensitivity() {
        const auto order = execution_order();
        const int total = int((candidates_.size() + owners_.size()) * spec_.run.precisions.size());
        int done = 0;
        for (auto p : spec_.run.precisions)
            for (const auto& m : candidates_) {
                stage("sensitivity", done++, total);
                measure_module(m, ref_outputs_[m], p, order.at(m));
            }
        // Owners contain candidates, so their outputs are captured one owner a pass (FP32).
        for (const auto& m : owners_) {
            const auto ref = module_outputs(m, Precision::Fp32);
            for (auto p : spec_.run.precisions) {
                stage("sensitivity", done++, total);
                measure_module(m, ref, p, order.at(m));
            }
        }
        std::stable_sort(res_.sensitivity.begin(), res_.sensitivity.end(),
                         [](const ModuleSensitivity& a, const ModuleSensitivity& b) {
                             if (a.overflow != b.overflow) return a.overflow > b.overflow;
                             return a.sqnr_db < b.sqnr_db;
                         });
    }

    /// Search order: candidates holding an origin first, then by sensitivity (worst first), then
    /// the rest in execution order, then the modules owning ops outside the candidates.
    std::vector<std::string> search_order() const {
        std::vector<std::string> order;
        auto add = [&](const std::string& m) {
            if (std::find(order.begin(), order.end(), m) == order.end()) order.push_back(m);
        };
        auto candidate = [&](const std::string& m) {
            return std::find(candidates_.begin(), candidates_.end(), m) != candidates_.end();
        };
        for (const auto& s : res_.sensitivity)
            if (s.origin && candidate(s.module)) add(s.module);
        for (const auto& s : res_.sensitivity)
            if (candidate(s.module)) add(s.module);
        for (const auto& m : candidates_) add(m);
        // modules owning ops outside the candidates last (they cover their children: the search
        // reaches for them only when the candidates' own regions cannot pass)
        for (const auto& s : res_.sensitivity) add(s.module);
        for (const auto& m : owners_) add(m);
        return order;
    }

    /// A set checked by real AMP passes (stops at the first precision that fails).
    bool passes(const std::vector<std::string>& set) {
        auto& cmps = evaluated_[key_of(set)];
        cmps.clear();
        stage("search", res_.evaluations, res_.evaluations + 1);
        ++res_.evaluations;
        for (auto p : spec_.run.precisions) {
            const PassResult amp = amp_pass(p, set, false);
            cmps.push_back(run_.compare_pass(ref_, amp));
            if (cmps.back().verdict != Verdict::Accepted) return false;
        }
        return true;
    }

    void search() {
        res_.candidates = search_order();
        // the empty set is the plain AMP passes, already rejected: not evaluated again
        const auto found = minimal_passing_set(
            res_.candidates, [&](const std::vector<std::string>& s) { return passes(s); }, true);
        if (!found.found) {
            const auto& cmps = evaluated_[key_of(res_.candidates)];
            const auto* f = cmps.empty() ? nullptr : first_failure(cmps.back());
            finish(AdviseResult::Outcome::WholeModelOnly,
                   "even with all " + std::to_string(res_.candidates.size()) + " candidate modules (granularity " +
                       to_string(spec_.granularity) + ", and every module with ops of its own) in " + kept_ +
                       " the AMP passes fail" + (f ? " (" + f->name + ": " + f->detail + ")" : std::string()) +
                       (fp8_ ? std::string(": the linears outside these modules (the root module's own forward), or "
                                           "BF16 itself, break the criteria; a bf16 pass shows which")
                             : std::string(": ops outside these modules (the root module's own forward) break the "
                                           "criteria, so only the whole model in FP32 passes")));
            return;
        }
        for (const auto& m : run_.model->info.modules)  // named_modules() order
            if (std::find(found.set.begin(), found.set.end(), m) != found.set.end()) res_.keep_fp32.push_back(m);
        res_.final_comparisons = evaluated_[key_of(res_.keep_fp32)];
        explain();
        shares();
        finish(AdviseResult::Outcome::Found, std::to_string(res_.keep_fp32.size()) + " module" +
                                                 (res_.keep_fp32.size() == 1 ? "" : "s") + " kept in " + kept_ +
                                                 " make every AMP pass meet the criteria; dropping any one fails");
    }

    /// Why each member is needed: the criterion that fails without it.
    void explain() {
        for (const auto& m : res_.keep_fp32) {
            auto without = res_.keep_fp32;
            without.erase(std::find(without.begin(), without.end(), m));
            AdviceReason r{m, "tolerance", ""};
            const auto it = evaluated_.find(key_of(without));
            const CriterionResult* f = nullptr;
            Precision p = Precision::Fp16;
            if (it != evaluated_.end())
                for (const auto& c : it->second)
                    if ((f = first_failure(c))) {
                        p = c.precision;
                        break;
                    }
            const ModuleSensitivity* s = nullptr;
            for (const auto& x : res_.sensitivity)
                if (x.module == m && x.precision == p) s = &x;
            if (f) r.detail = to_string(p) + ": " + f->name + ": " + f->detail;
            const std::string name = f ? f->name : "";
            if (s && s->origin && name == "finite_outputs")
                r.why = "origin";
            else if (name == "finite_outputs")
                r.why = s && s->overflow > 0 ? "overflow" : "nonfinite";
            else if (name == "decision_flips")
                r.why = "flips";
            else if (name == "quality")
                r.why = "quality";
            res_.reasons.push_back(r);
        }
    }

    /// The share of ops and FLOPs the set keeps: in FP32, ops that ran with autocast off; for an
    /// FP8 recipe, of the linear layers (the GEMMs the recipes quantize; with fp8_all_gemms the
    /// model's own products too), those left out in BF16.
    void shares() {
        stage("shares", 0, 1);
        const PassResult p = amp_pass(spec_.run.precisions.front(), res_.keep_fp32, true);
        double ops = 0, fp32_ops = 0, flops = 0, fp32_flops = 0;
        for (const auto& l : p.layers) {
            if (fp8_ && !quantized_op(l.op)) continue;  // the share is of the GEMMs the pass quantizes
            ops += 1;
            flops += l.flops;
            const bool kept = fp8_ ? std::any_of(res_.keep_fp32.begin(), res_.keep_fp32.end(),
                                                 [&](const std::string& m) { return within(l.module, m); })
                                   : !l.autocast;
            if (kept) fp32_ops += 1, fp32_flops += l.flops;
        }
        res_.fp32_share_ops = ops > 0 ? fp32_ops / ops : 0;
        res_.fp32_share_flops = flops > 0 ? fp32_flops / flops : 0;
    }

    /// Whether the FP8 passes quantize an op of this name: a linear, or with fp8_all_gemms a product.
    bool quantized_op(const std::string& op) const {
        if (op == "aten::linear") return true;
        if (!spec_.run.fp8_all_gemms) return false;
        if (op == "aten::conv1d" || op == "aten::conv2d" || op == "aten::conv3d") {  // per-tensor recipes only
            const Precision p = spec_.run.precisions.front();
            return p == Precision::Fp8 || p == Precision::Fp8Delayed;
        }
        return op == "aten::addmm" || op == "aten::mm" || op == "aten::bmm" || op == "aten::baddbmm";
    }

    const AdviseSpec& spec_;
    ProgressObserver* progress_;
    AdviseResult& res_;
    ComparisonRun run_;
    PassResult ref_;
    Outputs ref_outputs_;
    std::vector<std::string> candidates_;
    std::vector<std::string> owners_;  ///< modules owning ops outside every candidate
    std::map<Precision, std::string>
        origins_;  ///< per precision: the module where the plain AMP pass's non-finite values are born
    std::map<std::string, std::vector<Comparison>> evaluated_;
    bool fp8_ = false;           ///< FP8 recipes: the set is kept in BF16 (RunSpec::keep_bf16), else in FP32
    std::string kept_ = "FP32";  ///< where, in messages
};

}  // namespace
}  // namespace detail

AdviseSpec advise_spec_of(const RunResult& r, Granularity granularity) {
    AdviseSpec a;
    a.granularity = granularity;
    a.run = r.spec;
    a.run.criteria = r.criteria;  // as fixed before that run's first pass
    a.run.criteria.fixed_at.clear();
    a.run.keep_fp32.clear();
    a.run.keep_bf16.clear();
    a.run.fp8_what_if = false;  // statistics the advice does not use
    if (std::none_of(a.run.precisions.begin(), a.run.precisions.end(), [](Precision p) { return is_fp8(p); }))
        a.run.fp8_all_gemms = false;  // it served the what-if alone
    a.run.advised_from = r.run_id;
    a.recorded_run = r.run_id;
    a.recorded_model = r.model;
    a.recorded_probes = r.probes;
    return a;
}

AdviseResult advise(const AdviseSpec& spec, ProgressObserver* progress, AdviseResult* partial) {
    AdviseResult local;
    AdviseResult& res = partial ? *partial : local;
    res = AdviseResult{};
    detail::Advisor(spec, progress, res).run();
    if (res.outcome == AdviseResult::Outcome::Found && spec.verify) apply_verification(res, spec.verify(res.keep_fp32));
    return res;
}

}  // namespace ampscope
