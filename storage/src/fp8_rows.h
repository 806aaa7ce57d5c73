// SPDX-License-Identifier: MIT
#pragma once
// The quantized GEMM operands of a simulated FP8 pass (PassResult::fp8_operands, issue 30) in
// SQLite: table fp8_operands, schema v9, one row per (module, operand) in the pass's order,
// every QuantStats figure kept so that a recorded pass gives the run JSON it gave when it ran.

#include <sqlite3.h>

#include <optional>
#include <string>
#include <vector>

#include "ampscope/engine/fp8.h"
#include "ampscope/engine/types.h"

namespace ampscope::storage {

/// What is wrong with `ops`, naming the column ("fp8_operands.underflow: ..."), or "" when they
/// are sound: counts not negative and none above the operand's elements, a known scheme and element.
std::string fp8_operand_problem(const std::vector<Fp8Operand>& ops);

/// The first operand of an FP8 pass of precision `p` quantized by another recipe's scheme (an
/// fp8-rowwise pass's are rowwise, ...) as "column: what; expected", or empty.
std::string fp8_recipe_problem(Precision p, const std::vector<Fp8Operand>& ops);

/// Writes the operands of pass `pass_id` (StoreError when fp8_operand_problem finds one).
void insert_fp8_operands(sqlite3* db, int64_t pass_id, const std::vector<Fp8Operand>& ops);

/// The operands of pass `pass_id` in their order; `where` ("FILE: run UUID: pass fp8") names the
/// pass in the StoreError thrown for rows that are not sound.
std::vector<Fp8Operand> read_fp8_operands(sqlite3* db, int64_t pass_id, const std::string& where);

/// An FP8 pass's real-GEMM check (PassResult::real_gemm; table fp8_real_gemm, schema v11).
void insert_real_gemm(sqlite3* db, int64_t pass_id, const RealGemmCheck& c);
/// The check of pass `pass_id` (none: nullopt); StoreError naming `where` and the column when its
/// counts are negative or its outputs are not `values` floats.
std::optional<RealGemmCheck> read_real_gemm(sqlite3* db, int64_t pass_id, size_t values, const std::string& where);

}  // namespace ampscope::storage
