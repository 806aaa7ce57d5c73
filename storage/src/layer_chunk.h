// SPDX-License-Identifier: MIT
#pragma once
// Per-op layer statistics are stored in chunks of up to kChunkRows rows per SQLite row
// (table layer_chunks, schema v4): one B-tree insert per chunk instead of per layer is what
// lets the store write millions of layer rows per second and read a pass's table in one scan.
//
// Chunk layout (host byte order; x86-64 and aarch64 are both little-endian):
//   header   char magic[4] = "ALC1", uint32 rows, uint32 strings, uint32 dims
//   strings  `strings` times: uint32 length, bytes (module paths, op names, dtypes; interned)
//   records  `rows` times: a 24-byte fixed part (index, string numbers, flags, number of
//            dimensions, a mask of the non-zero counters, offset of the shape), the non-zero
//            int64 counters, the 6 float64 values (layer_stats.h's order)
//   dims     `dims` int64 values: the shapes, concatenated
// Decoding checks every length and index: chunks come from other people's files too.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ampscope/engine/types.h"

namespace ampscope::storage::chunk {

constexpr size_t kChunkRows = 4096;

/// Encodes layers[begin, end) into one chunk.
std::string encode(const std::vector<LayerStat>& layers, size_t begin, size_t end);

/// Appends the chunk's rows to out; throws StoreError naming `where` when malformed.
void decode(const void* data, size_t bytes, std::vector<LayerStat>& out, const std::string& where);

}  // namespace ampscope::storage::chunk

struct sqlite3;

namespace ampscope::storage {
/// One pass's layer table in index order: chunks (v4), else rows written before v4.
/// `where` names the pass in messages; with `damaged`, chunks that do not decode are skipped
/// and described there, else they throw StoreError.
std::vector<LayerStat> read_layers(sqlite3* db, int64_t pass_id, const std::string& where,
                                   std::vector<std::string>* damaged = nullptr);
}  // namespace ampscope::storage
