// SPDX-License-Identifier: MIT
#pragma once
// The `layers` table as the first released builds wrote it (4fe01ea to 236a746, schema
// version 2, and files those builds left that a19053a then migrated to 3): one column per
// statistic (autocast, inputs_finite, origin, count, nan, ..., bf16_underflow), no rowid,
// `shape` as JSON text (4fe01ea) or an int64 blob (236a746). The v1 script was later edited in
// place (8ebd10b: packed rows) without a version bump, so such files carry a schema version
// that today's layout also has: they are recognised by their columns, converted to the packed
// rows on a writable open, and read as they are on a read-only one.
// Tests: tests/storage/store_migration_test.cpp with the files of tests/fixtures/store.

#include <cstdint>
#include <string>
#include <vector>

#include "ampscope/engine/types.h"

struct sqlite3;

namespace ampscope::storage::legacy {

/// The columns the 26-column layout has (what check_layout requires of it).
const std::vector<std::string>& layer_columns();

/// True when the file's `layers` table has the 26-column layout.
bool has_legacy_layers(sqlite3* db);

/// Rewrites the 26-column `layers` table as the packed table of today's v1 script, in the
/// caller's transaction. `path` names the file in errors (a row that does not convert).
void convert_legacy_layers(sqlite3* db, const std::string& path);

/// One pass's rows of a 26-column table, in index order (read-only opens). Malformed rows
/// throw StoreError naming `where`, or with `damaged` are left out and counted there.
std::vector<LayerStat> read_legacy_layers(sqlite3* db, int64_t pass_id, const std::string& where,
                                          std::vector<std::string>* damaged);

}  // namespace ampscope::storage::legacy
