// SPDX-License-Identifier: MIT
// The lenient unpickling of pt_lenient.h.
#include "torchsave/pt_lenient.h"

#include <ATen/ATen.h>
#include <ATen/core/class_type.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>
#include <unordered_map>

#include "ampscope/engine/errors.h"
#include "torchsave/pickle_walker.h"

namespace ampscope::detail {
namespace {

/// What lenient_pickle puts beside an object whose state it could not apply, and the key it
/// tags a pickled GradScaler's stand-in dict with (both removed by resolve_stand_ins()).
constexpr std::string_view kBuiltMarker = "__ampscope_built__";
constexpr std::string_view kClassKey = "__ampscope_class__";

/// The pickled classes whose object state (`__dict__`) is read as GradScaler.state_dict().
bool is_grad_scaler(const std::string& qn) {
    return qn == "torch.amp.grad_scaler.GradScaler" || qn == "torch.cuda.amp.grad_scaler.GradScaler" ||
           qn == "torch.cpu.amp.grad_scaler.GradScaler";
}

/// Globals LibTorch's unpickler builds itself: tensors, storages, devices. (It reads an
/// OrderedDict as None, and refuses any other torch global: those are rewritten like the rest.)
bool unpickler_builds(const std::string& module, const std::string& name) {
    if (module == "torch._utils") return name == "_rebuild_tensor_v2" || name == "_rebuild_qtensor";
    if (module == "torch._tensor") return name == "_rebuild_from_type_v2";
    if (module != "torch") return false;
    const std::string_view n(name);
    return n == "device" || (n.size() > 7 && n.substr(n.size() - 7) == "Storage") || n.rfind("per_", 0) == 0;
}

/// `torch.float32` and the like: a dtype named in a pickle (a config's precision), read as its name.
bool is_dtype_name(const std::string& module, const std::string& name) {
    static const std::set<std::string> names = [] {
        std::set<std::string> out;
        for (int i = 0; i < int(c10::ScalarType::NumOptions); ++i) try {
                const auto n =
                    c10::getDtypeNames(static_cast<c10::ScalarType>(i));  // throws for types Python does not name
                out.insert(n.first);
                if (!n.second.empty()) out.insert(n.second);
            } catch (const c10::Error&) {
            }
        return out;
    }();
    return module == "torch" && names.count(name) > 0;
}

/// A pickle BINUNICODE opcode pushing `s`.
std::string binunicode(std::string_view s) {
    std::string out = "X";
    for (int i = 0; i < 4; ++i) out += char((s.size() >> (8 * i)) & 0xff);
    return out.append(s);
}

/// A class as the user knows it (protocol 2 writes Python 3's builtins as `__builtin__`).
std::string display_name(const std::string& qn) {
    if (qn == "_codecs.encode") return "bytes";
    if (qn.rfind("__builtin__.", 0) == 0) return "builtins." + qn.substr(12);
    return qn;
}

void name_skipped(std::vector<std::string>& skipped, const std::string& qn) {
    const auto shown = display_name(qn);
    if (std::find(skipped.begin(), skipped.end(), shown) == skipped.end()) skipped.push_back(shown);
}

/// A pickled LONG1 or LONG4 (`op` and its arguments, `n` bytes) as the unpickler reads it: an
/// 8-byte LONG1 (Python writes the fewest bytes: 5 for 2^32, which LibTorch refused: "Expected
/// length to be 8, got 5"); an integer beyond int64 as a string saying so, so that a field
/// holding it is refused by name (a number expected) and elsewhere it is only text.
std::string int64_of_long(const char* op, size_t n) {
    const size_t header = op[0] == '\x8a' ? 2 : 5;
    const auto* b = reinterpret_cast<const unsigned char*>(op + header);
    const size_t len = n - header;
    const unsigned char fill = len && (b[len - 1] & 0x80) ? 0xff : 0x00;
    bool fits = true;
    for (size_t k = 8; k < len; ++k) fits = fits && b[k] == fill;
    if (len > 8 && (b[7] & 0x80) != (fill & 0x80)) fits = false;
    if (!fits) return binunicode("<an integer beyond int64: " + std::to_string(len) + " bytes>");
    std::string out = "\x8a\x08";
    for (size_t k = 0; k < 8; ++k) out += char(k < len ? b[k] : fill);
    return out;
}

/// For each opcode: the index of the class it pushes (a GLOBAL LibTorch cannot build, or a GET
/// of one from the memo, or a PUT right after one), else -1; a GLOBAL of a dtype: -2.
std::vector<int64_t> classes_pushed(const char* data, const std::vector<Op>& ops, std::vector<std::string>& globals) {
    std::vector<int64_t> cls(ops.size(), -1);
    std::map<uint64_t, int64_t> memo_class;  // memo index -> class
    uint64_t next_memo = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
        const Op& o = ops[i];
        if (o.op == 'c') {
            const std::string_view b(data + o.begin + 1, o.end - o.begin - 2);
            const auto nl = b.find('\n');
            const std::string module(b.substr(0, nl)), name(b.substr(nl + 1));
            if (is_dtype_name(module, name)) {
                cls[i] = -2;
            } else if (!unpickler_builds(module, name)) {
                const std::string qn = module + "." + name;
                const auto it = std::find(globals.begin(), globals.end(), qn);
                cls[i] = it - globals.begin();
                if (it == globals.end()) globals.push_back(qn);
            }
        } else if (o.op == 'h' || o.op == 'j' || o.op == 'g') {
            const auto it = memo_class.find(memo_index(data, o));
            if (it != memo_class.end()) cls[i] = it->second;
        }
        if (is_put(o.op)) {
            const uint64_t idx = o.op == 0x94 ? next_memo : memo_index(data, o);
            next_memo = std::max(next_memo, idx + 1);
            memo_class.erase(idx);
            if (i > 0 && cls[i - 1] >= 0)
                memo_class[idx] = cls[i] = cls[i - 1];  // the class is still on top of the stack
        }
    }
    return cls;
}

/// What the object loader builds for `qn(args)`: the value where LibTorch has one (complex, a
/// Parameter's tensor, torch.Size's tuple), an empty dict for a dict class, a placeholder that
/// check_tensor_fits refuses by key for a meta or sparse tensor; else None, named in `skipped`.
c10::IValue stand_in(const std::string& qn, const c10::IValue& args, std::vector<std::string>& skipped) {
    const bool tuple = args.isTuple();
    const auto n = tuple ? args.toTupleRef().elements().size() : 0;
    const auto arg = [&](size_t k) { return args.toTupleRef().elements()[k]; };
    if ((qn == "__builtin__.complex" || qn == "builtins.complex") && n == 2 && arg(0).isDouble() && arg(1).isDouble())
        return c10::complex<double>(arg(0).toDouble(), arg(1).toDouble());
    if ((qn == "torch._utils._rebuild_parameter" || qn == "torch._utils._rebuild_parameter_with_state" ||
         qn == "torch.Size") &&
        n > 0)
        return arg(0);
    if (qn == "torch._utils._rebuild_meta_tensor_no_storage")
        return at::empty({0}, at::TensorOptions().device(at::kMeta));
    if (qn == "torch._utils._rebuild_sparse_tensor") return at::empty({0}).to_sparse();
    if (qn == "collections.OrderedDict" || qn == "collections.defaultdict" || qn == "__builtin__.dict" ||
        qn == "builtins.dict")
        return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
    name_skipped(skipped, qn);
    return c10::IValue();
}

/// The dict GradScaler.state_dict() gives, from a pickled GradScaler's `__dict__` (its scale and
/// growth tracker are tensors once it ran, None before: then their initial values).
void scaler_from_state(c10::impl::GenericDict& obj, const c10::IValue& state) {
    obj.clear();
    if (!state.isGenericDict()) return;
    const auto s = state.toGenericDict();
    auto get = [&](const char* k) {
        const auto it = s.find(c10::IValue(std::string(k)));
        return it == s.end() ? c10::IValue() : it->value();
    };
    if (get("_enabled").isBool() && !get("_enabled").toBool()) return;  // disabled: {}
    const auto pick = [&](const char* now, const char* init) { return get(now).isNone() ? get(init) : get(now); };
    const std::pair<const char*, c10::IValue> fields[] = {
        {"scale", pick("_scale", "_init_scale")},
        {"growth_factor", get("_growth_factor")},
        {"backoff_factor", get("_backoff_factor")},
        {"growth_interval", get("_growth_interval")},
        {"_growth_tracker", pick("_growth_tracker", "_init_growth_tracker")},
    };
    for (const auto& [k, v] : fields)
        if (!v.isNone()) obj.insert_or_assign(std::string(k), v);
}

/// `v` with the stand-ins of lenient_pickle and StandInLoader replaced by their values; object
/// state applied where it is read (a GradScaler's), else dropped.
c10::IValue resolved(c10::IValue v) {
    for (int hops = 0; hops < 64; ++hops) {
        if (v.isObject() && v.toObjectRef().slots().size() == 1) {
            v = v.toObjectRef().getSlot(0);
        } else if (v.isTuple() && v.toTupleRef().elements().size() == 3 && v.toTupleRef().elements()[2].isString() &&
                   v.toTupleRef().elements()[2].toStringRef() == kBuiltMarker) {
            const auto el = v.toTupleRef().elements();
            if (el[0].isGenericDict()) {
                auto d = el[0].toGenericDict();
                const auto tag = d.find(c10::IValue(std::string(kClassKey)));
                if (tag != d.end()) scaler_from_state(d, el[1]);
            }
            v = el[0];
        } else {
            return v;
        }
    }
    return c10::IValue();
}

/// Empties every container under `root` without recursion, so that freeing it is shallow (a
/// chain a million lists deep, freed as it is, overflows the stack).
void dismantle(const c10::IValue& root) {
    std::vector<c10::IValue> work{root};
    while (!work.empty()) {
        const c10::IValue v = std::move(work.back());
        work.pop_back();
        if (v.isList()) {
            auto l = v.toList();
            for (size_t k = 0; k < l.size(); ++k) work.push_back(l.get(k));
            l.clear();
        } else if (v.isGenericDict()) {
            auto d = v.toGenericDict();
            for (const auto& kv : d) work.push_back(kv.key()), work.push_back(kv.value());
            d.clear();
        } else if (v.isTuple()) {
            auto& t = v.toTupleRef();
            for (size_t k = 0; k < t.elements().size(); ++k)
                work.push_back(t.elements()[k]), t.unsafeSetElement(k, c10::IValue());
        } else if (v.isObject()) {
            auto& o = v.toObjectRef();
            for (size_t k = 0; k < o.slots().size(); ++k) work.push_back(o.getSlot(k)), o.setSlot(k, c10::IValue());
        }
    }
}

}  // namespace

