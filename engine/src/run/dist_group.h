// SPDX-License-Identifier: MIT
#pragma once
// The ranks of a distributed run as a group (run/distributed.cpp): c10d's TCPStore (a client of
// torchrun's agent store, or hosted by rank 0), StoreCollectives for the exchanges, a heartbeat
// per rank from its own thread, and waits that stop on a failed, lost or hung rank.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ampscope/engine/distributed.h"

namespace c10d {
class Store;
}

namespace ampscope::detail {

class PeerWatch;

/// Another rank's error as this rank's exception: kind input -> InputError, model -> ModelError,
/// anything else (backend, cancelled, a lost rank) -> BackendError.
[[noreturn]] void throw_as(const std::string& kind, const std::string& message);

class Group {
public:
    /// Joins the store and starts this rank's heartbeat; `cancel` says the user interrupted.
    Group(const DistributedEnv& env, std::function<bool()> cancel);
    /// Stops the heartbeat; rank 0 hosting the store stays until the others have left it.
    ~Group();
    Group(const Group&) = delete;
    Group& operator=(const Group&) = delete;

    const DistributedEnv& env() const { return env_; }
    /// "rank N on HOST" (hosts known once every rank said hello; "rank N" before).
    std::string who(int rank) const;
    void set_hosts(std::vector<std::string> hosts) { hosts_ = std::move(hosts); }
    /// The hosts the ranks posted when they joined (before every hello has arrived).
    void learn_hosts() noexcept;

    /// Every rank's bytes, in rank order (gathered by rank 0, then broadcast).
    std::vector<std::string> all_gather(const std::string& key, const std::string& mine);
    /// Rank 0: every rank's bytes (its own empty); the others send theirs and get nothing.
    std::vector<std::string> gather(const std::string& key, const std::string& mine);
    /// Rank 0 sends; the others wait for it.
    void broadcast(const std::string& key, const std::string& data);
    std::string receive(const std::string& key);
    /// The others: the first of `keys` rank 0 has broadcast (waiting as every wait does).
    std::string wait_any(const std::vector<std::string>& keys);

    /// Tells every rank this run failed (the first message wins): kind is input | model |
    /// backend | cancelled; `message` names the rank.
    void abort(const std::string& kind, const std::string& message) noexcept;
    /// Whether some rank aborted (seen by the heartbeat thread); throws its error.
    bool aborted() const { return aborted_.load(); }
    [[noreturn]] void throw_abort();
    /// The peers whose heartbeat does not move during `seconds` (a rank killed under us).
    std::vector<int> silent_peers(double seconds);

    /// A batch starts (hang watch on) or the rank is between batches (off).
    void batch_started() { batch_since_ns_.store(now_ns()); }
    void batch_ended() { batch_since_ns_.store(0); }

    /// Bytes received by this rank in gathers (rank 0: the others' per-sample results).
    int64_t bytes_received() const { return bytes_received_; }

private:
    static int64_t now_ns();
    void connect();
    void beat();
    void linger();
    /// Waits until ready() holds; stops on an abort, a cancel, a lost peer (no heartbeat for
    /// lost_after_s once it beat; never joined within join_timeout_s), a lost store.
    void wait(const std::function<bool()>& ready, const std::vector<int>& peers);
    /// The heartbeat thread's watch of the peers it depends on (rank 0: all; others: rank 0).
    void watch_peers(PeerWatch& watch);
    std::string posted_name(int rank) const;
    /// The first abort wins; later ones are dropped.
    static void post_abort(c10d::Store& store, const std::string& kind, const std::string& message);
    /// Runs a store call; a failed one is the store lost (BackendError naming it).
    template <class F>
    auto store_call(F&& f) -> decltype(f());

    DistributedEnv env_;
    std::function<bool()> cancel_;
    std::vector<std::string> hosts_;
    struct Stores;  ///< the store, its heartbeat clone and the collectives (c10d types kept out of this header)
    std::unique_ptr<Stores> s_;
    std::thread heart_;
    std::atomic<bool> stop_{false}, aborted_{false};
    std::atomic<int64_t> batch_since_ns_{0};
    int64_t bytes_received_ = 0;
};

}  // namespace ampscope::detail
