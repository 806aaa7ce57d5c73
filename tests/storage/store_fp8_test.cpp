// SPDX-License-Identifier: MIT
// The quantized GEMM operands of a simulated FP8 pass in the run store (table fp8_operands,
// schema v9; issue 30): recorded, read back, exported and imported with every figure; a file
// of schema 8 still opens; rows that are not sound are refused naming the column.
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <tuple>

#include "store_test_util.h"

using namespace store_test;

namespace {

Fp8Operand operand(const std::string& module, const std::string& which, double amax, double sqnr) {
    Fp8Operand o;
    o.module = module;
    o.op = "aten::linear";
    o.operand = which;
    auto& s = o.stats;
    s.scheme = Fp8Scheme::Mx;
    s.element = Fp8Element::E4M3;
    s.numel = 4096;
    s.nonfinite = 1;
    s.nonzero = 4000;
    s.underflow = 31;
    s.subnormal = 77;
    s.saturated = 5;
    s.nonfinite_out = 2;
    s.amax = amax;
    s.scales = 128;
    s.scale_min = 0.0078125;
    s.scale_max = 64.0;
    s.tensor_scale = 1.0;
    s.sqnr_db = sqnr;
    s.signal = 1234.5;
    s.noise = 0.0625;
    return o;
}

/// make_run() with its second pass an MXFP8 pass holding three operands: one with a NaN amax
/// (an operand holding a NaN), one whose SQNR is +inf (quantization changed nothing).
RunResult fp8_run() {
    auto r = make_run();
    auto& p = r.passes.at(1);
    p.precision = Precision::Mxfp8;
    r.comparisons.at(0).precision = Precision::Mxfp8;
    r.spec.precisions = {Precision::Mxfp8};
    p.fp8_operands = {
        operand("fc1", "input", 300.5, 31.25), operand("fc1", "weight", 0.75, 40.0),
        operand("", "input", std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity())};
    p.fp8_operands[1].stats.element = Fp8Element::E5M2;
    return r;
}

/// fp8_run() with its FP8 pass an fp8-delayed one.
RunResult delayed_run() {
    auto r = fp8_run();
    r.spec.precisions = {Precision::Fp8Delayed};
    r.passes.at(1).precision = Precision::Fp8Delayed;
    r.comparisons.at(0).precision = Precision::Fp8Delayed;
    for (auto& o : r.passes.at(1).fp8_operands) o.stats.scheme = Fp8Scheme::Tensorwise;  // the recipe's
    return r;
}

void expect_operands(const RunResult& got, const RunResult& want) {
    ASSERT_EQ(got.passes.size(), want.passes.size());
    for (size_t i = 0; i < want.passes.size(); ++i) {
        const auto &g = got.passes[i].fp8_operands, &w = want.passes[i].fp8_operands;
        ASSERT_EQ(g.size(), w.size()) << "pass " << i;
        for (size_t k = 0; k < w.size(); ++k) {
            const auto &a = g[k].stats, &b = w[k].stats;
            EXPECT_EQ(g[k].module, w[k].module);
            EXPECT_EQ(g[k].op, w[k].op);
            EXPECT_EQ(g[k].operand, w[k].operand);
            EXPECT_EQ(a.scheme, b.scheme);
            EXPECT_EQ(a.element, b.element);
            EXPECT_EQ(a.numel, b.numel);
            EXPECT_EQ(a.nonfinite, b.nonfinite);
            EXPECT_EQ(a.nonzero, b.nonzero);
            EXPECT_EQ(a.underflow, b.underflow);
            EXPECT_EQ(a.subnormal, b.subnormal);
            EXPECT_EQ(a.saturated, b.saturated);
            EXPECT_EQ(a.nonfinite_out, b.nonfinite_out);
            EXPECT_EQ(std::isnan(a.amax), std::isnan(b.amax));
            if (!std::isnan(b.amax)) {
                EXPECT_EQ(a.amax, b.amax);
            }
            EXPECT_EQ(a.scales, b.scales);
            EXPECT_EQ(a.scale_min, b.scale_min);
            EXPECT_EQ(a.scale_max, b.scale_max);
            EXPECT_EQ(a.tensor_scale, b.tensor_scale);
            EXPECT_EQ(a.sqnr_db, b.sqnr_db);
            EXPECT_EQ(a.signal, b.signal);
            EXPECT_EQ(a.noise, b.noise);
        }
    }
}

}  // namespace

TEST(StoreFp8, ARecordedFp8PassReadsBackItsOperands) {
    TempDir d;
    Store s(d.file("runs.sqlite"));
    const auto r = fp8_run();
    record(s, r);
    const auto got = s.load_run(r.run_id);
    expect_operands(got, r);
    EXPECT_EQ(js(got), js(r));
    EXPECT_NE(js(got).find("\"fp8_operands\""), std::string::npos);
    EXPECT_TRUE(got.passes[0].fp8_operands.empty()) << "the FP32 reference has none";
}

