// SPDX-License-Identifier: MIT
// Reading torch.save archives from outside: every record, storage and tensor view is checked
// against what the file really holds before any tensor data is touched.
//
// LibTorch's own torch::pickle_load trusts the archive: a storage's size comes from the
// pickle (not from its record), and a tensor's sizes, strides and offset are set on it
// unchecked, so a hostile file reads past its buffers or allocates what it declares. Python's
// torch.load refuses such files; so do we, with the file and the field named.
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "ampscope/engine/errors.h"
#include "probes/pt_archive.h"

namespace ampscope::detail {
namespace {

/// The archive's bytes for miniz. LibTorch's MemoryReadAdapter copies whatever miniz asks for,
/// and miniz asks for offsets taken from the (possibly damaged) central directory: clamp.
class BoundedReader final : public caffe2::serialize::ReadAdapterInterface {
public:
    BoundedReader(const char* data, size_t size) : data_(data), size_(size) {}
    size_t size() const override { return size_; }
    size_t read(uint64_t pos, void* buf, size_t n, const char* what = "") const override {
        (void)what;
        if (pos >= size_) return 0;
        n = std::min<uint64_t>(n, size_ - pos);
        if (n) std::memcpy(buf, data_ + pos, n);
        return n;
    }

private:
    const char* data_;
    size_t size_;
};

/// Walks the opcodes of a pickle and refuses any length it declares beyond the bytes left:
/// LibTorch's Unpickler reserves a declared length before reading it (a 2 KB file could ask
/// for 4 GB). Opcodes outside the set the Unpickler knows are refused here too.
class PickleWalker {
public:
    /// Called after each opcode with its byte range [begin, end) (arguments included).
    using OnOp = std::function<void(unsigned char op, size_t begin, size_t end)>;
    PickleWalker(const char* data, size_t size, const std::string& file, OnOp on_op = {})
        : data_(data), size_(size), file_(file), on_op_(std::move(on_op)) {}

    void walk() {
        while (pos_ < size_) {
            const size_t begin = pos_;
            const auto op = static_cast<unsigned char>(data_[pos_++]);
            const bool more = step(op);
            if (on_op_) on_op_(op, begin, pos_);
            if (!more) return;
        }
        fail("no STOP opcode before the end");
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw InputError(file_, "data.pkl",
                         what + " at byte " + std::to_string(pos_) + " of " + std::to_string(size_) + " (a damaged or hostile pickle)");
    }
    void need(uint64_t n) const {
        if (n > size_ - pos_) fail("declares " + std::to_string(n) + " bytes, but " + std::to_string(size_ - pos_) + " remain");
    }
    /// A little-endian integer of `bytes` bytes.
    uint64_t le(int bytes) {
        need(uint64_t(bytes));
        uint64_t v = 0;
        for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(data_[pos_ + size_t(i)]);
        pos_ += size_t(bytes);
        return v;
    }
    /// A payload whose length was just read.
    void skip(uint64_t n) {
        need(n);
        pos_ += size_t(n);
    }
    void line() {
        const void* nl = std::memchr(data_ + pos_, '\n', size_ - pos_);
        if (!nl) fail("an unterminated line");
        pos_ = size_t(static_cast<const char*>(nl) - data_) + 1;
    }
    /// The memo is filled in order (0, 1, 2, ...); LibTorch's unpickler grows its table to any
    /// index it is given, so a sparse index (31 GB from a 4-byte LONG_BINPUT) is refused.
    void put(uint64_t index) {
        if (index > memo_) fail("memo index " + std::to_string(index) + " out of order (next is " + std::to_string(memo_) + ")");
        memo_ = std::max(memo_, index + 1);
    }

