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
#include <cctype>
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
#include "torchsave/pickle_walker.h"
#include "torchsave/pt_archive.h"
#include "torchsave/pt_lenient.h"

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
    PickleWalker(data, size, file, [&](unsigned char op, size_t begin, size_t end) {
        shape.op(op, data, {op, begin, end});
    }).walk();
    if (shape.depth() > size_t(kMaxPickleDepth))
        throw InputError(file, "data.pkl",
                         "nests values deeper than " + std::to_string(kMaxPickleDepth) +
                             " levels (or in a cycle); expected a checkpoint saved by torch.save");
}

/// Deflate's largest expansion: 258 bytes from a 2-bit code, about 1032 to 1.
constexpr uint64_t kMaxDeflateRatio = 1032;

/// What the deflated code and debug records of an archive of `n` bytes may unpack to together
/// (a scripted model's expand 3 to 5 times; LibTorch copies the source text a few times more).
constexpr uint64_t kScriptTextBudget(uint64_t n) {
    return 8 * n + (uint64_t(16) << 20);
}

/// Whether a record is one torch.jit.save deflates: TorchScript source ("code/") or its debug
/// information ("*.debug_pkl"), named in any case (miniz finds records case-insensitively).
bool script_text(std::string record) {
    for (auto& c : record) c = char(std::tolower(static_cast<unsigned char>(c)));
    const auto ends_with = [&](const std::string& tail) {
        return record.size() >= tail.size() && record.compare(record.size() - tail.size(), tail.size(), tail) == 0;
    };
    return record.rfind("code/", 0) == 0 || record.find("/code/") != std::string::npos || ends_with(".debug_pkl");
}