TEST(StoreFp8, ExportAndImportCarryTheOperands) {
    TempDir d;
    Store a(d.file("a.sqlite"));
    const auto r = fp8_run();
    a.insert_run(r, "completed", "", {}, {});
    expect_operands(a.load_run(r.run_id), r);
    export_runs(a, {r.run_id}, d.file("x.ampscope"));
    Store b(d.file("b.sqlite"));
    EXPECT_EQ(import_file(b, d.file("x.ampscope")).added, 1);
    expect_operands(b.load_run(r.run_id), r);
    EXPECT_EQ(js(b.load_run(r.run_id)), js(r));
}

TEST(StoreFp8, ImportRefusesOperandsThatAreNotSound) {
    TempDir d;
    Store a(d.file("a.sqlite"));
    a.insert_run(fp8_run(), "completed", "", {}, {});
    Store into(d.file("into.sqlite"));
    int n = 0;
    auto expect_refused = [&](const std::string& edit, const std::string& field, const std::string& detail) {
        const auto f = d.file("bad" + std::to_string(n++) + ".ampscope");
        export_runs(a, {a.list_runs()[0].uuid}, f);
        raw_exec(f, edit);
        const auto m = error_of([&] { import_file(into, f); });
        EXPECT_NE(m.find(field), std::string::npos) << edit << ": " << m;
        EXPECT_NE(m.find(detail), std::string::npos) << edit << ": " << m;
        EXPECT_TRUE(into.list_runs().empty()) << edit << ": nothing may be half-imported";
    };
    expect_refused("UPDATE fp8_operands SET underflow=-1 WHERE seq=0", "fp8_operands.underflow", "fc1");
    expect_refused("UPDATE fp8_operands SET saturated=5000 WHERE seq=1", "fp8_operands.saturated", "of its 4096");
    expect_refused("UPDATE fp8_operands SET scheme='blockwise' WHERE seq=0", "fp8_operands.scheme", "blockwise");
    expect_refused("UPDATE fp8_operands SET element='e3m4' WHERE seq=0", "fp8_operands.element", "e3m4");
    // figures no pass can give: each element counted once at most (flushed, subnormal or
    // saturated), no more flushed than non-zero, a magnitude that is negative, an infinite amax of
    // finite values, a scale range upside down, negative sums of squares
    expect_refused("UPDATE fp8_operands SET underflow=2458, subnormal=2458, saturated=2458 WHERE seq=0",
                   "fp8_operands.subnormal", "fc1");
    expect_refused("UPDATE fp8_operands SET saturated=4090 WHERE seq=0", "fp8_operands.saturated", "4096");
    expect_refused("UPDATE fp8_operands SET underflow=4001 WHERE seq=0", "fp8_operands.underflow", "4000");
    expect_refused("UPDATE fp8_operands SET nonzero=4096 WHERE seq=0", "fp8_operands.nonzero", "4096");
    expect_refused("UPDATE fp8_operands SET amax=-3 WHERE seq=0", "fp8_operands.amax", "-3");
    expect_refused("UPDATE fp8_operands SET amax=9e999, nonfinite=0 WHERE seq=0", "fp8_operands.amax", "inf");
    expect_refused("UPDATE fp8_operands SET scale_min=100 WHERE seq=0", "fp8_operands.scale_min", "above");
    expect_refused("UPDATE fp8_operands SET signal=-1 WHERE seq=0", "fp8_operands.signal", "-1");
    expect_refused("UPDATE fp8_operands SET noise=-2 WHERE seq=0", "fp8_operands.noise", "-2");
    expect_refused("UPDATE fp8_operands SET element='e2m1' WHERE seq=0", "fp8_operands.element", "e2m1");
    // an operand of another recipe than the pass's (an mxfp8 pass quantizes in MX blocks)
    expect_refused("UPDATE fp8_operands SET scheme='nvfp4', element='e2m1' WHERE seq=0", "fp8_operands.scheme",
                   "mxfp8");
    // every column of the table: a value of the wrong type is refused by name, never read as 0
    for (const char* column :
         {"seq",       "module",    "op",        "operand",      "scheme",    "element",       "elements",
          "nonfinite", "nonzero",   "underflow", "subnormal",    "saturated", "nonfinite_out", "amax",
          "scales",    "scale_min", "scale_max", "tensor_scale", "sqnr_db",   "signal",        "noise"}) {
        const std::set<std::string> text = {"module", "op", "operand", "scheme", "element"};
        const std::string wrong = text.count(column) ? "x'00'" : "'many'";
        expect_refused(std::string("UPDATE fp8_operands SET ") + column + "=" + wrong + " WHERE seq=0",
                       std::string("fp8_operands.") + column, "wrong type");
    }
}