    /// What an opcode's arguments are, by opcode: the protocol 0-5 opcodes torch.save can write.
    enum class Args : unsigned char {
        Refused,
        None,
        Line,
        TwoLines,
        Int1,
        Int2,
        Int4,
        Int8,
        Len1,
        Len4,
        Len8,
        Memoize,
        Put,
        Put1,
        Put4,
        Stop
    };
    static const std::array<Args, 256>& opcodes() {
        static const std::array<Args, 256> table = [] {
            std::array<Args, 256> t{};  // Refused
            const std::pair<std::string_view, Args> rows[] = {
                {"(012NQRabd}el]ostu)\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93", Args::None},
                {"FILPSVg", Args::Line},
                {"ci", Args::TwoLines},
                {"Kh\x80\x82", Args::Int1},
                {"M\x83", Args::Int2},
                {"Jj\x84", Args::Int4},
                {"G\x95", Args::Int8},
                {"UC\x8c\x8a", Args::Len1},
                {"TXB\x8b", Args::Len4},
                {"\x8d\x8e", Args::Len8},
                {"\x94", Args::Memoize},
                {"p", Args::Put},
                {"q", Args::Put1},
                {"r", Args::Put4},
                {".", Args::Stop},
            };
            for (const auto& [ops, args] : rows)
                for (const char op : ops) t[static_cast<unsigned char>(op)] = args;
            return t;
        }();
        return table;
    }

    /// One opcode (already consumed) and its arguments; false at STOP.
    bool step(unsigned char op) {
        switch (opcodes()[op]) {
            case Args::None: break;
            case Args::Line: line(); break;
            case Args::TwoLines: line(), line(); break;
            case Args::Int1: le(1); break;
            case Args::Int2: le(2); break;
            case Args::Int4: le(4); break;
            case Args::Int8: le(8); break;
            case Args::Len1: skip(le(1)); break;
            case Args::Len4: skip(le(4)); break;
            case Args::Len8: skip(le(8)); break;
            case Args::Memoize: put(memo_); break;
            case Args::Put: {  // PUT: a decimal index on its own line
                const size_t start = pos_;
                line();
                put(std::strtoull(std::string(data_ + start, pos_ - 1 - start).c_str(), nullptr, 10));
                break;
            }
            case Args::Put1: put(le(1)); break;
            case Args::Put4: put(le(4)); break;
            case Args::Stop: return false;
            case Args::Refused: {
                char hex[8];
                std::snprintf(hex, sizeof hex, "0x%02x", op);
                --pos_;
                fail(std::string("pickle opcode ") + hex + " that torch.save does not write");
            }
        }
        return true;
    }

    const char* data_;
    size_t size_;
    const std::string& file_;
    OnOp on_op_;
    size_t pos_ = 0;
    uint64_t memo_ = 0;
};

void check_pickle_lengths(const char* data, size_t size, const std::string& file) {
    PickleWalker(data, size, file).walk();
}

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
                const auto n = c10::getDtypeNames(static_cast<c10::ScalarType>(i));  // throws for types Python does not name
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

/// One opcode of a pickle: the byte and its range [begin, end) with its arguments.
struct Op {
    unsigned char op;
    size_t begin, end;
};

/// A pickle rewritten for LibTorch's unpickler, and the globals it renamed `ampscope.g<k>`.
struct Lenient {
    std::string pickle;
    std::vector<std::string> globals;  ///< k -> module.name as the file wrote it
};

bool is_put(unsigned char op) {
    return op == 'p' || op == 'q' || op == 'r' || op == 0x94;
}

/// The memo index a PUT or GET opcode names.
uint64_t memo_index(const char* data, const Op& o) {
    if (o.op == 'p' || o.op == 'g') return std::strtoull(std::string(data + o.begin + 1, o.end - o.begin - 2).c_str(), nullptr, 10);
    uint64_t v = 0;
    for (size_t k = o.end; k-- > o.begin + 1;) v = (v << 8) | static_cast<unsigned char>(data[k]);
    return v;
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
            if (i > 0 && cls[i - 1] >= 0) memo_class[idx] = cls[i] = cls[i - 1];  // the class is still on top of the stack
        }
    }
    return cls;
}

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
    PickleWalker(data, size, file, [&](unsigned char op, size_t begin, size_t end) { ops.push_back({op, begin, end}); }).walk();
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
        const bool called = next + 1 < ops.size() && ops[next].op == ')' && (ops[next + 1].op == 'R' || ops[next + 1].op == 0x81);
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

