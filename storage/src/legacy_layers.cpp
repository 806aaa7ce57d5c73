// SPDX-License-Identifier: MIT
// The 26-column `layers` table of the first released builds (see legacy_layers.h).
#include "legacy_layers.h"

#include <nlohmann/json.hpp>

#include <cstring>

#include "layer_stats.h"
#include "schema.h"
#include "sqlite.h"

namespace ampscope::storage::legacy {

using sql::Stmt;

namespace {

constexpr const char* kSelect =
    "SELECT pass_id, idx, module, op, dtype, shape, autocast, inputs_finite, origin, count, nan, posinf, neginf, "
    "zeros, "
    "min, max, absmax, min_nonzero_abs, mean, rms, fp16_overflow, fp16_subnormal, fp16_underflow, bf16_overflow, "
    "bf16_subnormal, bf16_underflow FROM layers";

/// `shape` as 4fe01ea wrote it (JSON text, "[4,8]") or as 236a746 did (int64 blob).
bool read_shape(const Stmt& s, int c, std::vector<int64_t>& shape) {
    if (s.type(c) == SQLITE_BLOB || s.type(c) == SQLITE_NULL) {
        const int nb = s.bytes(c);
        if (nb % int(sizeof(int64_t)) != 0 || nb > 64 * 8) return false;
        shape.resize(size_t(nb) / sizeof(int64_t));
        if (nb) std::memcpy(shape.data(), s.blob_ptr(c), size_t(nb));
        return true;
    }
    if (s.type(c) != SQLITE_TEXT) return false;
    const auto j = nlohmann::json::parse(s.text(c), nullptr, /*allow_exceptions=*/false);
    if (!j.is_array() || j.size() > 64) return false;
    shape.clear();
    for (const auto& d : j) {
        if (!d.is_number_integer()) return false;
        shape.push_back(d.get<int64_t>());
    }
    return true;
}

/// One row of kSelect; false when it does not describe a layer.
bool read_row(const Stmt& s, LayerStat& l) {
    if (s.i64(1) < 0 || s.i64(1) > INT32_MAX || s.type(2) != SQLITE_TEXT || s.type(3) != SQLITE_TEXT) return false;
    l.index = int(s.i64(1));
    l.module = s.text(2);
    l.op = s.text(3);
    l.dtype = s.text(4);
    if (!read_shape(s, 5, l.shape)) return false;
    l.autocast = s.i64(6) != 0;
    l.inputs_finite = s.i64(7) != 0;
    l.origin = s.i64(8) != 0;
    auto& t = l.stats;
    t.count = s.i64(9);
    t.nan = s.i64(10);
    t.posinf = s.i64(11);
    t.neginf = s.i64(12);
    t.zeros = s.i64(13);
    t.min = s.f64(14);
    t.max = s.f64(15);
    t.absmax = s.f64(16);
    t.min_nonzero_abs = s.f64(17);
    t.mean = s.f64(18);
    t.rms = s.f64(19);
    t.fp16_overflow = s.i64(20);
    t.fp16_subnormal = s.i64(21);
    t.fp16_underflow = s.i64(22);
    t.bf16_overflow = s.i64(23);
    t.bf16_subnormal = s.i64(24);
    t.bf16_underflow = s.i64(25);
    return plausible(pack(t));
}

/// Today's `layers` definition, taken from the v1 script so that there is one.
std::string packed_table(const std::string& name) {
    const std::string& v1 = schema::migrations().at(0);
    const auto b = v1.find("CREATE TABLE layers(");
    const auto e = v1.find(");", b);
    if (b == std::string::npos || e == std::string::npos)
        throw StoreError("internal: no layers table in the v1 script");
    return "CREATE TABLE " + name +
           v1.substr(b + std::strlen("CREATE TABLE layers"), e + 2 - b - std::strlen("CREATE TABLE layers"));
}

}  // namespace

const std::vector<std::string>& layer_columns() {
    static const std::vector<std::string> c = {"pass_id",
                                               "idx",
                                               "module",
                                               "op",
                                               "dtype",
                                               "shape",
                                               "autocast",
                                               "inputs_finite",
                                               "origin",
                                               "count",
                                               "nan",
                                               "posinf",
                                               "neginf",
                                               "zeros",
                                               "min",
                                               "max",
                                               "absmax",
                                               "min_nonzero_abs",
                                               "mean",
                                               "rms",
                                               "fp16_overflow",
                                               "fp16_subnormal",
                                               "fp16_underflow",
                                               "bf16_overflow",
                                               "bf16_subnormal",
                                               "bf16_underflow"};
    return c;
}

bool has_legacy_layers(sqlite3* db) {
    Stmt s(db, "SELECT count(*) FROM pragma_table_info('layers') WHERE name IN ('autocast', 'inputs_finite', 'count')");
    return s.step() && s.i64(0) == 3;
}

void convert_legacy_layers(sqlite3* db, const std::string& path) {
    sql::exec(db, packed_table("layers_packed"));
    Stmt ins(db,
             "INSERT INTO layers_packed(id, pass_id, idx, module, op, dtype, shape, flags, absmax, nonfinite, stats) "
             "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)");
    Stmt s(db, (std::string(kSelect) + " ORDER BY pass_id, idx").c_str());
    while (s.step()) {
        LayerStat l;
        if (!read_row(s, l) || s.i64(0) < 0 || s.i64(0) > INT32_MAX)
            throw StoreError(path + ": a row of the old layers table (pass " + std::to_string(s.i64(0)) + ", layer " +
                             std::to_string(s.i64(1)) + ") is malformed; the file was not changed");
        const int64_t pass_id = s.i64(0);
        const PackedStats p = pack(l.stats);
        ins.bind(1, pass_id << 32 | int64_t(l.index))
            .bind(2, pass_id)
            .bind(3, l.index)
            .bind(4, l.module)
            .bind(5, l.op)
            .bind(6, l.dtype)
            .bind_blob(7, l.shape.data(), l.shape.size() * sizeof(int64_t))
            .bind(8, int64_t(l.autocast) | int64_t(l.inputs_finite) << 1 | int64_t(l.origin) << 2)
            .bind(9, l.stats.absmax)
            .bind(10, l.stats.nonfinite())
            .bind_blob(11, &p, sizeof p);
        ins.run();
    }
    sql::exec(db, "DROP TABLE layers; ALTER TABLE layers_packed RENAME TO layers");
}

std::vector<LayerStat> read_legacy_layers(sqlite3* db, int64_t pass_id, const std::string& where,
                                          std::vector<std::string>* damaged) {
    Stmt s(db, (std::string(kSelect) + " WHERE pass_id=?1 ORDER BY idx").c_str());
    s.bind(1, pass_id);
    std::vector<LayerStat> out;
    int bad = 0;
    while (s.step()) {
        LayerStat l;
        if (read_row(s, l)) {
            out.push_back(std::move(l));
            continue;
        }
        if (!damaged)
            throw StoreError("layer statistics of " + where + " are malformed (layer row " + std::to_string(s.i64(1)) +
                             ")");
        ++bad;
    }
    if (bad)
        damaged->push_back("layer statistics of " + where + " are malformed: " + std::to_string(bad) +
                           " layer row(s) left out");
    return out;
}

}  // namespace ampscope::storage::legacy