TEST(StoreFp8, ADatabaseWithoutTheOperandsTableOpens) {
    // A database of schema version 8 (before fp8_operands): read as it is when opened
    // read-only, migrated (the table added) when opened to record.
    TempDir d;
    const auto path = d.file("v8.sqlite");
    const auto r = make_run();
    {
        Store s(path);
        record(s, r);
    }
    raw_exec(path, undo_migrations(8));
    {
        Store s(path, Store::Mode::ReadOnly);
        EXPECT_EQ(s.schema_version(), 8);
        EXPECT_EQ(js(s.load_run(r.run_id)), js(r));
    }
    Store s(path);
    EXPECT_EQ(s.schema_version(), kSchemaVersion);
    EXPECT_EQ(js(s.load_run(r.run_id)), js(r));
    const auto fp8 = fp8_run();
    record(s, fp8);
    expect_operands(s.load_run(fp8.run_id), fp8);
}

TEST(StoreFp8, TheDelayedSettingsAreStoredWithTheSpec) {
    // fixed with the spec before the first pass; a spec recorded before the settings existed
    // (no "fp8_delayed" key) reads as Transformer Engine's defaults, what those runs used
    TempDir d;
    Store s(d.file("runs.sqlite"));
    auto r = delayed_run();
    r.spec.fp8_amax_history = 2;
    r.spec.fp8_margin = 1;
    record(s, r);
    const auto got = s.load_run(r.run_id);
    EXPECT_EQ(got.spec.fp8_amax_history, 2);
    EXPECT_EQ(got.spec.fp8_margin, 1);
    const auto compact = json::run_to_json(got, false, -1);
    EXPECT_NE(compact.find(R"("fp8_delayed":{"amax_history":2,"margin":1,"amax_compute_algo":"max"})"),
              std::string::npos)
        << compact;
    const auto plain = make_run();
    record(s, plain);
    EXPECT_EQ(js(s.load_run(plain.run_id)).find("fp8_delayed"), std::string::npos);
}

TEST(StoreFp8, TheBf16ListIsStoredAndOutOfRangeSettingsAreRefused) {
    // keep_bf16 (FP8 passes' modules kept in BF16) with the spec, absent when empty; an imported
    // or stored fp8_delayed outside what `run` accepts is refused naming the field, never run on
    TempDir d;
    Store a(d.file("a.sqlite"));
    auto r = delayed_run();
    r.spec.keep_bf16 = {"fc2", "blocks.*"};
    a.insert_run(r, "completed", "", {}, {});
    EXPECT_EQ(a.load_run(r.run_id).spec.keep_bf16, r.spec.keep_bf16);
    const auto compact = json::run_to_json(a.load_run(r.run_id), false, -1);
    EXPECT_NE(compact.find(R"("keep_bf16":["fc2","blocks.*"])"), std::string::npos) << compact;
    const auto plain = make_run();
    a.insert_run(plain, "completed", "", {}, {});
    EXPECT_EQ(js(a.load_run(plain.run_id)).find("keep_bf16"), std::string::npos);
    Store into(d.file("into.sqlite"));
    int n = 0;
    for (const auto& [path, value, field] : {std::tuple{"amax_history", "0", "spec.fp8_delayed.amax_history"},
                                             std::tuple{"amax_history", "1048577", "spec.fp8_delayed.amax_history"},
                                             std::tuple{"amax_history", "4294967297", "spec.fp8_delayed.amax_history"},
                                             std::tuple{"amax_history", "2.5", "spec.fp8_delayed.amax_history"},
                                             std::tuple{"margin", "-1", "spec.fp8_delayed.margin"},
                                             std::tuple{"margin", "101", "spec.fp8_delayed.margin"}}) {
        const auto f = d.file("bad" + std::to_string(n++) + ".ampscope");
        export_runs(a, {r.run_id}, f);
        raw_exec(f, std::string("DROP TRIGGER IF EXISTS runs_criteria_immutable; UPDATE runs SET header_json="
                                "json_set(header_json, '$.spec.fp8_delayed.") +
                        path + "', " + value + ")");
        const auto m = error_of([&] { import_file(into, f); });
        EXPECT_NE(m.find(field), std::string::npos) << value << ": " << m;
        EXPECT_NE(m.find(std::string("'") + value + "'"), std::string::npos) << m;
        EXPECT_TRUE(into.list_runs().empty()) << "nothing may be half-imported";
    }
}
