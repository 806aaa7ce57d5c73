// SPDX-License-Identifier: MIT
#pragma once
// Sequence-output comparisons (language models) in SQLite: the per-token figures and boundary
// positions of a comparison (tables token_stats, token_boundaries, schema v7).

#include <sqlite3.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ampscope/engine/types.h"

namespace ampscope::storage {

/// Writes `t` for comparison `cid`; `index` maps sample ids to their index in the run.
void insert_tokens(sqlite3* db, int64_t cid, const TokenStats& t, const std::map<std::string, int64_t>& index);

/// Reads the figures of comparison `cid`, if it has them (a v7 file); `where` names the run in
/// errors. Throws StoreError for rows that do not fit the run's samples.
std::optional<TokenStats> read_tokens(sqlite3* db, int64_t cid, const std::vector<SampleInfo>& samples,
                                      const std::string& where);

}  // namespace ampscope::storage
