// SPDX-License-Identifier: MIT
// advise/ owns the precision advisor: candidate modules at a granularity, the search for a
// minimal FP32 set (this file, torch-free), the sensitivity passes and the advisor's run
// (advise.cpp), built only on the runner's operations (a pass with given FP32 regions
// against one reference).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "ampscope/engine/advise.h"
#include "ampscope/engine/errors.h"

namespace ampscope {

Granularity parse_granularity(const std::string& text) {
    if (text == "leaf") return {Granularity::Kind::Leaf, 0};
    if (text == "block") return {Granularity::Kind::Block, 0};
    const bool digits = !text.empty() && text.size() <= 3 &&
                        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits && std::stoi(text) >= 1) return {Granularity::Kind::Depth, std::stoi(text)};
    throw InputError("", "granularity",
                     "'" + text + "'; expected leaf, block or a depth from 1 to 999 (module path components)");
}

std::string to_string(const Granularity& g) {
    switch (g.kind) {
        case Granularity::Kind::Leaf: return "leaf";
        case Granularity::Kind::Block: return "block";
        case Granularity::Kind::Depth: return std::to_string(g.depth);
    }
    return "leaf";
}

namespace {

int depth_of(const std::string& path) {
    return path.empty() ? 0 : int(std::count(path.begin(), path.end(), '.')) + 1;
}

bool is_index(const std::string& part) {
    return !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool inside(const std::string& path, const std::string& module) {
    return path.size() > module.size() && path.compare(0, module.size(), module) == 0 && path[module.size()] == '.';
}

/// The shallowest ancestor-or-self of `path` whose last component is an index (an element of
/// a ModuleList / Sequential), or "" when none.
std::string numbered_element(const std::string& path) {
    std::string prefix;
    std::istringstream parts(path);
    for (std::string part; std::getline(parts, part, '.');) {
        prefix += (prefix.empty() ? "" : ".") + part;
        if (is_index(part)) return prefix;
    }
    return "";
}

}  // namespace

std::vector<std::string> candidate_modules(const std::vector<std::string>& modules, const Granularity& g) {
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (const auto& m : modules) {
        if (m.empty()) continue;
        const bool leaf =
            std::none_of(modules.begin(), modules.end(), [&](const std::string& o) { return inside(o, m); });
        bool take = false;
        switch (g.kind) {
            case Granularity::Kind::Leaf: take = leaf; break;
            case Granularity::Kind::Depth: take = depth_of(m) == g.depth || (leaf && depth_of(m) < g.depth); break;
            case Granularity::Kind::Block: {
                const std::string block = numbered_element(m);
                take = block.empty() ? leaf : block == m;
                break;
            }
        }
        if (take && seen.insert(m).second) out.push_back(m);
    }
    return out;
}

SearchOutcome minimal_passing_set(const std::vector<std::string>& ordered,
                                  const std::function<bool(const std::vector<std::string>&)>& passes,
                                  bool empty_set_fails) {
    SearchOutcome r;
    std::map<std::vector<std::string>, bool> memo;  // sets as sorted lists: each evaluated once
    if (empty_set_fails) memo[{}] = false;          // the caller's own evaluation of it
    auto eval = [&](std::vector<std::string> set) {
        std::vector<std::string> key = set;
        std::sort(key.begin(), key.end());
        if (auto it = memo.find(key); it != memo.end()) return it->second;
        ++r.evaluations;
        return memo[key] = passes(set);
    };
    auto with = [](std::vector<std::string> a, const std::vector<std::string>& b, size_t count) {
        a.insert(a.end(), b.begin(), b.begin() + long(count));
        return a;
    };
    std::vector<std::string> set;
    if (eval(set)) return {true, {}, r.evaluations};
    if (!eval(ordered)) return {false, {}, r.evaluations};
    // Invariant: `set` fails and set + rest passes. Each round finds, by bisection, the shortest
    // prefix of `rest` that makes set + prefix pass; its last member is needed (without it the
    // shorter prefix fails), the members after it are not, and the search continues within it.
    std::vector<std::string> rest = ordered;
    while (true) {
        size_t lo = 0, hi = rest.size();  // set + rest[0, lo) fails, set + rest[0, hi) passes
        while (hi - lo > 1) {
            const size_t mid = lo + (hi - lo) / 2;
            (eval(with(set, rest, mid)) ? hi : lo) = mid;
        }
        set.push_back(rest[hi - 1]);
        rest.resize(hi - 1);
        if (eval(set)) break;
    }
    // Minimal, checked one removal at a time (when criteria are not monotone in the set, a
    // member found early can become unnecessary; drop it and check again).
    for (bool dropped = true; dropped;) {
        dropped = false;
        for (size_t i = 0; i < set.size() && !dropped; ++i) {
            auto without = set;
            without.erase(without.begin() + long(i));
            if (eval(without)) {
                set = std::move(without);
                dropped = true;
            }
        }
    }
    r.found = true;
    r.set = std::move(set);
    return r;
}

namespace {

/// A Python list literal of the module paths, one a line.
std::string python_list(const std::vector<std::string>& names) {
    std::string out = "[\n";
    for (const auto& m : names) {
        std::string quoted;
        for (char c : m) {
            const auto u = static_cast<unsigned char>(c);
            if (c == '\\' || c == '"') {
                quoted += std::string("\\") + c;
            } else if (u < 0x20 || u == 0x7f) {  // a newline would end the literal (and the comment line)
                char hex[8];
                std::snprintf(hex, sizeof hex, "\\x%02x", u);
                quoted += hex;
            } else {
                quoted += c;
            }
        }
        out += "    \"" + quoted + "\",\n";
    }
    return out + "]";
}

/// An FP8 recipe's set: torchao's float8 conversion leaving those modules (and their submodules) in BF16.
std::string fp8_snippet(const std::vector<std::string>& keep_bf16, Precision precision, bool all_gemms) {
    const bool torchao_recipe = precision == Precision::Fp8 || precision == Precision::Fp8Rowwise;
    std::ostringstream o;
    o << "# ampscope advise: the modules to leave out of FP8 (" << to_string(precision)
      << ") for the run's criteria to be met; their linear layers run in bfloat16 under torch.autocast.\n";
    if (all_gemms)
        o << "# Simulated with --fp8-all-gemms: the model's own matrix products (Conv1D, torch.mm, bmm) were "
             "quantized too.\n# torchao converts nn.Linear modules only: those products stay in bfloat16 under this "
             "conversion\n# unless they are nn.Linear layers or your framework quantizes them.\n";
    if (!torchao_recipe)
        o << "# Leave them out of your " << to_string(precision)
          << " conversion with the same filter (torchao's recipes take it as module_filter_fn).\n";
    o << "KEEP_BF16 = " << python_list(keep_bf16) << "\n\n\n"
      << "def module_filter_fn(module, fqn: str) -> bool:\n"
      << "    \"\"\"True: convert the module to FP8; False: a module of KEEP_BF16 or inside one.\"\"\"\n"
      << "    return not any(fqn == k or fqn.startswith(k + \".\") for k in KEEP_BF16)\n";
    if (torchao_recipe)
        o << "\n\n"
          << "def convert_to_fp8(model):\n"
          << "    from torchao.float8 import Float8LinearConfig, convert_to_float8_training\n\n"
          << "    config = Float8LinearConfig.from_recipe_name(\""
          << (precision == Precision::Fp8 ? "tensorwise" : "rowwise") << "\")\n"
          << "    return convert_to_float8_training(model, config=config, module_filter_fn=module_filter_fn)\n";
    return o.str();
}

}  // namespace

std::string python_snippet(const std::vector<std::string>& keep_fp32, Precision precision, bool all_gemms) {
    if (is_fp8(precision)) return fp8_snippet(keep_fp32, precision, all_gemms);
    std::ostringstream o;
    o << "# ampscope advise: the modules that must stay in FP32 for mixed precision ("
      << (precision == Precision::Bf16 ? "bfloat16" : "float16") << ") to meet the run's criteria.\n"
      << "# Apply to your own nn.Module before training or serving it under torch.autocast:\n"
      << "#     model = keep_in_fp32(model)\n"
      << "import torch\n\n"
      << "KEEP_FP32 = " << python_list(keep_fp32) << "\n\n\n"
      << "def keep_in_fp32(model: torch.nn.Module, names=KEEP_FP32) -> torch.nn.Module:\n"
      << "    \"\"\"Runs each named submodule with autocast disabled and its floating inputs cast to float32.\"\"\"\n\n"
      << "    def cast(x):\n"
      << "        return x.float() if torch.is_tensor(x) and x.is_floating_point() else x\n\n"
      << "    for name in names:\n"
      << "        module = model.get_submodule(name)\n"
      << "        forward = module.forward\n\n"
      << "        def fp32_forward(*args, _forward=forward, **kwargs):\n"
      << "            device = next((a.device.type for a in args if torch.is_tensor(a)), \"cpu\")\n"
      << "            with torch.autocast(device_type=device, enabled=False):\n"
      << "                return _forward(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()})\n\n"
      << "        module.forward = fp32_forward\n"
      << "    return model\n";
    return o.str();
}

std::string to_string(AdviseResult::Outcome o) {
    switch (o) {
        case AdviseResult::Outcome::Found: return "found";
        case AdviseResult::Outcome::AlreadyAccepted: return "already_accepted";
        case AdviseResult::Outcome::InvalidReference: return "invalid_reference";
        case AdviseResult::Outcome::Fp32CannotPass: return "fp32_cannot_pass";
        case AdviseResult::Outcome::WholeModelOnly: return "whole_model_only";
        case AdviseResult::Outcome::Unverified: return "unverified";
    }
    return "found";
}

void apply_verification(AdviseResult& r, Verdict verdict) {
    if (r.outcome != AdviseResult::Outcome::Found || verdict == Verdict::Accepted) return;
    r.outcome = AdviseResult::Outcome::Unverified;
    r.message = "the search's passes accepted " + std::to_string(r.keep_fp32.size()) + " module" +
                (r.keep_fp32.size() == 1 ? "" : "s") + " in " + (r.kept_in == Precision::Bf16 ? "BF16" : "FP32") +
                ", but the verifying run was " + to_string(verdict) +
                ": the set is not confirmed (the model's passes do not reproduce: state or randomness that differs "
                "from run to run), "
                "so it is no advice: no Python snippet" +
                (r.kept_in == Precision::Bf16
                     ? std::string()
                     : ", and a run refuses it as a keep-FP32 file unless unverified sets are allowed");
}

}  // namespace ampscope
