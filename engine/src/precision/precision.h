// SPDX-License-Identifier: MIT
#pragma once
// precision/ owns how a pass's precision policy is applied: the RAII autocast region (as
// torch.autocast does it), the thread-local pass context (module scope, FP32 regions) with its
// RAII scope, and FP32 regions (--keep-fp32) matched against module paths.

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ampscope/engine/run.h"
#include "ampscope/engine/types.h"

namespace ampscope::detail {

/// FP32 regions (--keep-fp32) against the model's module paths (`info.modules`; a model without
/// module scopes has none to keep): each glob non-empty, matching at least one module and not
/// the root (which would run the whole model in FP32). model.h has the overload for a Model.
/// `list` / `kept_in`: the field and the precision of another such list (keep_bf16, "BF16").
void check_fp32_regions(const ModelInfo& info, bool has_module_scopes, const std::vector<std::string>& globs,
                        const std::string& list = "keep_fp32", const std::string& kept_in = "FP32");

/// The FP8 passes' BF16 list (RunSpec::keep_bf16, field keep_bf16) as check_fp32_regions checks
/// FP32 regions, and refused when none of `precisions` is an FP8 pass (nothing to keep out of FP8).
void check_bf16_modules(const ModelInfo& info, bool has_module_scopes, const std::vector<std::string>& globs,
                        const std::vector<Precision>& precisions);

/// A glob given in both lists (keep_fp32, keep_bf16): InputError naming keep_bf16[i]. (A module
/// that globs of both lists match runs in FP32: an FP32 region is outside autocast.)
void check_kept_once(const std::vector<std::string>& keep_fp32, const std::vector<std::string>& keep_bf16);

/// Whether `path` matches any of the globs (fnmatch; '*' also crosses dots).
bool matches_any(const std::string& path, const std::vector<std::string>& globs);

/// `path` is `module` or one of its submodules (every path is within the root "").
bool within(const std::string& path, const std::string& module);

/// Whether ops attributed to module `path` run without autocast in an AMP pass: inside an FP32
/// region (a region covers its submodules) or, in a pass that runs only one module under
/// autocast (the advisor's sensitivity passes), outside that module.
bool runs_fp32(const std::string& path, const std::vector<std::string>& keep_fp32,
               const std::optional<std::string>& amp_only);
/// The innermost kept module (FP32 region) that `path` lies in; nullopt when none. Values
/// produced inside it are not cast when they enter one of its ops: a region is
/// `torch.autocast(enabled=False)` around the module plus a cast of the module's floating
/// inputs, so an explicit `.half()` inside it stays half.
std::optional<std::string> fp32_region_of(const std::string& path, const std::vector<std::string>& keep_fp32);

// ---- module scopes (demo models) and FP32 regions -------------------------------------

/// Thread-local state of the running pass: module-path stack and FP32 regions.
struct PassContext {
    std::vector<std::string> scope;      ///< innermost last
    std::vector<std::string> keep_fp32;  ///< globs
    /// FP8 passes: globs whose linear layers stay in BF16 autocast, not quantized (precision/fp8_pass.h).
    std::vector<std::string> keep_bf16;
    std::vector<std::string> regions_hit;  ///< module paths that ran in FP32
    /// Set: autocast applies only inside this module, everything else runs in FP32.
    std::optional<std::string> amp_only;
    at::DeviceType device_type = at::kCPU;
    bool observing = false;  ///< an OpObserver is active (TorchScript then runs instrumented)
    /// Module scopes wanted without observing: fp8-delayed training names its FP8 tensors by
    /// module (TorchScript then runs instrumented).
    bool module_names = false;
    /// Rows the model runs the current batch as, when it pads the batch (a torch.export program
    /// with a static batch: copies of the last row); 0 = as given. Only the rows the observer's
    /// batch names are samples: the observer leaves the padding rows out.
    int64_t padded_rows = 0;
    /// fp8-delayed: each GEMM operand's delayed scaling (its amax history) across the pass's
    /// batches, keyed by module (or call index) and operand (precision/fp8_pass.cpp).
    std::map<std::string, DelayedScaling> fp8_delayed;
};
PassContext& pass_context();

/// Sets the calling thread's pass context for one pass or phase (fresh scope stack and
/// regions, the given device, FP32 regions and observation) and restores the previous context
/// on exit, also when an exception leaves, so regions or observation can never leak into the
/// next pass. Nested scopes (a diagnostic re-run inside a training step) restore in order.
class PassScope {
public:
    /// keep_bf16: an FP8 pass's modules left in BF16 (PassContext::keep_bf16; empty for other passes).
    PassScope(at::DeviceType device_type, std::vector<std::string> keep_fp32, bool observing,
              std::vector<std::string> keep_bf16 = {});
    ~PassScope();
    PassScope(const PassScope&) = delete;
    PassScope& operator=(const PassScope&) = delete;
    PassContext& context() { return pass_context(); }

private:
    PassContext saved_;
};

/// Enters a module scope: pushes its path and, when the path is an FP32 region and
/// autocast is on, turns autocast off for the scope (restored on exit).
class ModuleScope {
public:
    explicit ModuleScope(const std::string& path);
    ~ModuleScope();
    ModuleScope(const ModuleScope&) = delete;
    ModuleScope& operator=(const ModuleScope&) = delete;
    /// True when this scope runs without autocast (inputs must be cast to FP32).
    bool fp32() const { return fp32_; }

private:
    bool fp32_ = false;
    bool changed_ = false;  ///< autocast state switched for this scope (restored on exit)
    bool prev_enabled_ = false;
};

/// Calls fn(x) inside the module scope `path`, casting a floating input to FP32 when the
/// scope is an FP32 region (as torch.autocast(enabled=False) plus an explicit cast).
at::Tensor scoped(const std::string& path, const at::Tensor& x, const std::function<at::Tensor(const at::Tensor&)>& fn);

at::ScalarType dtype_of(Precision p);

/// RAII autocast region, as Python's torch.autocast(device, dtype, enabled) does it:
/// saves enabled/dtype/cache flag, increments nesting, and on exit clears the cast cache
/// when the outermost region ends, then restores the previous state.
class AutocastGuard {
public:
    /// A pass's policy: autocast to the precision's dtype, or off for FP32. `cache`: the
    /// weights' casts are kept until the region ends (torch.autocast's cache_enabled); without
    /// it each use casts again (same values) and a cast weight is freed after its op.
    AutocastGuard(at::DeviceType dt, Precision p, bool cache = true)
        : AutocastGuard(dt, p != Precision::Fp32,
                        p != Precision::Fp32 ? dtype_of(p) : at::autocast::get_autocast_dtype(dt), cache) {}
    /// An explicit region, as a model's own torch.autocast(device, dtype, enabled, cache_enabled).
    AutocastGuard(at::DeviceType dt, bool enabled, at::ScalarType dtype, bool cache) : dt_(dt) {
        prev_enabled_ = at::autocast::is_autocast_enabled(dt_);
        prev_dtype_ = at::autocast::get_autocast_dtype(dt_);
        prev_cache_ = at::autocast::is_autocast_cache_enabled();
        at::autocast::set_autocast_dtype(dt_, dtype);
        at::autocast::set_autocast_enabled(dt_, enabled);
        at::autocast::increment_nesting();
        at::autocast::set_autocast_cache_enabled(cache);
    }
    ~AutocastGuard() {
        if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
        at::autocast::set_autocast_enabled(dt_, prev_enabled_);
        at::autocast::set_autocast_dtype(dt_, prev_dtype_);
        at::autocast::set_autocast_cache_enabled(prev_cache_);
    }
    AutocastGuard(const AutocastGuard&) = delete;
    AutocastGuard& operator=(const AutocastGuard&) = delete;

private:
    at::DeviceType dt_;
    bool prev_enabled_ = false, prev_cache_ = true;
    at::ScalarType prev_dtype_ = at::kFloat;
};

}  // namespace ampscope::detail