/// One record's declared sizes against a file of `n` bytes. torch.jit.save deflates its code and
/// debug records (torch.save and torch.export.save deflate none), which may unpack past the
/// file's size: within deflate's 1032:1 each, and all of them (`unpacked`, the directory's sum so
/// far) within kScriptTextBudget; any other record, and every compressed size, within the file.
void check_record_sizes(const std::string& file, const std::string& record, bool deflated, uint64_t uncompressed,
                        uint64_t compressed, uint64_t n, uint64_t& unpacked) {
    if (deflated && script_text(record) && compressed <= n) {
        if (uncompressed > compressed * kMaxDeflateRatio + 1024)
            throw InputError(file, record,
                             "record declares " + std::to_string(uncompressed) + " bytes deflated into " +
                                 std::to_string(compressed) + ", more than deflate's " +
                                 std::to_string(kMaxDeflateRatio) + ":1 can give (a damaged or hostile archive)");
        unpacked += uncompressed;
        if (unpacked > kScriptTextBudget(n))
            throw InputError(file, record,
                             "the archive's deflated code and debug records unpack to more than " +
                                 std::to_string(kScriptTextBudget(n)) +
                                 " bytes (8 times the file's size and 16 MiB; a damaged or hostile archive)");
        uncompressed = 0;  // counted in the budget: only the compressed size is left to check
    }
    for (const uint64_t s : {uncompressed, compressed})
        if (s > n)
            throw InputError(file, record,
                             "record declares " + std::to_string(s) + " bytes in a file of " + std::to_string(n) +
                                 " (a damaged or hostile archive)");
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
    if (u(eocd + 10, 2) != 0xFFFF && u(eocd + 16, 4) != 0xFFFFFFFFu)
        directories.emplace_back(u(eocd + 10, 2), u(eocd + 16, 4));
    if (eocd >= 20 && u(eocd - 20, 4) == 0x07064b50) {
        const uint64_t z = u(eocd - 20 + 8, 8);
        if (z > n || n - z < 56 || u(size_t(z), 4) != 0x06064b50)
            throw damaged("zip64 end record", "the zip64 locator points outside the file");
        directories.emplace_back(u(size_t(z) + 32, 8), u(size_t(z) + 48, 8));
    }
    for (const auto& [count, start] : directories) {
        if (count > n / 46)
            throw damaged("central directory", "declares " + std::to_string(count) + " entries in a file of " +
                                                   std::to_string(n) + " bytes");
        uint64_t pos = start, unpacked = 0;
        for (uint64_t k = 0; k < count; ++k) {
            if (pos > n || n - pos < 46 || u(size_t(pos), 4) != 0x02014b50)
                throw damaged("central directory", "entry " + std::to_string(k) + " of " + std::to_string(count) +
                                                       " is not where the directory says");
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
            const std::string record(data + at + 46, name);
            check_record_sizes(file, record, u(at + 10, 2) != 0, sizes[0], sizes[1], n, unpacked);
            if (stored && u(at + 10, 2) == 0 && sizes[0] == sizes[1]) {  // method 0: the record's bytes as they are
                const auto slash = record.find('/');  // the reader names records without the archive's folder
                stored->insert(slash == std::string::npos ? record : record.substr(slash + 1));
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
    if (t.layout() != at::kStrided)
        throw InputError(file, field, "a sparse or non-strided Tensor; expected a dense Tensor");
    if (t.is_meta())
        throw InputError(file, field,
                         "a meta Tensor (shape and dtype only, no data: a model built on the meta device); expected a "
                         "Tensor with data");
    if (t.is_quantized())
        throw InputError(file, field,
                         "a quantized Tensor; expected a floating-point Tensor (dequantize before saving)");
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
        if (!n)
            throw InputError(file, field,
                             "declares a shape whose element count overflows; expected a Tensor saved by torch.save");
        numel = *n;
        if (sizes[d] > 0) {
            const auto span = mul(sizes[d] - 1, strides[d]);
            const auto l = span ? add(last, *span) : std::nullopt;
            if (!l)
                throw InputError(file, field, "declares strides that overflow; expected a Tensor saved by torch.save");
            last = *l;
        }
    }
    if (numel == 0) return;
    const int64_t offset = t.storage_offset();
    const auto end_elems = offset < 0 ? std::nullopt : add(offset, last + 1);
    const auto end_bytes = end_elems ? mul(*end_elems, item) : std::nullopt;
    if (!end_bytes || *end_bytes > storage_bytes)
        throw InputError(file, field,
                         "shape " + shape_of(t) + " at offset " + std::to_string(offset) +
                             " reaches past the end of its stored data (" + std::to_string(storage_bytes / item) +
                             " elements); a damaged or hand-edited file");
    // A tensor may not declare more elements than the file holds for it (stride-0 views saved
    // by torch.save are refused too: they would be materialised at their full size).
    if (numel > storage_bytes / item)
        throw InputError(file, field,
                         "shape " + shape_of(t) + " declares " + std::to_string(numel) +
                             " elements, but its stored data holds " + std::to_string(storage_bytes / item) +
                             "; save a contiguous Tensor (x.contiguous())");
}

std::shared_ptr<caffe2::serialize::PyTorchStreamReader> open_checked_zip(const std::vector<char>& bytes,
                                                                         const std::string& file,
                                                                         std::set<std::string>* stored) {
    return open_checked_zip(bytes.data(), bytes.size(), file, stored);
}

std::shared_ptr<caffe2::serialize::PyTorchStreamReader> open_checked_zip(const char* data, size_t size,
                                                                         const std::string& file,
                                                                         std::set<std::string>* stored) {
    using caffe2::serialize::PyTorchStreamReader;
    // every record's sizes bounded before the reader allocates any: a stored record's by the file,
    // a deflated one's by deflate's ratio (TorchScript's code and debug records)
    check_declared_sizes(data, size, file, stored);
    return std::make_shared<PyTorchStreamReader>(std::make_unique<BoundedReader>(data, size));
}

PtArchive read_pt_archive(const std::vector<char>& bytes, const std::string& file,
                          std::vector<std::string>* skipped_objects) {
    return read_pt_archive(bytes.data(), bytes.size(), file, skipped_objects);
}

PtArchive read_pt_archive(const char* data, size_t size, const std::string& file,
                          std::vector<std::string>* skipped_objects) {
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
            skipped_objects ? lenient_pickle(static_cast<const char*>(pkl.get()), pkl_size, file, *skipped_objects)
                            : Lenient();
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
        throw InputError(
            file, "",
            "not a readable torch.save file (expected a dict saved by torch.save): " + w.substr(0, w.find('\n')));
    }
    return out;
}

size_t PtArchive::bytes_for(const at::Tensor& t) const {
    if (!t.defined() || !t.has_storage()) return 0;
    const auto it = record_bytes.find(t.storage().data());
    return it == record_bytes.end() ? 0 : it->second;
}

}  // namespace ampscope::detail