/// The pickle of a checkpoint written by Python training code, rewritten so that LibTorch's
/// unpickler reads its tensors and every other value: a class it cannot build called without
/// arguments (`cls () REDUCE` or NEWOBJ, the form protocol 2 gives an object) becomes an empty
/// dict, so that its items still arrive (a pickled GradScaler's is tagged with its class); any
/// other use of such a class is renamed `ampscope.g<k>`, which the unpickler hands to the
/// object loader (stand_in()); NEWOBJ becomes REDUCE; object state (BUILD) is kept beside the
/// object as (object, state, marker) until resolve_stand_ins(). Classes whose objects are
/// skipped (not OrderedDict, not GradScaler) are named in `skipped`.
Lenient lenient_pickle(const char* data, size_t size, const std::string& file, std::vector<std::string>& skipped) {
    std::vector<Op> ops;
    PickleWalker(data, size, file, [&](unsigned char op, size_t begin, size_t end) {
        ops.push_back({op, begin, end});
    }).walk();
    Lenient out;
    const auto cls = classes_pushed(data, ops, out.globals);
    std::string& p = out.pickle;
    p.reserve(size);
    for (size_t i = 0; i < ops.size(); ++i) {
        const Op& o = ops[i];
        if (cls[i] == -2) {  // a dtype: its name
            std::string qn(data + o.begin + 1, o.end - o.begin - 2);
            qn[qn.find('\n')] = '.';
            p += binunicode(qn);
            continue;
        }
        if (cls[i] < 0 || is_put(o.op)) {
            if (o.op == 'b')  // BUILD: (object, state, marker) instead
                p += binunicode(kBuiltMarker) + "\x87";
            else if (o.op == 0x81)  // NEWOBJ: the object loader gets the arguments
                p += 'R';
            else if (o.op == 0x8a || o.op == 0x8b)  // LONG1 / LONG4: the unpickler reads only 8-byte LONG1
                p += int64_of_long(data + o.begin, o.end - o.begin);
            else
                p.append(data + o.begin, o.end - o.begin);
            continue;
        }
        const std::string& qn = out.globals[size_t(cls[i])];
        size_t next = i + 1;
        while (next < ops.size() && is_put(ops[next].op)) ++next;
        const bool called =
            next + 1 < ops.size() && ops[next].op == ')' && (ops[next + 1].op == 'R' || ops[next + 1].op == 0x81);
        if (called) {
            p += '}';
            if (is_grad_scaler(qn)) p += binunicode(kClassKey) + binunicode(qn) + 's';
            if (qn != "collections.OrderedDict" && !is_grad_scaler(qn)) name_skipped(skipped, qn);
        } else {
            p += "campscope\ng" + std::to_string(cls[i]) + "\n";
        }
        for (size_t k = i + 1; k < next; ++k) p.append(data + ops[k].begin, ops[k].end - ops[k].begin);
        i = called ? next + 1 : next - 1;  // () and REDUCE/NEWOBJ consumed when called
    }
    return out;
}

