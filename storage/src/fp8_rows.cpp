// SPDX-License-Identifier: MIT
#include "fp8_rows.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "ampscope/engine/text.h"
#include "ampscope/storage/errors.h"
#include "real_column.h"
#include "sqlite.h"

namespace ampscope::storage {

using sql::Stmt;

namespace {

std::optional<Fp8Scheme> scheme_named(const std::string& s) {
    for (auto x : {Fp8Scheme::Tensorwise, Fp8Scheme::Rowwise, Fp8Scheme::Mx, Fp8Scheme::Nvfp4})
        if (to_string(x) == s) return x;
    return std::nullopt;
}

std::optional<Fp8Element> element_named(const std::string& s) {
    for (auto x : {Fp8Element::E4M3, Fp8Element::E5M2, Fp8Element::E2M1})
        if (to_string(x) == s) return x;
    return std::nullopt;
}

/// Figures of one operand that no pass gives together (the counts each within 0..numel already).
std::string operand_figures_problem(const QuantStats& s, const std::string& who) {
    const auto n = [](int64_t v) { return std::to_string(v); };
    const std::string of = " of its " + n(s.numel) + " elements";
    if (s.nonzero + s.nonfinite > s.numel)
        return "fp8_operands.nonzero: " + who + " has " + n(s.nonzero) + " finite non-zero and " + n(s.nonfinite) +
               " non-finite values" + of + "; expected no more than " + n(s.numel) + " together";
    if (s.underflow > s.nonzero)
        return "fp8_operands.underflow: " + who + " flushes " + n(s.underflow) + " values to zero but has " +
               n(s.nonzero) + " non-zero; expected no more than those";
    // an element is flushed to zero, lands among the subnormals or saturates: one of them at most
    if (s.underflow + s.subnormal > s.numel)
        return "fp8_operands.subnormal: " + who + " counts " + n(s.underflow) + " flushed and " + n(s.subnormal) +
               " subnormal" + of + "; expected no more than " + n(s.numel) + " together";
    if (s.saturated + s.subnormal > s.numel)
        return "fp8_operands.saturated: " + who + " counts " + n(s.saturated) + " saturated and " + n(s.subnormal) +
               " subnormal" + of + "; expected no more than " + n(s.numel) + " together";
    if (s.amax < 0) return "fp8_operands.amax: " + who + " has amax " + short_number(s.amax) + "; expected |x| >= 0";
    if (std::isinf(s.amax) && s.nonfinite == 0)
        return "fp8_operands.amax: " + who + " has amax inf but no non-finite value; expected a finite amax";
    if (s.scale_min > s.scale_max)
        return "fp8_operands.scale_min: " + who + "'s smallest scale " + short_number(s.scale_min) +
               " lies above its largest " + short_number(s.scale_max) + "; expected scale_min <= scale_max";
    for (const auto& [column, v] : {std::pair<const char*, double>{"signal", s.signal}, {"noise", s.noise}})
        if (v < 0)
            return std::string("fp8_operands.") + column + ": " + who + " has " + short_number(v) +
                   " (a sum of squares); expected 0 or more";
    if ((s.scheme == Fp8Scheme::Nvfp4) != (s.element == Fp8Element::E2M1))
        return "fp8_operands.element: " + who + " is " + to_string(s.element) + " in " + to_string(s.scheme) +
               " blocks; expected e2m1 elements in nvfp4 blocks and e4m3 or e5m2 in the others";
    return {};
}

}  // namespace

std::string fp8_operand_problem(const std::vector<Fp8Operand>& ops) {
    for (const auto& o : ops) {
        const auto& s = o.stats;
        const std::string who = "operand " + o.operand + " of '" + o.module + "'";
        if (o.operand.empty()) return "fp8_operands.operand: an operand of '" + o.module + "' has no name";
        if (s.numel < 0)
            return "fp8_operands.elements: " + who + " has " + std::to_string(s.numel) +
                   " elements; expected 0 or more";
        if (s.scales < 0)
            return "fp8_operands.scales: " + who + " has " + std::to_string(s.scales) + " scales; expected 0 or more";
        const std::pair<const char*, int64_t> counts[] = {
            {"nonfinite", s.nonfinite}, {"nonzero", s.nonzero},     {"underflow", s.underflow},
            {"subnormal", s.subnormal}, {"saturated", s.saturated}, {"nonfinite_out", s.nonfinite_out}};
        for (const auto& [column, n] : counts)
            if (n < 0 || n > s.numel)
                return std::string("fp8_operands.") + column + ": " + who + " counts " + std::to_string(n) +
                       " of its " + std::to_string(s.numel) + " elements; expected 0 to " + std::to_string(s.numel);
        if (const auto p = operand_figures_problem(s, who); !p.empty()) return p;
    }
    return {};
}

std::string fp8_recipe_problem(Precision p, const std::vector<Fp8Operand>& ops) {
    if (!is_fp8(p)) return {};  // a BF16 pass's what-if holds every recipe's
    const Precision recipe = p == Precision::Fp8Delayed ? Precision::Fp8 : p;  // tensorwise, its scale delayed
    for (const auto& o : ops)
        if (what_if_recipe(o.stats.scheme) != recipe)
            return "fp8_operands.scheme: operand " + o.operand + " of '" + o.module + "' is " +
                   to_string(o.stats.scheme) + ", " + to_string(what_if_recipe(o.stats.scheme)) + "'s scheme, in an " +
                   to_string(p) + " pass; expected the scheme of " + to_string(recipe);
    return {};
}

void insert_fp8_operands(sqlite3* db, int64_t pass_id, const std::vector<Fp8Operand>& ops) {
    if (const auto p = fp8_operand_problem(ops); !p.empty()) throw StoreError("fp8 operands not recorded: " + p);
    Stmt s(db,
           "INSERT INTO fp8_operands(pass_id, seq, module, op, operand, scheme, element, elements, nonfinite, "
           "nonzero, underflow, subnormal, saturated, nonfinite_out, amax, scales, scale_min, scale_max, "
           "tensor_scale, sqnr_db, signal, noise) "
           "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22)");
    for (size_t i = 0; i < ops.size(); ++i) {
        const auto& o = ops[i];
        const auto& x = o.stats;
        s.bind(1, pass_id)
            .bind(2, int64_t(i))
            .bind(3, o.module)
            .bind(4, o.op)
            .bind(5, o.operand)
            .bind(6, to_string(x.scheme))
            .bind(7, to_string(x.element))
            .bind(8, x.numel)
            .bind(9, x.nonfinite)
            .bind(10, x.nonzero)
            .bind(11, x.underflow)
            .bind(12, x.subnormal)
            .bind(13, x.saturated)
            .bind(14, x.nonfinite_out)
            .bind(15, x.amax)  // a NaN becomes NULL, read back as NaN (real_column.h)
            .bind(16, x.scales)
            .bind(17, x.scale_min)
            .bind(18, x.scale_max)
            .bind(19, x.tensor_scale)
            .bind(20, x.sqnr_db)
            .bind(21, x.signal)
            .bind(22, x.noise);
        s.run();
    }
}

std::vector<Fp8Operand> read_fp8_operands(sqlite3* db, int64_t pass_id, const std::string& where) {
    Stmt s(db,
           "SELECT module, op, operand, scheme, element, elements, nonfinite, nonzero, underflow, subnormal, "
           "saturated, nonfinite_out, amax, scales, scale_min, scale_max, tensor_scale, sqnr_db, signal, noise "
           "FROM fp8_operands WHERE pass_id=?1 ORDER BY seq");
    s.bind(1, pass_id);
    std::vector<Fp8Operand> out;
    while (s.step()) {
        Fp8Operand o;
        o.module = s.text(0);
        o.op = s.text(1);
        o.operand = s.text(2);
        const auto scheme = scheme_named(s.text(3));
        if (!scheme)
            throw StoreError(where + ": column fp8_operands.scheme: '" + s.text(3) +
                             "'; expected tensorwise, rowwise, mx or nvfp4");
        const auto element = element_named(s.text(4));
        if (!element)
            throw StoreError(where + ": column fp8_operands.element: '" + s.text(4) + "'; expected e4m3, e5m2 or e2m1");
        auto& x = o.stats;
        x.scheme = *scheme;
        x.element = *element;
        x.numel = s.i64(5);
        x.nonfinite = s.i64(6);
        x.nonzero = s.i64(7);
        x.underflow = s.i64(8);
        x.subnormal = s.i64(9);
        x.saturated = s.i64(10);
        x.nonfinite_out = s.i64(11);
        x.amax = real::figure(s, 12);
        x.scales = s.i64(13);
        x.scale_min = real::figure(s, 14);
        x.scale_max = real::figure(s, 15);
        x.tensor_scale = real::figure(s, 16);
        x.sqnr_db = real::figure(s, 17);
        x.signal = real::figure(s, 18);
        x.noise = real::figure(s, 19);
        out.push_back(std::move(o));
    }
    if (const auto p = fp8_operand_problem(out); !p.empty()) throw StoreError(where + ": column " + p);
    return out;
}

void insert_real_gemm(sqlite3* db, int64_t pass_id, const RealGemmCheck& c) {
    Stmt s(db,
           "INSERT INTO fp8_real_gemm(pass_id, ran, reason, kernel, differing, max_abs_diff, decisions_differ, "
           "flips, seconds, outputs) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)");
    s.bind(1, pass_id)
        .bind(2, c.ran)
        .bind(3, c.reason)
        .bind(4, c.kernel)
        .bind(5, c.differing)
        .bind(6, c.max_abs_diff)
        .bind(7, c.decisions_differ)
        .bind(8, c.flips)
        .bind(9, c.seconds)
        // a check that did not run has no outputs: an empty blob, not NULL (nullptr binds NULL)
        .bind_blob_static(10, c.outputs.empty() ? static_cast<const void*>("") : c.outputs.data(),
                          c.outputs.size() * sizeof(float));
    s.run();
}

std::optional<RealGemmCheck> read_real_gemm(sqlite3* db, int64_t pass_id, size_t values, const std::string& where) {
    Stmt s(db,
           "SELECT ran, reason, kernel, differing, max_abs_diff, decisions_differ, flips, seconds, outputs "
           "FROM fp8_real_gemm WHERE pass_id=?1");
    s.bind(1, pass_id);
    if (!s.step()) return std::nullopt;
    RealGemmCheck c;
    c.ran = s.i64(0) != 0;
    c.reason = s.text(1);
    c.kernel = s.text(2);
    c.differing = s.i64(3);
    c.max_abs_diff = real::figure(s, 4);
    c.seconds = s.f64(7);
    const int64_t decisions = s.i64(5), flips = s.i64(6);
    const char* bad = c.differing < 0 || size_t(c.differing) > values           ? "differing"
                      : decisions < 0 || uint64_t(decisions) > uint64_t(values) ? "decisions_differ"
                      : flips < 0 || uint64_t(flips) > uint64_t(values)         ? "flips"
                      : !(c.seconds >= 0) || !std::isfinite(c.seconds)          ? "seconds"
                                                                                : nullptr;
    if (bad)
        throw StoreError(where + ": column fp8_real_gemm." + bad + ": out of range (differing " +
                         std::to_string(c.differing) + ", decisions_differ " + std::to_string(decisions) + ", flips " +
                         std::to_string(flips) + ", seconds " + std::to_string(c.seconds) + "; " +
                         std::to_string(values) + " scores)");
    const size_t bytes = size_t(s.bytes(8));
    if (c.ran ? bytes != values * sizeof(float) : bytes != 0)
        throw StoreError(where + ": column fp8_real_gemm.outputs: " + std::to_string(bytes) + " bytes; expected " +
                         std::to_string(c.ran ? values * sizeof(float) : 0));
    c.decisions_differ = int(decisions);
    c.flips = int(flips);
    c.outputs.resize(bytes / sizeof(float));
    if (bytes) std::memcpy(c.outputs.data(), s.blob_ptr(8), bytes);
    return c;
}

}  // namespace ampscope::storage
