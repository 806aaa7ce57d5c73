// SPDX-License-Identifier: MIT
// safetensors reader: the header's JSON parsed by nlohmann-json, every entry checked (dtype,
// shape, offsets in order, contiguous, covering the data, sizes = numel x dtype size) before
// any byte is copied into a tensor. The rules are the reference implementation's.
#include "replay/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/files.h"
#include "ampscope/engine/json_depth.h"
#include "ampscope/engine/text.h"

namespace ampscope::detail {
namespace {

using nlohmann::json;

/// The dtypes read (safetensors name -> torch dtype); others are refused by name.
const std::map<std::string, at::ScalarType>& dtypes() {
    static const std::map<std::string, at::ScalarType> m = {
        {"F64", at::kDouble},
        {"F32", at::kFloat},
        {"F16", at::kHalf},
        {"BF16", at::kBFloat16},
        {"I64", at::kLong},
        {"I32", at::kInt},
        {"I16", at::kShort},
        {"I8", at::kChar},
        {"U8", at::kByte},
        {"BOOL", at::kBool},
        {"F8_E4M3", at::kFloat8_e4m3fn},
        {"F8_E5M2", at::kFloat8_e5m2},
    };
    return m;
}

std::string known_dtypes() {
    std::string s;
    for (const auto& [name, t] : dtypes()) s += (s.empty() ? "" : ", ") + name;
    return s;
}

/// A value of the header in a message: at most 80 characters of it (a header may hold 100 MB).
std::string brief(const json& v) {
    return clip_echo(v.dump(), 80);
}

/// A non-negative JSON integer, or InputError.
uint64_t unsigned_of(const json& v, const std::string& file, const std::string& field, const char* what) {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
    throw InputError(file, field, std::string("expected a non-negative integer in ") + what + ", got " + brief(v));
}

struct Entry {
    std::string name;
    at::ScalarType dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;
};

Entry read_entry(const std::string& name, const json& v, const std::string& file) {
    if (!v.is_object())
        throw InputError(file, name,
                         "expected an object {dtype, shape, data_offsets}, got " + std::string(v.type_name()));
    for (const char* k : {"dtype", "shape", "data_offsets"})
        if (!v.contains(k))
            throw InputError(file, name, std::string("missing '") + k + "'; expected {dtype, shape, data_offsets}");
    Entry e;
    e.name = name;
    const auto& dt = v["dtype"];
    const auto it = dt.is_string() ? dtypes().find(dt.get<std::string>()) : dtypes().end();
    if (it == dtypes().end())
        throw InputError(file, name, "dtype " + brief(dt) + " is not read; expected one of " + known_dtypes());
    e.dtype = it->second;
    const auto& shape = v["shape"];
    if (!shape.is_array())
        throw InputError(file, name, "expected 'shape' to be a list of integers, got " + brief(shape));
    uint64_t numel = 1, span = 1;  // span: the product of the sizes but zeros (a zero-size tensor's strides need it)
    for (const auto& d : shape) {
        const uint64_t n = unsigned_of(d, file, name, "'shape'");
        if (n > uint64_t(INT64_MAX) || __builtin_mul_overflow(span, std::max<uint64_t>(n, 1), &span) ||
            span > uint64_t(INT64_MAX))
            throw InputError(
                file, name,
                "'shape' " + brief(shape) + " has an element count that overflows; expected a shape torch can hold");
        numel *= n;
        e.shape.push_back(int64_t(n));
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2)
        throw InputError(file, name, "expected 'data_offsets' [begin, end], got " + brief(off));
    e.begin = unsigned_of(off[0], file, name, "'data_offsets'");
    e.end = unsigned_of(off[1], file, name, "'data_offsets'");
    if (e.end < e.begin) throw InputError(file, name, "'data_offsets' " + brief(off) + " end before begin");
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(numel, uint64_t(c10::elementSize(e.dtype)), &bytes) || bytes != e.end - e.begin)
        throw InputError(file, name,
                         "'data_offsets' " + brief(off) + " span " + std::to_string(e.end - e.begin) +
                             " bytes; shape " + brief(shape) + " of " + dt.get<std::string>() + " needs " +
                             std::to_string(numel) + " x " + std::to_string(c10::elementSize(e.dtype)));
    return e;
}

/// A first pass over the header: nesting depth (printing or copying a deeper value would
/// overflow the stack) and duplicate top-level keys (nlohmann would keep the last silently).
/// A SAX pass, because nlohmann's parse callback rescans the enclosing object at the end of
/// each value in it: quadratic in the number of entries (1e5 entries took minutes).
class HeaderCheck final : public nlohmann::json_sax<json> {
public:
    explicit HeaderCheck(const std::string& file) : file_(file) {}
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return open(); }
    bool end_object() override { return --depth_, true; }
    bool start_array(std::size_t) override { return open(); }
    bool end_array() override { return --depth_, true; }
    bool key(string_t& k) override {
        if (depth_ == 1 && !seen_.insert(k).second && duplicate.empty()) duplicate = k;
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
        throw InputError(file_, "header", std::string("is not valid JSON: ") + e.what());
    }
    std::string duplicate;

private:
    bool open() {
        check_json_depth(depth_++, file_, "header", "tensor entries");
        return true;
    }
    const std::string& file_;
    int depth_ = 0;
    std::set<std::string> seen_;
};

