// SPDX-License-Identifier: MIT
#include "layer_chunk.h"

#include <cstdint>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "ampscope/storage/errors.h"
#include "layer_stats.h"

namespace ampscope::storage::chunk {

namespace {

struct Header {
    char magic[4];
    uint32_t rows, strings, dims;
};

/// The fixed part of a row; then popcount(counter_mask) int64 counters (the non-zero ones of
/// the 11 in PackedStats order) and the 6 float64 values of PackedStats.
struct Record {
    int32_t index;
    uint32_t module, op, dtype;  ///< string numbers
    uint8_t flags;               ///< 1 autocast, 2 inputs finite, 4 origin
    uint8_t ndim;
    uint16_t counter_mask;
    uint32_t dim_offset;
};
static_assert(sizeof(Header) == 16 && sizeof(Record) == 24, "chunk layout");

constexpr uint32_t kMaxDims = 64;

template <class T>
void put(std::string& out, const T& v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace

std::string encode(const std::vector<LayerStat>& layers, size_t begin, size_t end) {
    std::unordered_map<std::string_view, uint32_t> ids;
    std::vector<std::string_view> strings;
    auto intern = [&](const std::string& s) {
        auto [it, added] = ids.emplace(s, uint32_t(strings.size()));
        if (added) strings.push_back(s);
        return it->second;
    };
    std::string recs;
    recs.reserve((end - begin) * (sizeof(Record) + 2 * 8 + 6 * 8));
    std::vector<int64_t> dims;
    for (size_t i = begin; i < end; ++i) {
        const auto& l = layers[i];
        if (l.shape.size() > kMaxDims)
            throw StoreError("layer " + std::to_string(l.index) + " has more than 64 dimensions");
        Record r;
        std::memset(&r, 0, sizeof r);
        r.index = l.index;
        r.module = intern(l.module);
        r.op = intern(l.op);
        r.dtype = intern(l.dtype);
        r.flags = uint8_t(uint8_t(l.autocast) | uint8_t(l.inputs_finite) << 1 | uint8_t(l.origin) << 2);
        r.ndim = uint8_t(l.shape.size());
        r.dim_offset = uint32_t(dims.size());
        dims.insert(dims.end(), l.shape.begin(), l.shape.end());
        const PackedStats ps = pack(l.stats);
        for (int k = 0; k < 11; ++k) r.counter_mask |= uint16_t(ps.i[k] != 0) << k;
        put(recs, r);
        for (int k = 0; k < 11; ++k)
            if (ps.i[k] != 0) put(recs, ps.i[k]);
        recs.append(reinterpret_cast<const char*>(ps.d), sizeof ps.d);
    }
    std::string out;
    size_t string_bytes = 0;
    for (auto s : strings) string_bytes += 4 + s.size();
    out.reserve(sizeof(Header) + string_bytes + recs.size() + dims.size() * 8);
    Header h{{'A', 'L', 'C', '1'}, uint32_t(end - begin), uint32_t(strings.size()), uint32_t(dims.size())};
    put(out, h);
    for (auto s : strings) {
        put(out, uint32_t(s.size()));
        out.append(s.data(), s.size());
    }
    out += recs;
    out.append(reinterpret_cast<const char*>(dims.data()), dims.size() * sizeof(int64_t));
    return out;
}

void decode(const void* data, size_t bytes, std::vector<LayerStat>& out, const std::string& where) {
    auto bad = [&](const std::string& why) {
        return StoreError("layer statistics of " + where + " are malformed: " + why);
    };
    const char* p = static_cast<const char*>(data);
    const char* const e = p + bytes;
    Header h;
    if (bytes < sizeof h) throw bad("chunk shorter than its header");
    std::memcpy(&h, p, sizeof h);
    p += sizeof h;
    if (std::memcmp(h.magic, "ALC1", 4) != 0) throw bad("unknown chunk format");
    if (h.rows > kChunkRows) throw bad("more rows than a chunk holds");
    std::vector<std::string> strings;
    strings.reserve(std::min<size_t>(h.strings, 3 * kChunkRows));
    for (uint32_t i = 0; i < h.strings; ++i) {
        uint32_t len;
        if (size_t(e - p) < sizeof len) throw bad("string table truncated");
        std::memcpy(&len, p, sizeof len);
        p += sizeof len;
        if (size_t(e - p) < len) throw bad("string table truncated");
        strings.emplace_back(p, len);
        p += len;
    }
    if (size_t(e - p) < size_t(h.dims) * sizeof(int64_t)) throw bad("shapes truncated");
    const char* const dims = e - size_t(h.dims) * sizeof(int64_t);  // records end where shapes begin
    for (uint32_t i = 0; i < h.rows; ++i) {
        Record r;
        if (size_t(dims - p) < sizeof r) throw bad("records truncated");
        std::memcpy(&r, p, sizeof r);
        p += sizeof r;
        if (r.module >= strings.size() || r.op >= strings.size() || r.dtype >= strings.size())
            throw bad("string number out of range");
        if (r.ndim > kMaxDims || r.dim_offset > h.dims || r.ndim > h.dims - r.dim_offset)
            throw bad("shape out of range");
        if (r.index < 0) throw bad("negative layer index");
        if (r.counter_mask >> 11) throw bad("unknown counters");
        PackedStats ps{};
        for (int k = 0; k < 11; ++k) {
            if (!((r.counter_mask >> k) & 1)) continue;
            if (size_t(dims - p) < 8) throw bad("records truncated");
            std::memcpy(&ps.i[k], p, 8);
            p += 8;
        }
        if (size_t(dims - p) < sizeof ps.d) throw bad("records truncated");
        if (!plausible(ps)) throw bad("counters out of range (negative, above the element count, or overlapping)");
        std::memcpy(ps.d, p, sizeof ps.d);
        p += sizeof ps.d;
        LayerStat l;
        l.index = r.index;
        l.module = strings[r.module];
        l.op = strings[r.op];
        l.dtype = strings[r.dtype];
        l.autocast = r.flags & 1;
        l.inputs_finite = (r.flags >> 1) & 1;
        l.origin = (r.flags >> 2) & 1;
        l.shape.resize(r.ndim);
        if (r.ndim)
            std::memcpy(l.shape.data(), dims + size_t(r.dim_offset) * sizeof(int64_t), r.ndim * sizeof(int64_t));
        l.stats = unpack(ps);
        out.push_back(std::move(l));
    }
    if (p != dims) throw bad("size does not match its rows and shapes");
}

}  // namespace ampscope::storage::chunk