/// Replaces every stand-in under `root` in place, visiting each container once (a pickle's
/// shared references make a graph whose paths may be exponentially many), without recursion.
c10::IValue resolve_stand_ins(const c10::IValue& root) {
    const c10::IValue top = resolved(root);
    std::vector<c10::IValue> work{top};
    std::unordered_set<const void*> seen;
    auto visit = [&](const c10::IValue& child) -> c10::IValue {
        c10::IValue r = resolved(child);
        if ((r.isGenericDict() || r.isList() || r.isTuple()) && seen.insert(r.internalToPointer()).second)
            work.push_back(r);
        return r;
    };
    seen.insert(top.isPtrType() ? top.internalToPointer() : nullptr);
    while (!work.empty()) {
        const c10::IValue v = std::move(work.back());
        work.pop_back();
        if (v.isGenericDict()) {
            auto d = v.toGenericDict();
            (void)d.erase(c10::IValue(std::string(kClassKey)));  // a GradScaler without state: {}
            std::vector<std::pair<c10::IValue, c10::IValue>> changed;
            for (const auto& kv : d)
                if (auto r = visit(kv.value()); !r.isSameIdentity(kv.value()))
                    changed.emplace_back(kv.key(), std::move(r));
            for (auto& [k, r] : changed) d.insert_or_assign(k, std::move(r));
        } else if (v.isList()) {
            auto l = v.toList();
            for (size_t k = 0; k < l.size(); ++k)
                if (auto r = visit(l.get(k)); !r.isSameIdentity(l.get(k))) l.set(k, std::move(r));
        } else if (v.isTuple()) {
            auto& t = v.toTupleRef();
            for (size_t k = 0; k < t.elements().size(); ++k)
                if (auto r = visit(t.elements()[k]); !r.isSameIdentity(t.elements()[k]))
                    t.unsafeSetElement(k, std::move(r));
        }
    }
    return top;
}

