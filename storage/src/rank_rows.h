// SPDX-License-Identifier: MIT
#pragma once
// The ranks of a run launched under torchrun (RunResult::ranks) in SQLite: table run_ranks,
// schema v8, one row per rank. A single-process run has none.

#include <sqlite3.h>

#include <string>
#include <vector>

#include "ampscope/engine/run.h"

namespace ampscope::storage {

/// What is wrong with `ranks` for a run of `samples` samples, naming the column
/// ("run_ranks.first_sample: ..."), or "" when they are sound: ranks 0..N-1 in order, none
/// negative, their samples following each other from sample 0 and covering every sample once,
/// seconds finite and not negative, bytes not negative. No ranks is sound.
std::string rank_problem(const std::vector<RankInfo>& ranks, size_t samples);

/// Writes the ranks of run `run_pk` (StoreError when rank_problem finds one).
void insert_ranks(sqlite3* db, int64_t run_pk, const std::vector<RankInfo>& ranks, size_t samples);

/// A recording run's ranks as it finished (with the seconds and bytes its passes added) in
/// place of those its header had.
void replace_ranks(sqlite3* db, int64_t run_pk, const std::vector<RankInfo>& ranks, size_t samples);

/// The ranks of run `run_pk` in rank order; `where` ("FILE: run UUID") names the run in the
/// StoreError thrown when they are not sound (rank_problem).
std::vector<RankInfo> read_ranks(sqlite3* db, int64_t run_pk, size_t samples, const std::string& where);

}  // namespace ampscope::storage
