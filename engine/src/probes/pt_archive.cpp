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

#include "ampscope/engine/errors.h"
#include "probes/pt_archive.h"

namespace ampscope::detail {
namespace {

/// The archive's bytes for miniz. LibTorch's MemoryReadAdapter copies whatever miniz asks for,
/// and miniz asks for offsets taken from the (possibly damaged) central directory: clamp.
class BoundedReader final : public caffe2::serialize::ReadAdapterInterface {
public:
    explicit BoundedReader(const std::vector<char>& bytes) : bytes_(bytes) {}
    size_t size() const override { return bytes_.size(); }
    size_t read(uint64_t pos, void* buf, size_t n, const char* what = "") const override {
        (void)what;
        if (pos >= bytes_.size()) return 0;
        n = std::min<uint64_t>(n, bytes_.size() - pos);
        if (n) std::memcpy(buf, bytes_.data() + pos, n);
        return n;
    }

private:
    const std::vector<char>& bytes_;
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

/// What lenient_pickle puts beside an object whose state it could not apply.
constexpr std::string_view kBuiltMarker = "__ampscope_built__";

/// Globals LibTorch's unpickler builds itself: tensors and storages. (It reads an
/// OrderedDict as None: state dicts are OrderedDicts, so they are rewritten like the rest.)
bool torch_builds(const std::string& module) {
    return module == "torch" || module == "torch._utils" || module == "torch._tensor";
}

/// One opcode of a pickle: the byte and its range [begin, end) with its arguments.
struct Op {
    unsigned char op;
    size_t begin, end;
};

/// The pickle of a checkpoint written by Python training code, rewritten so that LibTorch's
/// unpickler reads its tensors: a class it cannot build (OrderedDict, a user's config object,
/// Lightning's AttributeDict, ...) called without arguments (`cls () REDUCE` or NEWOBJ, the
/// form pickle protocol 2 gives) becomes an empty dict, so that its items still arrive; a
/// class used any other way becomes None; object state (BUILD: OrderedDict's `_metadata`, an
/// object's attributes) is kept beside it as (object, state, marker) until unwrap_built(). Classes other than OrderedDict are named in
/// `skipped`.
std::string lenient_pickle(const char* data, size_t size, const std::string& file, std::vector<std::string>& skipped) {
    std::vector<Op> ops;
    PickleWalker(data, size, file, [&](unsigned char op, size_t begin, size_t end) { ops.push_back({op, begin, end}); }).walk();
    std::set<uint64_t> dict_makers;  // memo indices holding a rewritten class
    uint64_t next_memo = 0;
    auto index_of = [&](const Op& o) -> uint64_t {
        uint64_t v = 0;
        if (o.op == 'p' || o.op == 'g') return std::strtoull(std::string(data + o.begin + 1, o.end - o.begin - 2).c_str(), nullptr, 10);
        for (size_t k = o.end; k-- > o.begin + 1;) v = (v << 8) | static_cast<unsigned char>(data[k]);
        return v;
    };
    auto is_put = [](unsigned char op) { return op == 'p' || op == 'q' || op == 'r' || op == 0x94; };
    std::vector<bool> maker(ops.size(), false);
    for (size_t i = 0; i < ops.size(); ++i) {
        const Op& o = ops[i];
        if (o.op == 'c') {
            const std::string_view b(data + o.begin + 1, o.end - o.begin - 2);
            const auto nl = b.find('\n');
            const std::string module(b.substr(0, nl)), name(b.substr(nl + 1));
            if (!torch_builds(module)) {
                maker[i] = true;
                const std::string qn = module + "." + name;
                if (qn != "collections.OrderedDict" && std::find(skipped.begin(), skipped.end(), qn) == skipped.end())
                    skipped.push_back(qn);
            }
        } else if (o.op == 'h' || o.op == 'j' || o.op == 'g') {
            maker[i] = dict_makers.count(index_of(o)) > 0;
        }
        if (is_put(o.op)) {
            const uint64_t idx = o.op == 0x94 ? next_memo : index_of(o);
            next_memo = std::max(next_memo, idx + 1);
            if (i > 0 && maker[i - 1]) dict_makers.insert(idx);
            if (i > 0 && maker[i - 1]) maker[i] = true;  // the class is still on top of the stack
        }
    }
    std::string out;
    out.reserve(size);
    for (size_t i = 0; i < ops.size(); ++i) {
        const Op& o = ops[i];
        if (!maker[i] || is_put(o.op)) {
            if (o.op == 'b')  // BUILD: (object, state, marker) instead; unwrap_built() keeps the object
                out += std::string("X") + char(kBuiltMarker.size()) + std::string(3, '\0') + std::string(kBuiltMarker) + "\x87";
            else
                out.append(data + o.begin, o.end - o.begin);
            continue;
        }
        size_t next = i + 1;
        while (next < ops.size() && is_put(ops[next].op)) ++next;
        const bool called = next + 1 < ops.size() && ops[next].op == ')' && (ops[next + 1].op == 'R' || ops[next + 1].op == 0x81);
        out += called ? '}' : 'N';  // called without arguments: an empty dict; else None
        for (size_t k = i + 1; k < next; ++k) out.append(data + ops[k].begin, ops[k].end - ops[k].begin);
        if (called)
            i = next + 1;  // () and REDUCE/NEWOBJ consumed
        else
            i = next - 1;
    }
    return out;
}

/// The sizes a zip's central directory declares, before LibTorch's reader allocates any of them
/// (its constructor already reads a record). miniz takes the directory from the zip64 end record
/// when a zip64 locator is present (torch writes one in every archive) and from the classic end
/// record otherwise: both directories are walked, a size beyond the file is refused, and so is a
/// directory that cannot be walked to its last entry (it is what miniz would read).
/// The values lenient_pickle wrapped as (object, state, marker), replaced by their object.
c10::IValue unwrap_built(const c10::IValue& v, int depth = 0) {
    if (depth > 200) return v;
    if (v.isTuple()) {
        const auto& el = v.toTupleRef().elements();
        if (el.size() == 3 && el[2].isString() && el[2].toStringRef() == kBuiltMarker) return unwrap_built(el[0], depth + 1);
        std::vector<c10::IValue> out;
        for (const auto& e : el) out.push_back(unwrap_built(e, depth + 1));
        return c10::ivalue::Tuple::create(std::move(out));
    }
    if (v.isGenericDict()) {
        c10::impl::GenericDict out(c10::AnyType::get(), c10::AnyType::get());
        for (const auto& kv : v.toGenericDict())
            out.insert_or_assign(unwrap_built(kv.key(), depth + 1), unwrap_built(kv.value(), depth + 1));
        return out;
    }
    if (v.isList()) {
        c10::impl::GenericList out(c10::AnyType::get());
        for (const auto& e : v.toListRef()) out.push_back(unwrap_built(e, depth + 1));
        return out;
    }
    return v;
}

void check_declared_sizes(const std::vector<char>& bytes, const std::string& file, std::set<std::string>* stored) {
    const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
    const size_t n = bytes.size();
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
                    throw InputError(file, std::string(bytes.data() + at + 46, name),
                                     "record declares " + std::to_string(s) + " bytes in a file of " + std::to_string(n) +
                                         " (a damaged or hostile archive)");
            if (stored && u(at + 10, 2) == 0 && sizes[0] == sizes[1]) {  // method 0: the record's bytes as they are
                const std::string full(bytes.data() + at + 46, name);
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
    using caffe2::serialize::PyTorchStreamReader;
    check_declared_sizes(bytes, file, stored);
    auto reader = std::make_shared<PyTorchStreamReader>(std::make_unique<BoundedReader>(bytes));
    // torch.save and torch.export.save store records uncompressed: none can be larger than the file.
    for (const auto& name : reader->getAllRecords()) {
        const size_t size = reader->getRecordSize(name);
        if (size > bytes.size())
            throw InputError(file, name,
                             "record declares " + std::to_string(size) + " bytes in a file of " + std::to_string(bytes.size()) +
                                 " (a damaged or hostile archive)");
    }
    return reader;
}

PtArchive read_pt_archive(const std::vector<char>& bytes, const std::string& file, std::vector<std::string>* skipped_objects) {
    using caffe2::serialize::PyTorchStreamReader;
    PtArchive out;
    try {
        auto reader = open_checked_zip(bytes, file);
        if (!reader->hasRecord("data.pkl"))
            throw InputError(file, "", "a zip archive without data.pkl; expected a file written by torch.save");
        const auto pkl_record = reader->getRecord("data.pkl");
        const at::DataPtr& pkl = std::get<0>(pkl_record);
        size_t pkl_size = std::get<1>(pkl_record);
        check_pickle_lengths(static_cast<const char*>(pkl.get()), pkl_size, file);
        const std::string lenient =
            skipped_objects ? lenient_pickle(static_cast<const char*>(pkl.get()), pkl_size, file, *skipped_objects) : std::string();
        size_t pos = 0;
        const char* pkl_data = skipped_objects ? lenient.data() : static_cast<const char*>(pkl.get());
        if (skipped_objects) pkl_size = lenient.size();
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
        torch::jit::Unpickler unpickler(read, nullptr, nullptr, read_record, at::Device(at::kCPU));
        unpickler.set_version(reader->version());
        out.root = unpickler.parse_ivalue();
        if (skipped_objects) out.root = unwrap_built(out.root);
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
