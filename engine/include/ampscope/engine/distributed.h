// SPDX-License-Identifier: MIT
#pragma once
/// \file distributed.h
/// A comparison run spread over the ranks torchrun starts (docs/distributed.md): every rank runs
/// every pass on its contiguous shard of whole batches, rank 0 gathers the per-sample results
/// into one run, the same run one process would have recorded, and is the only rank that records.
/// Rendezvous and exchange through c10d's TCPStore and StoreCollectives from the torch wheel.

#include <optional>
#include <string>

#include "ampscope/engine/run.h"

namespace ampscope {

/// Where this process stands among the ranks, as torchrun's environment says.
struct DistributedEnv {
    int rank = 0;
    int world_size = 1;
    int local_rank = 0;
    std::string master_addr;  ///< the rendezvous store's host (MASTER_ADDR)
    int master_port = 0;      ///< and port (MASTER_PORT)
    /// TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent hosts the store (every rank a client);
    /// else rank 0 hosts it on master_addr:master_port.
    bool agent_store = false;
    std::string run_id;  ///< TORCHELASTIC_RUN_ID (or "none"): part of the store prefix
    int restart = 0;     ///< TORCHELASTIC_RESTART_COUNT: part of the store prefix
    std::string host;    ///< this machine's host name
    /// A rank whose single batch has run this long is declared hung and the run stops.
    double batch_timeout_s = 1800;
    /// A rank whose heartbeat (every 0.5 s, from its own thread) stops this long is declared lost.
    double lost_after_s = 15;
    /// How long ranks wait for each other to join (the slowest model load).
    double join_timeout_s = 900;
};

/// torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, ...);
/// nullopt when WORLD_SIZE is unset or 1 (a single process). InputError naming the variable
/// when one is malformed or missing.
std::optional<DistributedEnv> distributed_env();

/// The device a rank runs on: "cuda" (or "" with a GPU present) becomes cuda:LOCAL_RANK;
/// "cpu" and an explicit "cuda:N" stay as given.
std::string rank_device(const std::string& device, const DistributedEnv& env);

/// Runs `spec` as rank env.rank of env.world_size. Rank 0 returns the whole run (and is the only
/// rank that tells `sink`, which the others must not have); the others return a result holding
/// only run_id, verdict and ranks. Every rank throws when any fails (the message names the rank
/// and its host): the failing rank's own error, the others its kind (InputError, ModelError,
/// BackendError) with "rank N on HOST: " in front; a lost or hung rank as BackendError.
RunResult run_comparison_distributed(const RunSpec& spec, const DistributedEnv& env, RunSink* sink = nullptr,
                                     ProgressObserver* progress = nullptr);

}  // namespace ampscope