/// The header JSON: an object, no NUL byte (nlohmann would end the text there: the format pads
/// with spaces), nested at most 64 levels, no duplicate tensor names.
json parse_header(const char* text, size_t n, const std::string& file) {
    if (n == 0 || text[0] != '{') throw InputError(file, "header", "expected a JSON object starting with '{'");
    if (const void* nul = std::memchr(text, '\0', n))
        throw InputError(file, "header",
                         "holds a NUL byte at offset " + std::to_string(static_cast<const char*>(nul) - text) +
                             "; expected JSON text (padded with spaces)");
    HeaderCheck check(file);
    json::sax_parse(text, text + n, &check);
    if (!check.duplicate.empty())
        throw InputError(file, check.duplicate, "appears twice in the header; expected unique tensor names");
    json h;
    try {
        h = json::parse(text, text + n);
    } catch (const json::exception& e) {
        throw InputError(file, "header", std::string("is not valid JSON: ") + e.what());
    }
    if (!h.is_object()) throw InputError(file, "header", "expected a JSON object");
    return h;
}

std::map<std::string, std::string> read_metadata(const json& m, const std::string& file) {
    if (!m.is_object())
        throw InputError(file, "__metadata__", "expected an object of strings, got " + std::string(m.type_name()));
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : m.items()) {
        if (!v.is_string())
            throw InputError(file, "__metadata__." + k, "expected a string, got " + std::string(v.type_name()));
        out[k] = v.get<std::string>();
    }
    return out;
}

/// Entries in offset order must tile the data exactly: no hole, no overlap, nothing left over.
void check_layout(std::vector<Entry>& entries, uint64_t data_size, const std::string& file) {
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
    uint64_t at = 0;
    for (const auto& e : entries) {
        if (e.begin != at)
            throw InputError(file, e.name,
                             "'data_offsets' begin at " + std::to_string(e.begin) + ", expected " + std::to_string(at) +
                                 (e.begin > at ? " (a hole in the data)" : " (overlaps the previous tensor)"));
        at = e.end;
    }
    if (at != data_size)
        throw InputError(file, entries.empty() ? "header" : entries.back().name,
                         "the tensors cover " + std::to_string(at) + " bytes of data, but the file holds " +
                             std::to_string(data_size) + " after its header");
}

}  // namespace

Safetensors parse_safetensors(const char* bytes, size_t size, const std::string& file,
                              const std::shared_ptr<const MappedFile>& owner) {
    if (size < 8) throw InputError(file, "header length", "the file is shorter than the 8-byte header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[size_t(i)]);
    if (n > kSafetensorsMaxHeader)
        throw InputError(file, "header length",
                         std::to_string(n) + " bytes; expected at most " + std::to_string(kSafetensorsMaxHeader));
    if (n > size - 8)
        throw InputError(file, "header length",
                         std::to_string(n) + " bytes, but only " + std::to_string(size - 8) + " follow");
    const json h = parse_header(bytes + 8, size_t(n), file);
    Safetensors out;
    std::vector<Entry> entries;
    for (const auto& [k, v] : h.items()) {
        if (k == "__metadata__")
            out.metadata = read_metadata(v, file);
        else
            entries.push_back(read_entry(k, v, file));
    }
    const size_t data_at = 8 + size_t(n);
    check_layout(entries, size - data_at, file);
    for (const auto& e : entries) {
        const size_t at = data_at + size_t(e.begin), item = c10::elementSize(e.dtype);
        const auto options = at::TensorOptions().dtype(e.dtype);
        at::Tensor t;
        if (owner && e.end > e.begin &&
            (reinterpret_cast<uintptr_t>(owner->data() + at) % item) == 0)  // over the mapping, no copy
            t = at::from_blob(
                owner->writable() + at, e.shape, [owner](void*) {}, options);
        else {
            t = at::empty(e.shape, options);
            if (e.end > e.begin) std::memcpy(t.data_ptr(), bytes + at, size_t(e.end - e.begin));
        }
        out.tensors.emplace(e.name, std::move(t));
    }
    return out;
}

Safetensors parse_safetensors(const std::vector<char>& bytes, const std::string& file) {
    return parse_safetensors(bytes.data(), bytes.size(), file, nullptr);
}

Safetensors read_safetensors(const std::string& path) {
    const auto file = MappedFile::open(path, "", "a safetensors file");
    return parse_safetensors(file->data(), file->size(), path, file);
}

}  // namespace ampscope::detail
