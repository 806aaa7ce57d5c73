// SPDX-License-Identifier: MIT
// torch.export archives: bounded JSON parsing, dtype codes, and the weights/constants records
// (raw bytes read straight into their tensors, every tensor_meta checked against its record).
#include <algorithm>
#include <cstring>
#include <vector>

#include "ampscope/engine/errors.h"
#include "model/export_json.h"
#include "model/export_program.h"

namespace ampscope::detail::pt2 {

using nlohmann::json;

namespace {

constexpr int kMaxJsonDepth = 256;  ///< a real program nests ~16 levels (7 more per subgraph level)

/// nlohmann's parser and destructor are iterative, but copying, dump() and comparisons recurse:
/// deep nesting is refused right after parsing, before anything else touches the value.
void check_depth(const json& j, const std::string& file, const std::string& field) {
    std::vector<std::pair<const json*, int>> todo{{&j, 1}};
    while (!todo.empty()) {
        const auto [v, d] = todo.back();
        todo.pop_back();
        if (d > kMaxJsonDepth)
            throw InputError(file, field,
                             "JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                                 " levels (a serialized program nests far less)");
        if (v->is_structured())
            for (const auto& c : *v) todo.emplace_back(&c, d + 1);
    }
}

}  // namespace

json parse_json(const void* data, size_t n, const std::string& file, const std::string& field) {
    json j;
    try {
        j = json::parse(static_cast<const char*>(data), static_cast<const char*>(data) + n);
    } catch (const std::exception& e) {
        throw InputError(file, field, std::string("malformed JSON: ") + e.what());
    }
    check_depth(j, file, field);
    return j;
}

std::optional<at::ScalarType> dtype_of_code(int64_t code) {
    switch (code) {
        case 1: return at::kByte;
        case 2: return at::kChar;
        case 3: return at::kShort;
        case 4: return at::kInt;
        case 5: return at::kLong;
        case 6: return at::kHalf;
        case 7: return at::kFloat;
        case 8: return at::kDouble;
        case 9: return at::kComplexHalf;
        case 10: return at::kComplexFloat;
        case 11: return at::kComplexDouble;
        case 12: return at::kBool;
        case 13: return at::kBFloat16;
        case 28: return at::kUInt16;
        case 29: return at::kFloat8_e4m3fn;
        case 30: return at::kFloat8_e5m2;
        case 31: return at::kFloat8_e4m3fnuz;
        case 32: return at::kFloat8_e5m2fnuz;
        default: return std::nullopt;
    }
}

at::ScalarType dtype_named(const json& code, const std::string& file, const std::string& where) {
    const auto d = code.is_number_integer() ? dtype_of_code(code.get<int64_t>()) : std::nullopt;
    if (!d)
        throw InputError(
            file, where,
            "dtype code " + code.dump() + " is unknown to this build (torch 2.11 serialization codes expected)");
    return *d;
}

namespace {

struct WeightReader {
    const std::string& file;
    const SharedBytes* shared;  ///< the archive's bytes to share (nullptr: weights are copies)
    /// Each record read once: tensors that name one record share its storage, as torch.load
    /// gives them one storage (GPT-2's lm_head.weight and wte.weight: 154 MB read once).
    std::map<std::string, at::Tensor> records;

    [[noreturn]] void fail(const std::string& field, const std::string& what) const {
        throw InputError(file, field, what);
    }

    at::ScalarType dtype(const json& code, const std::string& where) const { return dtype_named(code, file, where); }

