// SPDX-License-Identifier: MIT
#pragma once
/// \file replay_record.h
/// Incident replays recorded like other runs (kind "replay"), linked to the hashes of their
/// checkpoint and batch; the replay's JSON is the run's header.

#include <string>

#include "ampscope/engine/replay.h"
#include "ampscope/storage/store.h"

namespace ampscope::storage {

struct ReplayRecord {
    std::string uuid, model, checkpoint, checkpoint_sha256, batch, batch_sha256, device, precisions;
    std::string started_at, finished_at, verdict;  ///< verdict: "nonfinite" | "finite"
    std::string json;                              ///< the replay JSON (replay --json)
};

/// The record of a completed replay (CLI and GUI alike): its inputs' hashes, the verdict
/// ("nonfinite" when a stage produced NaN/Inf) and the replay JSON as its header.
ReplayRecord replay_record_of(const ReplayResult& r);

/// Inserts one completed replay run. StoreError on a read-only or damaged database.
void record_replay(Store& store, const ReplayRecord& r);

/// Copies a recorded replay run (its row, notes and review) from one store to another (export,
/// import); false when `to` already holds it. InputError when `from` has no replay `uuid`.
bool copy_replay(const Store& from, Store& to, const std::string& uuid);

/// The replay JSON of a recorded replay run (kind "replay"); InputError when there is none.
std::string replay_json(const Store& store, const std::string& uuid);

/// The recorded replay `uuid` read back and checked: its stored JSON a valid replay JSON (every
/// field of its type) whose run_id is the row's. StoreError naming the database, the run and the
/// field otherwise (an imported or damaged row).
ReplayResult checked_replay(const Store& store, const std::string& uuid);

/// The replay JSON of a result (replay --json; the header of a recorded replay). NaN/Inf as the
/// strings "nan", "inf", "-inf".
std::string replay_to_json(const ReplayResult& r);

/// A replay JSON read back (the GUI opening a recorded replay). InputError naming \p source when
/// the text is not a replay JSON.
ReplayResult replay_from_json(const std::string& text, const std::string& source);

}  // namespace ampscope::storage