/// What the object loader builds for `qn(args)`: the value where LibTorch has one (complex, a
/// Parameter's tensor, torch.Size's tuple), an empty dict for a dict class, a placeholder that
/// check_tensor_fits refuses by key for a meta or sparse tensor; else None, named in `skipped`.
c10::IValue stand_in(const std::string& qn, const c10::IValue& args, std::vector<std::string>& skipped) {
    const bool tuple = args.isTuple();
    const auto n = tuple ? args.toTupleRef().elements().size() : 0;
    const auto arg = [&](size_t k) { return args.toTupleRef().elements()[k]; };
    if ((qn == "__builtin__.complex" || qn == "builtins.complex") && n == 2 && arg(0).isDouble() && arg(1).isDouble())
        return c10::complex<double>(arg(0).toDouble(), arg(1).toDouble());
    if ((qn == "torch._utils._rebuild_parameter" || qn == "torch._utils._rebuild_parameter_with_state" || qn == "torch.Size") && n > 0)
        return arg(0);
    if (qn == "torch._utils._rebuild_meta_tensor_no_storage") return at::empty({0}, at::TensorOptions().device(at::kMeta));
    if (qn == "torch._utils._rebuild_sparse_tensor") return at::empty({0}).to_sparse();
    if (qn == "collections.OrderedDict" || qn == "collections.defaultdict" || qn == "__builtin__.dict" || qn == "builtins.dict")
        return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
    name_skipped(skipped, qn);
    return c10::IValue();
}

/// The type resolver and object loader for the globals lenient_pickle renamed `ampscope.g<k>`:
/// each object is built as a one-slot Object holding its stand_in(), unwrapped by
/// resolve_stand_ins() (the unpickler's loader must return an Object).
struct StandInLoader {
    const Lenient& lenient;
    std::vector<std::string>& skipped;
    std::map<std::string, c10::ClassTypePtr> types;

    c10::StrongTypePtr resolve(const c10::QualifiedName& qn) {
        auto& t = types[qn.name()];
        if (!t) t = c10::ClassType::create(qn, std::weak_ptr<torch::jit::CompilationUnit>());
        return c10::StrongTypePtr(nullptr, t);
    }
    c10::intrusive_ptr<c10::ivalue::Object> load(const c10::StrongTypePtr& type, const c10::IValue& args) {
        const std::string k = type.type_->expectRef<c10::ClassType>().name()->name();
        const size_t index = k.size() > 1 ? std::strtoull(k.c_str() + 1, nullptr, 10) : SIZE_MAX;
        auto obj = c10::ivalue::Object::create(type, 1);
        obj->setSlot(0, index < lenient.globals.size() ? stand_in(lenient.globals[index], args, skipped) : c10::IValue());
        return obj;
    }
};

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

/// Replaces every stand-in under `root` in place, visiting each container once (a pickle's
/// shared references make a graph whose paths may be exponentially many), without recursion.
c10::IValue resolve_stand_ins(const c10::IValue& root) {
    const c10::IValue top = resolved(root);
    std::vector<c10::IValue> work{top};
    std::unordered_set<const void*> seen;
    auto visit = [&](const c10::IValue& child) -> c10::IValue {
        c10::IValue r = resolved(child);
        if ((r.isGenericDict() || r.isList() || r.isTuple()) && seen.insert(r.internalToPointer()).second) work.push_back(r);
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
                if (auto r = visit(kv.value()); !r.isSameIdentity(kv.value())) changed.emplace_back(kv.key(), std::move(r));
            for (auto& [k, r] : changed) d.insert_or_assign(k, std::move(r));
        } else if (v.isList()) {
            auto l = v.toList();
            for (size_t k = 0; k < l.size(); ++k)
                if (auto r = visit(l.get(k)); !r.isSameIdentity(l.get(k))) l.set(k, std::move(r));
        } else if (v.isTuple()) {
            auto& t = v.toTupleRef();
            for (size_t k = 0; k < t.elements().size(); ++k)
                if (auto r = visit(t.elements()[k]); !r.isSameIdentity(t.elements()[k])) t.unsafeSetElement(k, std::move(r));
        }
    }
    return top;
}

/// Deeper than any checkpoint (check_tensors refuses past 64 levels with its own message).
constexpr int kMaxPickleDepth = 100;

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
            for (size_t k = 0; k < t.elements().size(); ++k) work.push_back(t.elements()[k]), t.unsafeSetElement(k, c10::IValue());
        } else if (v.isObject()) {
            auto& o = v.toObjectRef();
            for (size_t k = 0; k < o.slots().size(); ++k) work.push_back(o.getSlot(k)), o.setSlot(k, c10::IValue());
        }
    }
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