    /// The sizes, strides and offset of a tensor_meta, checked: non-negative, and the view's
    /// highest element and element count computed without overflow.
    struct View {
        std::vector<int64_t> sizes, strides;
        int64_t offset = 0;
        bool empty = false;
        __int128 last = 0;  ///< the highest element the view reaches
    };
    View view(const json& meta, const std::string& fqn) const {
        View w;
        for (const auto& s : meta.at("sizes")) {
            if (!s.is_object() || !s.contains("as_int")) fail(fqn, "a weight with a symbolic size");
            w.sizes.push_back(s["as_int"].get<int64_t>());
        }
        for (const auto& s : meta.at("strides")) w.strides.push_back(s.at("as_int").get<int64_t>());
        w.offset = meta.contains("storage_offset") ? meta["storage_offset"].value("as_int", int64_t(0)) : 0;
        if (w.sizes.size() != w.strides.size() || w.offset < 0 || w.sizes.size() > 64)
            fail(fqn,
                 "tensor_meta with inconsistent sizes/strides/offset (as many sizes as strides, at most 64, offset >= "
                 "0 expected)");
        constexpr int64_t kHuge = int64_t(1) << 48;  // each size, stride, the offset and the element count below this
        __int128 numel = 1;
        w.last = w.offset;
        for (size_t i = 0; i < w.sizes.size(); ++i) {
            if (w.sizes[i] < 0 || w.strides[i] < 0) fail(fqn, "negative size or stride");
            if (w.sizes[i] >= kHuge || w.strides[i] >= kHuge || w.offset >= kHuge)
                fail(fqn, "tensor_meta size, stride or offset beyond 2^48: not a tensor this archive can hold");
            if (w.sizes[i] == 0) w.empty = true;
            numel *= w.sizes[i];
            if (numel >= kHuge) numel = kHuge;  // saturate: no overflow with 64 dims
            w.last += __int128(std::max<int64_t>(w.sizes[i] - 1, 0)) * w.strides[i];
        }
        if (!w.empty && numel >= kHuge) fail(fqn, "tensor_meta with 2^48 elements or more");
        return w;
    }

    /// Bytes of a tensor described by tensor_meta, read from its record, with every size checked.
    at::Tensor tensor(caffe2::serialize::PyTorchStreamReader& zip, const std::string& record, const json& meta,
                      const std::string& fqn) {
        const auto st = dtype(meta.at("dtype"), fqn);
        const View w = view(meta, fqn);
        if (!zip.hasRecord(record)) fail(record, "weight record missing from the archive (for '" + fqn + "')");
        const size_t bytes = zip.getRecordSize(record);
        const size_t elem = c10::elementSize(st);
        if (!w.empty && (w.last + 1) * __int128(elem) > __int128(bytes))
            fail(fqn, "tensor_meta " + c10::str(at::IntArrayRef(w.sizes)) + " needs more bytes than record " + record +
                          " holds (" + std::to_string(bytes) + ")");
        const auto seen = records.find(record);
        const bool again = seen != records.end() && seen->second.scalar_type() == st;
        at::Tensor base = again ? seen->second : in_place(zip, record, st, bytes);
        const bool copy = !again && !base.defined();
        if (copy) base = at::empty({int64_t(bytes / elem)}, at::TensorOptions().dtype(st));
        if (!again) records[record] = base;
        if (copy && bytes / elem) {  // straight into the tensor's storage (one copy)
            if (bytes == size_t(base.nbytes()))
                zip.getRecord(record, base.data_ptr(), bytes);
            else {  // a record that is not a whole number of elements: read all, keep the elements
                auto [ptr, n] = zip.getRecord(record);
                std::memcpy(base.data_ptr(), ptr.get(), std::min(n, size_t(base.nbytes())));
            }
        }
        return w.empty ? at::empty(w.sizes, base.options()) : base.as_strided(w.sizes, w.strides, w.offset).detach();
    }

    /// The record as a tensor over the archive's own bytes (its own storage, as torch.load gives
    /// each record one), or undefined where they cannot be shared: no shared bytes, a compressed
    /// record, a size that is not whole elements, or an address not aligned to the element.
    at::Tensor in_place(caffe2::serialize::PyTorchStreamReader& zip, const std::string& record, at::ScalarType st,
                        size_t bytes) const {
        const size_t elem = c10::elementSize(st);
        if (!shared || bytes == 0 || bytes % elem != 0 || !shared->stored.count(record)) return {};
        const size_t off = zip.getRecordOffset(record);
        const auto& file_bytes = *shared->owner;
        if (off > file_bytes.size() || file_bytes.size() - off < bytes) return {};
        char* data = shared->owner->data() + off;
        if (reinterpret_cast<uintptr_t>(data) % elem != 0) return {};
        auto* keep = new std::shared_ptr<std::vector<char>>(shared->owner);
        c10::DataPtr ptr(
            data, keep, [](void* k) { delete static_cast<std::shared_ptr<std::vector<char>>*>(k); }, at::kCPU);
        c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, std::move(ptr), nullptr, false);
        return at::empty({0}, at::TensorOptions().dtype(st)).set_(storage, 0, {int64_t(bytes / elem)}, {1});
    }

