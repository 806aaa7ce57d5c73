// SPDX-License-Identifier: MIT
// safetensors reader: the header's JSON parsed by nlohmann-json, every entry checked (dtype,
// shape, offsets in order, contiguous, covering the data, sizes = numel x dtype size) before
// any byte is copied into a tensor. The rules are the reference implementation's.
#include "checkpoint/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
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
    if (!v.is_object()) throw InputError(file, name, "expected an object {dtype, shape, data_offsets}, got " + std::string(v.type_name()));
    for (const char* k : {"dtype", "shape", "data_offsets"})
        if (!v.contains(k)) throw InputError(file, name, std::string("missing '") + k + "'; expected {dtype, shape, data_offsets}");
    Entry e;
    e.name = name;
    const auto& dt = v["dtype"];
    const auto it = dt.is_string() ? dtypes().find(dt.get<std::string>()) : dtypes().end();
    if (it == dtypes().end()) throw InputError(file, name, "dtype " + brief(dt) + " is not read; expected one of " + known_dtypes());
    e.dtype = it->second;
    const auto& shape = v["shape"];
    if (!shape.is_array()) throw InputError(file, name, "expected 'shape' to be a list of integers, got " + brief(shape));
    uint64_t numel = 1;
    for (const auto& d : shape) {
        const uint64_t n = unsigned_of(d, file, name, "'shape'");
        if (n > uint64_t(INT64_MAX) || __builtin_mul_overflow(numel, n, &numel))
            throw InputError(file, name, "'shape' " + brief(shape) + " has an element count that overflows");
        e.shape.push_back(int64_t(n));
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2) throw InputError(file, name, "expected 'data_offsets' [begin, end], got " + brief(off));
    e.begin = unsigned_of(off[0], file, name, "'data_offsets'");
    e.end = unsigned_of(off[1], file, name, "'data_offsets'");
    if (e.end < e.begin) throw InputError(file, name, "'data_offsets' " + brief(off) + " end before begin");
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(numel, uint64_t(c10::elementSize(e.dtype)), &bytes) || bytes != e.end - e.begin)
        throw InputError(file, name,
                         "'data_offsets' " + brief(off) + " span " + std::to_string(e.end - e.begin) + " bytes; shape " + brief(shape) +
                             " of " + dt.get<std::string>() + " needs " + std::to_string(numel) + " x " +
                             std::to_string(c10::elementSize(e.dtype)));
    return e;
}

/// The header JSON, duplicate top-level keys refused (nlohmann would keep the last silently).
json parse_header(const char* text, size_t n, const std::string& file) {
    if (n == 0 || text[0] != '{') throw InputError(file, "header", "expected a JSON object starting with '{'");
    std::set<std::string> seen;
    std::string duplicate;
    auto cb = [&](int depth, json::parse_event_t ev, json& parsed) {
        check_json_depth(depth, file, "header", "tensor entries");  // printing a deeper value would overflow the stack
        if (ev == json::parse_event_t::key && depth == 1 && parsed.is_string() && !seen.insert(parsed.get<std::string>()).second)
            duplicate = parsed.get<std::string>();
        return true;
    };
    json h;
    try {
        h = json::parse(text, text + n, cb);
    } catch (const json::exception& e) {
        throw InputError(file, "header", std::string("is not valid JSON: ") + e.what());
    }
    if (!duplicate.empty()) throw InputError(file, duplicate, "appears twice in the header; expected unique tensor names");
    if (!h.is_object()) throw InputError(file, "header", "expected a JSON object");
    return h;
}

std::map<std::string, std::string> read_metadata(const json& m, const std::string& file) {
    if (!m.is_object()) throw InputError(file, "__metadata__", "expected an object of strings, got " + std::string(m.type_name()));
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : m.items()) {
        if (!v.is_string()) throw InputError(file, "__metadata__." + k, "expected a string, got " + std::string(v.type_name()));
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
                         "the tensors cover " + std::to_string(at) + " bytes of data, but the file holds " + std::to_string(data_size) +
                             " after its header");
}

}  // namespace

Safetensors parse_safetensors(const std::vector<char>& bytes, const std::string& file) {
    if (bytes.size() < 8) throw InputError(file, "header length", "the file is shorter than the 8-byte header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[size_t(i)]);
    if (n > kSafetensorsMaxHeader)
        throw InputError(file, "header length", std::to_string(n) + " bytes; expected at most " + std::to_string(kSafetensorsMaxHeader));
    if (n > bytes.size() - 8)
        throw InputError(file, "header length", std::to_string(n) + " bytes, but only " + std::to_string(bytes.size() - 8) + " follow");
    const json h = parse_header(bytes.data() + 8, size_t(n), file);
    Safetensors out;
    std::vector<Entry> entries;
    for (const auto& [k, v] : h.items()) {
        if (k == "__metadata__")
            out.metadata = read_metadata(v, file);
        else
            entries.push_back(read_entry(k, v, file));
    }
    const char* data = bytes.data() + 8 + n;
    const uint64_t data_size = bytes.size() - 8 - n;
    check_layout(entries, data_size, file);
    for (const auto& e : entries) {
        auto t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype));
        if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, size_t(e.end - e.begin));
        out.tensors.emplace(e.name, std::move(t));
    }
    return out;
}

Safetensors read_safetensors(const std::string& path) {
    return parse_safetensors(read_regular_file(path, "", "a safetensors file"), path);
}

}  // namespace ampscope::detail
