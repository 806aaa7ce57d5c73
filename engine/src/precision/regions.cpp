// SPDX-License-Identifier: MIT
// FP32 regions and the thread-local pass context: which modules run without autocast, the
// module scope the observer attributes ops to, and the RAII scopes that set and restore both.
#include <fnmatch.h>

#include <algorithm>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/text.h"
#include "precision/precision.h"

namespace ampscope::detail {

at::ScalarType dtype_of(Precision p) {
    return p == Precision::Fp16 ? at::kHalf : p == Precision::Bf16 ? at::kBFloat16 : at::kFloat;
}

bool matches_any(const std::string& path, const std::vector<std::string>& globs) {
    for (const auto& g : globs)  // a glob holding a NUL (a JSON "\u0000") matches nothing, not its start
        if (g.find('\0') == std::string::npos && fnmatch(g.c_str(), path.c_str(), 0) == 0) return true;
    return false;
}

bool within(const std::string& path, const std::string& module) {
    return module.empty() || path == module ||
           (path.size() > module.size() && path.compare(0, module.size(), module) == 0 && path[module.size()] == '.');
}

bool runs_fp32(const std::string& path, const std::vector<std::string>& keep_fp32,
               const std::optional<std::string>& amp_only) {
    if (amp_only && !within(path, *amp_only)) return true;
    if (keep_fp32.empty()) return false;
    for (std::string p = path;;) {  // a region covers its submodules
        if (matches_any(p, keep_fp32)) return true;
        const auto dot = p.rfind('.');
        if (dot == std::string::npos) return false;
        p = p.substr(0, dot);
    }
}

std::optional<std::string> fp32_region_of(const std::string& path, const std::vector<std::string>& keep_fp32) {
    if (keep_fp32.empty()) return std::nullopt;
    for (std::string p = path;;) {
        if (!p.empty() && matches_any(p, keep_fp32)) return p;
        const auto dot = p.rfind('.');
        if (dot == std::string::npos) return std::nullopt;
        p = p.substr(0, dot);
    }
}

void check_fp32_regions(const ModelInfo& info, bool has_module_scopes, const std::vector<std::string>& globs,
                        const std::string& list, const std::string& kept_in) {
    if (globs.empty()) return;
    if (!has_module_scopes) throw InputError("", list, "this model has no module scopes to keep in " + kept_in);
    std::string listing;  // the module paths that exist, for the message
    size_t shown = 0;
    for (const auto& m : info.modules)
        if (!m.empty() && shown++ < 40) listing += (listing.empty() ? "" : ", ") + m;
    if (shown > 40) listing += ", ... (" + std::to_string(shown) + " modules)";
    for (size_t i = 0; i < globs.size(); ++i) {
        const auto& g = globs[i];
        const std::string field =
            list + "[" + std::to_string(i) + "]";  // which glob: the CLI tells a flag's from a file's
        if (g.empty())
            throw InputError("", field,
                             "an empty glob; expected a module path or glob such as 'blocks.1.*'. Modules of " +
                                 info.source + ": " + listing);
        if (matches_any("", {g}))
            throw InputError("", field,
                             "'" + visible_controls(clip_echo(g)) +
                                 "' matches the root module, which would run the whole model in " + kept_in +
                                 "; "
                                 "expected submodules. Modules of " +
                                 info.source + ": " + listing);
        bool hit = false;
        for (const auto& m : info.modules) hit = hit || (!m.empty() && matches_any(m, {g}));
        if (!hit)
            throw InputError("", field,
                             "'" + visible_controls(clip_echo(g)) + "' matches no module of " + info.source +
                                 "; modules: " + listing);
    }
}

void check_bf16_modules(const ModelInfo& info, bool has_module_scopes, const std::vector<std::string>& globs,
                        const std::vector<Precision>& precisions) {
    if (globs.empty()) return;
    if (std::none_of(precisions.begin(), precisions.end(), [](Precision p) { return is_fp8(p); }))
        throw InputError("", "keep_bf16",
                         "modules kept in BF16 out of an FP8 pass, but the run has no FP8 pass; expected a precision "
                         "among fp8, fp8-delayed, fp8-rowwise, mxfp8, nvfp4 (modules kept in FP32 are another list)");
    check_fp32_regions(info, has_module_scopes, globs, "keep_bf16", "BF16");
}

void check_kept_once(const std::vector<std::string>& keep_fp32, const std::vector<std::string>& keep_bf16) {
    for (size_t i = 0; i < keep_bf16.size(); ++i)
        if (std::find(keep_fp32.begin(), keep_fp32.end(), keep_bf16[i]) != keep_fp32.end())
            throw InputError("", "keep_bf16[" + std::to_string(i) + "]",
                             "'" + visible_controls(clip_echo(keep_bf16[i])) +
                                 "' is also kept in FP32 (keep_fp32); expected each module in one list: FP32 keeps it "
                                 "out of autocast, BF16 only out of the FP8 recipe");
}

PassContext& pass_context() {
    thread_local PassContext ctx;
    return ctx;
}

ModuleScope::ModuleScope(const std::string& path) {
    auto& ctx = pass_context();
    ctx.scope.push_back(path);
    prev_enabled_ = at::autocast::is_autocast_enabled(ctx.device_type);
    if (ctx.amp_only) {  // one module under autocast, everything else in FP32 (inputs cast)
        fp32_ = !within(path, *ctx.amp_only);
        if (fp32_ == prev_enabled_) {
            changed_ = true;
            at::autocast::set_autocast_enabled(ctx.device_type, !fp32_);
        }
        return;
    }
    if (prev_enabled_ && matches_any(path, ctx.keep_fp32)) {
        fp32_ = changed_ = true;
        at::autocast::set_autocast_enabled(ctx.device_type, false);
        ctx.regions_hit.push_back(path);
    }
}

ModuleScope::~ModuleScope() {
    auto& ctx = pass_context();
    if (changed_) at::autocast::set_autocast_enabled(ctx.device_type, prev_enabled_);
    ctx.scope.pop_back();
}

at::Tensor scoped(const std::string& path, const at::Tensor& x,
                  const std::function<at::Tensor(const at::Tensor&)>& fn) {
    ModuleScope s(path);
    if (s.fp32() && x.is_floating_point() && x.scalar_type() != at::kFloat) return fn(x.to(at::kFloat));
    return fn(x);
}

PassScope::PassScope(at::DeviceType device_type, std::vector<std::string> keep_fp32, bool observing,
                     std::vector<std::string> keep_bf16) {
    auto& ctx = pass_context();
    saved_ = std::move(ctx);
    ctx = PassContext{};
    ctx.device_type = device_type;
    ctx.keep_fp32 = std::move(keep_fp32);
    ctx.keep_bf16 = std::move(keep_bf16);
    ctx.observing = observing;
}

PassScope::~PassScope() {
    pass_context() = std::move(saved_);
}

}  // namespace ampscope::detail