    void tensors(caffe2::serialize::PyTorchStreamReader& zip, const std::string& config, const std::string& dir,
                 std::map<std::string, at::Tensor>& out, std::map<std::string, std::string>* views) {
        if (!zip.hasRecord(config)) return;
        auto [ptr, n] = zip.getRecord(config);
        const json j = parse_json(ptr.get(), n, file, config);
        try {
            const auto& cfg = j.at("config");
            if (!cfg.is_object())
                fail(config, "'config' is an object of FQN: weight entries, not " + std::string(cfg.type_name()));
            for (auto it = cfg.begin(); it != cfg.end(); ++it) {
                const std::string fqn = it.key();
                const json& c = it.value();
                if (!c.is_object())
                    fail(config, "entry '" + fqn + "' is an object (path_name, tensor_meta), not " +
                                     std::string(c.type_name()));
                if (c.value("use_pickle", false))
                    fail(fqn,
                         "a pickled (tensor-subclass) weight; ampscope reads plain tensors only (export without tensor "
                         "subclasses)");
                const std::string path = c.at("path_name").get<std::string>();
                if (path.empty() || path.find('/') != std::string::npos || path.find("..") != std::string::npos)
                    fail(config, "path_name '" + path + "' of '" + fqn + "' is a record name inside " + dir +
                                     " (no '/' or '..')");
                out[fqn] = tensor(zip, dir + path, c.at("tensor_meta"), fqn);
                if (views) {  // the record and the view: equal for tied weights
                    const auto& t = out[fqn];
                    (*views)[fqn] = dir + path + " " + c10::toString(t.scalar_type()) + c10::str(t.sizes()) +
                                    c10::str(t.strides()) + "+" + std::to_string(t.storage_offset());
                }
            }
        } catch (const InputError&) {
            throw;
        } catch (const std::exception& e) {
            fail(config, std::string("not a weights config this build reads: ") + e.what());
        }
    }
};

}  // namespace

void check_weights_against_graph(Program& p, const std::string& name) {
    auto sizes = [](const std::vector<int64_t>& v) {
        std::string s;
        for (auto d : v) s += (s.empty() ? "" : ", ") + (d < 0 ? std::string("s") : std::to_string(d));
        return "[" + s + "]";
    };
    for (const auto& in : p.inputs) {
        if (in.kind == InputSpec::Kind::User) continue;
        const auto meta = p.metas.find(in.arg);
        auto& from = in.kind == InputSpec::Kind::Parameter ? p.parameters
                     : in.kind == InputSpec::Kind::Buffer  ? p.buffers
                                                           : p.constants;
        const auto t = from.find(in.target);
        if (meta == p.metas.end() || t == from.end()) continue;
        const auto& m = meta->second;
        const std::string config = in.kind == InputSpec::Kind::Constant
                                       ? "data/constants/" + name + "_constants_config.json"
                                       : "data/weights/" + name + "_weights_config.json";
        auto fail = [&](const std::string& what, const std::string& have, const std::string& want) {
            throw InputError(p.file, config + " '" + in.target + "'",
                             what + " " + have + " in the weights config, but the program's graph records " + want +
                                 " for '" + in.arg + "' (a damaged or edited archive)");
        };
        const auto& ts = t->second;
        if (ts.scalar_type() != m.dtype) fail("dtype", c10::toString(ts.scalar_type()), c10::toString(m.dtype));
        bool same = size_t(ts.dim()) == m.sizes.size();
        for (size_t d = 0; same && d < m.sizes.size(); ++d) same = m.sizes[d] < 0 || m.sizes[d] == ts.size(int64_t(d));
        if (!same) fail("sizes", c10::str(ts.sizes()), sizes(m.sizes));
        if (in.kind == InputSpec::Kind::Parameter && !m.requires_grad) p.frozen.insert(in.target);
    }
}

void read_weights(caffe2::serialize::PyTorchStreamReader& zip, const std::string& file, const std::string& config,
                  const std::string& dir, std::map<std::string, at::Tensor>& out,
                  std::map<std::string, std::string>* views, const SharedBytes* shared) {
    WeightReader{file, shared, {}}.tensors(zip, config, dir, out, views);
}

/// Parameters the archive stores as one tensor (the same record and view: torch.export.save
/// writes a shared storage once) are tied: one tensor, as they are one Parameter in the module,
/// so that both uses' gradients accumulate into it and an optimizer updates it once.
void tie_parameters(Program& p, const std::map<std::string, std::string>& views) {
    std::map<std::string, std::string> first;  // view -> FQN
    for (const auto& f : p.parameter_order) {
        const auto v = views.find(f);
        if (v == views.end()) continue;
        const auto [it, fresh] = first.emplace(v->second, f);
        if (fresh) continue;
        p.parameters[f] = p.parameters.at(it->second);
        p.tied[f] = it->second;
    }
}

}  // namespace ampscope::detail::pt2