/// The containers a pickle builds, as LibTorch's unpickler would build them (a shadow of node
/// ids, no values): where one container is put into another. A REDUCE or BUILD result counts as
/// a container holding its callable and arguments (what a class may keep of them).
class PickleShape {
public:
    void op(unsigned char op, const char* data, const Op& o) {
        switch (op) {
            case ']':
            case '}':
            case ')': push(node({})); break;
            case '(': marks_.push_back(stack_.size()); break;
            case 't':
            case 'l':
            case 'd': push(node(pop_mark())); break;
            case 0x85:
            case 0x86:
            case 0x87: push(node(pop_n(size_t(op - 0x84)))); break;
            case 'a': {
                const auto x = pop_n(1);
                link(top(), x);
                break;
            }
            case 'e':
            case 'u': {
                const auto xs = pop_mark();
                link(top(), xs);
                break;
            }
            case 's': {
                const auto kv = pop_n(2);
                link(top(), kv);
                break;
            }
            case 'R':
            case 'b':
            case 0x81: push(node(pop_n(2))); break;
            case 'Q': pop_n(1), push(-1); break;
            case '0': pop_n(1); break;
            case '1': pop_mark(); break;
            case '2': push(top()); break;
            case 'h':
            case 'j':
            case 'g': {
                const auto it = memo_.find(memo_index(data, o));
                push(it == memo_.end() ? -1 : it->second);
                break;
            }
            case 'p':
            case 'q':
            case 'r': memo_[memo_index(data, o)] = top(); break;
            case 0x94: memo_[memo_.size()] = top(); break;
            case '.': break;
            default: push(-1);  // a scalar, a string, a global
        }
    }
    /// The deepest nesting of what was built (a cycle: unbounded), without recursion.
    size_t depth() const {
        std::vector<uint32_t> best(children_.size(), 0);  // 0: not done
        std::vector<uint8_t> open(children_.size(), 0);
        size_t deepest = 0;
        for (size_t root = 0; root < children_.size(); ++root) {
            if (best[root]) continue;
            std::vector<std::pair<size_t, size_t>> path{{root, 0}};  // node, next child
            open[root] = 1;
            while (!path.empty()) {
                auto& [n, k] = path.back();
                if (k < children_[n].size()) {
                    const size_t c = children_[n][k++];
                    if (open[c]) return SIZE_MAX;
                    if (!best[c]) path.emplace_back(c, 0), open[c] = 1;
                    continue;
                }
                uint32_t d = 1;
                for (const auto c : children_[n]) d = std::max(d, best[c] + 1);
                best[n] = d, open[n] = 0, deepest = std::max<size_t>(deepest, d);
                path.pop_back();
            }
        }
        return deepest;
    }

private:
    int64_t node(const std::vector<int64_t>& kids) {
        children_.emplace_back();
        link(int64_t(children_.size() - 1), kids);
        return int64_t(children_.size() - 1);
    }
    void link(int64_t parent, const std::vector<int64_t>& kids) {
        if (parent < 0) return;
        for (const auto k : kids)
            if (k >= 0) children_[size_t(parent)].push_back(uint32_t(k));
    }
    void push(int64_t v) { stack_.push_back(v); }
    int64_t top() const { return stack_.empty() ? -1 : stack_.back(); }
    std::vector<int64_t> pop_n(size_t n) {
        n = std::min(n, stack_.size());
        std::vector<int64_t> out(stack_.end() - long(n), stack_.end());
        stack_.resize(stack_.size() - n);
        return out;
    }
    std::vector<int64_t> pop_mark() {
        const size_t at = marks_.empty() ? stack_.size() : std::min(marks_.back(), stack_.size());
        if (!marks_.empty()) marks_.pop_back();
        return pop_n(stack_.size() - at);
    }
    std::vector<std::vector<uint32_t>> children_;
    std::vector<int64_t> stack_;
    std::vector<size_t> marks_;
    std::map<uint64_t, int64_t> memo_;
};