/// Refuses a value nested deeper than kMaxPickleDepth (a reference cycle included), walked
/// without recursion; each container is walked again only when reached deeper than before.
void check_depth(const c10::IValue& root, const std::string& file) {
    std::unordered_map<const void*, int> deepest;
    std::vector<std::pair<c10::IValue, int>> work{{root, 1}};
    while (!work.empty()) {
        auto [v, level] = std::move(work.back());
        work.pop_back();
        if (!(v.isList() || v.isGenericDict() || v.isTuple() || v.isObject())) continue;
        if (level > kMaxPickleDepth) {
            work.clear();
            dismantle(root);
            throw InputError(file, "data.pkl",
                             "nests values deeper than " + std::to_string(kMaxPickleDepth) +
                                 " levels (or in a cycle); expected a checkpoint saved by torch.save");
        }
        int& d = deepest[v.internalToPointer()];
        if (d >= level) continue;
        d = level;
        if (v.isList())
            for (const auto& e : v.toListRef()) work.emplace_back(e, level + 1);
        else if (v.isGenericDict())
            for (const auto& kv : v.toGenericDict()) work.emplace_back(kv.value(), level + 1);
        else if (v.isTuple())
            for (const auto& e : v.toTupleRef().elements()) work.emplace_back(e, level + 1);
        else
            for (const auto& e : v.toObjectRef().slots()) work.emplace_back(e, level + 1);
    }
}

c10::StrongTypePtr StandInLoader::resolve(const c10::QualifiedName& qn) {
    auto& t = types[qn.name()];
    if (!t) t = c10::ClassType::create(qn, std::weak_ptr<torch::jit::CompilationUnit>());
    return c10::StrongTypePtr(nullptr, t);
}
c10::intrusive_ptr<c10::ivalue::Object> StandInLoader::load(const c10::StrongTypePtr& type, const c10::IValue& args) {
    const std::string k = type.type_->expectRef<c10::ClassType>().name()->name();
    const size_t index = k.size() > 1 ? std::strtoull(k.c_str() + 1, nullptr, 10) : SIZE_MAX;
    auto obj = c10::ivalue::Object::create(type, 1);
    obj->setSlot(0, index < lenient.globals.size() ? stand_in(lenient.globals[index], args, skipped) : c10::IValue());
    return obj;
}

}  // namespace ampscope::detail
