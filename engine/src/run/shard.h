// SPDX-License-Identifier: MIT
#pragma once
// A rank's shard of a distributed run (run/distributed.cpp): which batches it runs, the probe
// set cut to them, its pass results as bytes for rank 0, and rank 0's merge of the shards into
// the pass one process would have produced.

#include <cstdint>
#include <string>
#include <vector>

#include "ampscope/engine/types.h"
#include "probes/probes.h"

namespace ampscope::detail {

/// Samples [first, first + count) of the probe set: rank r of w takes batches
/// [ceil(r * B / w), ceil((r + 1) * B / w)) of the B batches of `batch` samples (the last batch may
/// be short), so every rank's batches are the single-process run's batches.
struct ShardRange {
    int64_t first = 0, count = 0;
};
ShardRange shard_range(int64_t samples, int64_t batch, int rank, int world);

/// The probe set cut to a shard (input tensors as views; samples, labels, targets copied).
ProbeSet shard_probes(const ProbeSet& all, const ShardRange& r);

/// What a rank sends rank 0 after a pass (a failure goes to every rank as the group's abort).
struct ShardPass {
    PassResult pass;
    bool inputs_mutated = false;
    std::vector<std::string> state_changed;  ///< parameters/buffers its forward changed
};
std::string encode_shard(const ShardPass& s);
/// `from`: the rank that sent it, named when the bytes do not decode.
ShardPass decode_shard(const std::string& bytes, int from);

/// The shards' passes (in rank order) as one pass: scores and non-finite samples concatenated,
/// per-op statistics merged by execution index as the observer merges batches (counts summed,
/// extremes as extremes, mean and RMS weighted), the forward origin the earliest op where a
/// sample's values were born non-finite, FP8 operand statistics merged by module and operand.
PassResult merge_shards(std::vector<PassResult> parts);

}  // namespace ampscope::detail