/// Refuses a pickle whose values would nest deeper than kMaxPickleDepth, before LibTorch's
/// unpickler builds them: it frees what it built recursively, also when it fails half-way (a
/// chain a million lists deep overflowed the stack).
void check_pickle_depth(const char* data, size_t size, const std::string& file) {
    PickleShape shape;
    PickleWalker(data, size, file, [&](unsigned char op, size_t begin, size_t end) { shape.op(op, data, {op, begin, end}); }).walk();
    if (shape.depth() > size_t(kMaxPickleDepth))
        throw InputError(file, "data.pkl",
                         "nests values deeper than " + std::to_string(kMaxPickleDepth) +
                             " levels (or in a cycle); expected a checkpoint saved by torch.save");
}

/// The sizes a zip's central directory declares, before LibTorch's reader allocates any of them
/// (its constructor already reads a record). miniz takes the directory from the zip64 end record
/// when a zip64 locator is present (torch writes one in every archive) and from the classic end
/// record otherwise: both directories are walked, a size beyond the file is refused, and so is a
/// directory that cannot be walked to its last entry (it is what miniz would read).
void check_declared_sizes(const char* data, size_t n, const std::string& file, std::set<std::string>* stored) {
    const auto* b = reinterpret_cast<const unsigned char*>(data);
    auto u = [&](size_t at, int len) {
        uint64_t v = 0;
        for (int i = len - 1; i >= 0; --i) v = (v << 8) | b[at + size_t(i)];
        return v;
    };
    auto damaged = [&](const std::string& field, const std::string& what) {
        return InputError(file, field, what + " (a damaged or hostile archive)");
    };
    if (n < 22) return;
    size_t eocd = n - 22;
    const size_t stop = n > 22 + 65535 ? n - 22 - 65535 : 0;
    while (u(eocd, 4) != 0x06054b50) {
        if (eocd == stop) return;  // no directory: the reader refuses the file without allocating
        --eocd;
    }
    std::vector<std::pair<uint64_t, uint64_t>> directories;  // (entries, offset)
    if (u(eocd + 10, 2) != 0xFFFF && u(eocd + 16, 4) != 0xFFFFFFFFu) directories.emplace_back(u(eocd + 10, 2), u(eocd + 16, 4));
    if (eocd >= 20 && u(eocd - 20, 4) == 0x07064b50) {
        const uint64_t z = u(eocd - 20 + 8, 8);
        if (z > n || n - z < 56 || u(size_t(z), 4) != 0x06064b50)
            throw damaged("zip64 end record", "the zip64 locator points outside the file");
        directories.emplace_back(u(size_t(z) + 32, 8), u(size_t(z) + 48, 8));
    }
    for (const auto& [count, start] : directories) {
        if (count > n / 46)
            throw damaged("central directory",
                          "declares " + std::to_string(count) + " entries in a file of " + std::to_string(n) + " bytes");
        uint64_t pos = start;
        for (uint64_t k = 0; k < count; ++k) {
            if (pos > n || n - pos < 46 || u(size_t(pos), 4) != 0x02014b50)
                throw damaged("central directory",
                              "entry " + std::to_string(k) + " of " + std::to_string(count) + " is not where the directory says");
            const size_t at = size_t(pos);
            uint64_t sizes[2] = {u(at + 24, 4), u(at + 20, 4)};  // uncompressed, compressed
            const size_t name = size_t(u(at + 28, 2)), extra = size_t(u(at + 30, 2)), comment = size_t(u(at + 32, 2));
            if (n - at - 46 < name + extra + comment)
                throw damaged("central directory", "entry " + std::to_string(k) + " runs past the end of the file");
            const size_t extra_end = at + 46 + name + extra;
            for (size_t e = at + 46 + name; e + 4 <= extra_end;) {  // zip64 sizes, in the order the spec gives
                const size_t id = size_t(u(e, 2)), len = size_t(u(e + 2, 2));
                if (id == 1) {
                    size_t f = e + 4;
                    for (auto& s : sizes)
                        if (s == 0xFFFFFFFFu && f + 8 <= std::min(e + 4 + len, extra_end)) s = u(f, 8), f += 8;
                }
                e += 4 + len;
            }
            for (const uint64_t s : sizes)
                if (s > n)
                    throw InputError(file, std::string(data + at + 46, name),
                                     "record declares " + std::to_string(s) + " bytes in a file of " + std::to_string(n) +
                                         " (a damaged or hostile archive)");
            if (stored && u(at + 10, 2) == 0 && sizes[0] == sizes[1]) {  // method 0: the record's bytes as they are
                const std::string full(data + at + 46, name);
                const auto slash = full.find('/');  // the reader names records without the archive's folder
                stored->insert(slash == std::string::npos ? full : full.substr(slash + 1));
            }
            pos += 46 + name + extra + comment;
        }
    }
}

std::string shape_of(const at::Tensor& t) {
    return c10::str(t.sizes());
}

/// a * b, or nullopt on overflow (sizes and strides are checked before they are trusted).
std::optional<int64_t> mul(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
    return r;
}

std::optional<int64_t> add(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
    return r;
}

}  // namespace

void check_tensor_fits(const at::Tensor& t, size_t record_bytes, const std::string& file, const std::string& field) {
    if (!t.defined()) throw InputError(file, field, "an undefined Tensor; expected a Tensor with data");
    if (t.layout() != at::kStrided) throw InputError(file, field, "a sparse or non-strided Tensor; expected a dense Tensor");
    if (t.is_meta())
        throw InputError(file, field,
                         "a meta Tensor (shape and dtype only, no data: a model built on the meta device); expected a Tensor with data");
    if (t.is_quantized()) throw InputError(file, field, "a quantized Tensor; expected a floating-point Tensor (dequantize before saving)");
    const auto& st = t.storage();
    const int64_t storage_bytes = int64_t(st.nbytes());
    if (storage_bytes < 0 || size_t(storage_bytes) > record_bytes)
        throw InputError(file, field,
                         "declares a storage of " + std::to_string(st.nbytes()) + " bytes, but the file holds " +
                             std::to_string(record_bytes) + " for it (a damaged or hand-edited file)");
    const int64_t item = int64_t(t.element_size());
    const auto sizes = t.sizes();
    const auto strides = t.strides();
    int64_t numel = 1, last = 0;  // last: offset of the last element, relative to the storage offset
    for (size_t d = 0; d < sizes.size(); ++d) {
        if (sizes[d] < 0 || strides[d] < 0)
            throw InputError(file, field, "declares negative sizes or strides; expected a Tensor saved by torch.save");
        const auto n = mul(numel, sizes[d]);
        if (!n) throw InputError(file, field, "declares a shape whose element count overflows; expected a Tensor saved by torch.save");
        numel = *n;
        if (sizes[d] > 0) {
            const auto span = mul(sizes[d] - 1, strides[d]);
            const auto l = span ? add(last, *span) : std::nullopt;
            if (!l) throw InputError(file, field, "declares strides that overflow; expected a Tensor saved by torch.save");
            last = *l;
        }
    }
    if (numel == 0) return;
    const int64_t offset = t.storage_offset();
    const auto end_elems = offset < 0 ? std::nullopt : add(offset, last + 1);
    const auto end_bytes = end_elems ? mul(*end_elems, item) : std::nullopt;
    if (!end_bytes || *end_bytes > storage_bytes)
        throw InputError(file, field,
                         "shape " + shape_of(t) + " at offset " + std::to_string(offset) + " reaches past the end of its stored data (" +
                             std::to_string(storage_bytes / item) + " elements); a damaged or hand-edited file");
    // A tensor may not declare more elements than the file holds for it (stride-0 views saved
    // by torch.save are refused too: they would be materialised at their full size).
    if (numel > storage_bytes / item)
        throw InputError(file, field,
                         "shape " + shape_of(t) + " declares " + std::to_string(numel) + " elements, but its stored data holds " +
                             std::to_string(storage_bytes / item) + "; save a contiguous Tensor (x.contiguous())");
}

std::shared_ptr<caffe2::serialize::PyTorchStreamReader> open_checked_zip(const std::vector<char>& bytes, const std::string& file,
                                                                         std::set<std::string>* stored) {
    return open_checked_zip(bytes.data(), bytes.size(), file, stored);
}

std::shared_ptr<caffe2::serialize::PyTorchStreamReader> open_checked_zip(const char* data, size_t size, const std::string& file,
                                                                         std::set<std::string>* stored) {
    using caffe2::serialize::PyTorchStreamReader;
    check_declared_sizes(data, size, file, stored);
    auto reader = std::make_shared<PyTorchStreamReader>(std::make_unique<BoundedReader>(data, size));
    // torch.save and torch.export.save store records uncompressed: none can be larger than the file.
    for (const auto& name : reader->getAllRecords()) {
        const size_t record = reader->getRecordSize(name);
        if (record > size)
            throw InputError(file, name,
                             "record declares " + std::to_string(record) + " bytes in a file of " + std::to_string(size) +
                                 " (a damaged or hostile archive)");
    }
    return reader;
}

PtArchive read_pt_archive(const std::vector<char>& bytes, const std::string& file, std::vector<std::string>* skipped_objects) {
    return read_pt_archive(bytes.data(), bytes.size(), file, skipped_objects);
}

PtArchive read_pt_archive(const char* data, size_t size, const std::string& file, std::vector<std::string>* skipped_objects) {
    using caffe2::serialize::PyTorchStreamReader;
    PtArchive out;
    try {
        auto reader = open_checked_zip(data, size, file);
        if (!reader->hasRecord("data.pkl"))
            throw InputError(file, "", "a zip archive without data.pkl; expected a file written by torch.save");
        const auto pkl_record = reader->getRecord("data.pkl");
        const at::DataPtr& pkl = std::get<0>(pkl_record);
        size_t pkl_size = std::get<1>(pkl_record);
        check_pickle_lengths(static_cast<const char*>(pkl.get()), pkl_size, file);
        const Lenient lenient =
            skipped_objects ? lenient_pickle(static_cast<const char*>(pkl.get()), pkl_size, file, *skipped_objects) : Lenient();
        size_t pos = 0;
        const char* pkl_data = skipped_objects ? lenient.pickle.data() : static_cast<const char*>(pkl.get());
        if (skipped_objects) pkl_size = lenient.pickle.size();
        check_pickle_depth(pkl_data, pkl_size, file);
        auto read = [&](char* buf, size_t n) -> size_t {
            n = std::min(n, pkl_size - pos);
            if (n) std::memcpy(buf, pkl_data + pos, n);
            pos += n;
            return n;
        };
        auto& records = out.record_bytes;
        auto read_record = [&, reader](const std::string& key) -> at::DataPtr {
            const std::string name = "data/" + key;
            if (!reader->hasRecord(name)) throw InputError(file, name, "storage record missing from the archive");
            auto [ptr, size] = reader->getRecord(name);
            records[ptr.get()] = size;
            return std::move(ptr);
        };
        std::vector<std::string> no_names;
        StandInLoader loader{lenient, skipped_objects ? *skipped_objects : no_names, {}};
        torch::jit::TypeResolver resolve;
        torch::jit::ObjLoader load;
        if (skipped_objects) {
            resolve = [&loader](const c10::QualifiedName& qn) { return loader.resolve(qn); };
            load = [&loader](const c10::StrongTypePtr& t, const c10::IValue& args) { return loader.load(t, args); };
        }
        torch::jit::Unpickler unpickler(read, resolve, load, read_record, at::Device(at::kCPU));
        unpickler.set_version(reader->version());
        out.root = unpickler.parse_ivalue();
        check_depth(out.root, file);
        if (skipped_objects) out.root = resolve_stand_ins(out.root);
    } catch (const InputError&) {
        throw;
    } catch (const std::exception& e) {
        const auto* c10err = dynamic_cast<const c10::Error*>(&e);
        std::string w = c10err ? c10err->what_without_backtrace() : e.what();
        throw InputError(file, "", "not a readable torch.save file (expected a dict saved by torch.save): " + w.substr(0, w.find('\n')));
    }
    return out;
}

size_t PtArchive::bytes_for(const at::Tensor& t) const {
    if (!t.defined() || !t.has_storage()) return 0;
    const auto it = record_bytes.find(t.storage().data());
    return it == record_bytes.end() ? 0 : it->second;
}

}  // namespace ampscope::detail
