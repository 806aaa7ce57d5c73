// SPDX-License-Identifier: MIT
// The ranks of a distributed run as a group: torchrun's environment, c10d's TCPStore under a
// prefix of our own, StoreCollectives for the exchanges, heartbeats and watched waits.
#include "run/dist_group.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/control_collectives/StoreCollectives.hpp>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>

#include "ampscope/engine/errors.h"

namespace ampscope {

namespace detail {

struct Group::Stores {
    c10::intrusive_ptr<c10d::Store> tcp, store, heart;
    std::unique_ptr<c10d::StoreCollectives> coll;
};

namespace {

using Clock = std::chrono::steady_clock;

std::vector<uint8_t> bytes_of(const std::string& s) {
    return std::vector<uint8_t>(s.begin(), s.end());
}
std::string string_of(const std::vector<uint8_t>& b) {
    return std::string(b.begin(), b.end());
}
double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}
std::string seconds_text(double s) {
    return std::to_string(int64_t(s + 0.5)) + " s";
}

}  // namespace

/// The peers' heartbeat counters as last read, and when each last moved: one tracker for the
/// watched waits, the heartbeat thread's watch during the passes and rank 0's linger.
class PeerWatch {
public:
    explicit PeerWatch(int world_size)
        : start_(Clock::now()), last_(size_t(world_size), -1), moved_(size_t(world_size), start_) {}
    /// Reads `rank`'s counter: the seconds it has not moved (0 when it just moved).
    double silence(c10d::Store& store, int rank) {
        const int64_t hb = store.add("hb/" + std::to_string(rank), 0);
        if (hb != last_[size_t(rank)]) {
            last_[size_t(rank)] = hb;
            moved_[size_t(rank)] = Clock::now();
            return 0;
        }
        return since(moved_[size_t(rank)]);
    }
    /// What is wrong with `rank` after silence() (empty: nothing): it beat and then fell silent
    /// for lost_after_s, or it never beat within join_timeout_s.
    std::string verdict(int rank, double silent, const DistributedEnv& env, const std::string& who) const {
        if (last_[size_t(rank)] == 0 && since(start_) > env.join_timeout_s)
            return who + " never joined the run within " + seconds_text(env.join_timeout_s);
        if (last_[size_t(rank)] > 0 && silent > env.lost_after_s)
            return who + " stopped responding: no heartbeat for " + seconds_text(env.lost_after_s) +
                   " (killed, crashed, hung in a batch, or its host unreachable)";
        return {};
    }

private:
    Clock::time_point start_;
    std::vector<int64_t> last_;
    std::vector<Clock::time_point> moved_;
};

int64_t Group::now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::string Group::who(int rank) const {
    if (size_t(rank) < hosts_.size() && !hosts_[size_t(rank)].empty())
        return "rank " + std::to_string(rank) + " on " + hosts_[size_t(rank)];
    return "rank " + std::to_string(rank);
}

void Group::learn_hosts() noexcept {
    // Each rank posts its host when it joins: a rank lost before every hello arrived is still named.
    try {
        hosts_.resize(size_t(env_.world_size));
        for (int r = 0; r < env_.world_size; ++r) {
            const std::string key = "host/" + std::to_string(r);
            if (hosts_[size_t(r)].empty() && s_->store->check({key}))
                hosts_[size_t(r)] = string_of(s_->store->get(key));
        }
    } catch (...) {
    }
}

template <class F>
auto Group::store_call(F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const c10::Error& e) {
        const std::string host = env_.agent_store ? "torchrun's agent" : who(0);
        throw BackendError(who(env_.rank) + " lost the rendezvous store at " + env_.master_addr + ":" +
                           std::to_string(env_.master_port) + " (hosted by " + host +
                           "): " + e.what_without_backtrace());
    }
}

Group::Group(const DistributedEnv& env, std::function<bool()> cancel)
    : env_(env), cancel_(std::move(cancel)), s_(std::make_unique<Stores>()) {
    connect();
    heart_ = std::thread([this] { beat(); });
}

void Group::connect() {
    store_call([&] {
        c10d::TCPStoreOptions o;
        o.port = uint16_t(env_.master_port);
        o.isServer = !env_.agent_store && env_.rank == 0;
        o.waitWorkers = false;
        o.multiTenant = true;
        o.timeout = std::chrono::milliseconds(int64_t(env_.join_timeout_s * 1000));
        s_->tcp = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, o);
        // Our own keys, apart from torchrun's and the job's; a second run launched into the same
        // store takes the next generation (every rank counts its arrival).
        const std::string base = "ampscope/" + env_.run_id + "/" + std::to_string(env_.restart);
        auto run = c10::make_intrusive<c10d::PrefixStore>(base, s_->tcp);
        const int64_t gen = (run->add("arrivals", 1) - 1) / env_.world_size;
        const std::string prefix = base + "/" + std::to_string(gen);
        s_->store = c10::make_intrusive<c10d::PrefixStore>(prefix, s_->tcp);
        s_->heart = c10::make_intrusive<c10d::PrefixStore>(prefix, s_->tcp->clone());
        s_->coll = std::make_unique<c10d::StoreCollectives>(s_->store, env_.rank, env_.world_size);
        s_->store->set("host/" + std::to_string(env_.rank), env_.host);
        return 0;
    });
}

Group::~Group() {
    try {
        if (env_.rank != 0)
            s_->store->set("bye/" + std::to_string(env_.rank), std::string("1"));
        else
            linger();
    } catch (...) {  // the store is gone: nobody is left to wait for
    }
    stop_ = true;
    if (heart_.joinable()) heart_.join();
}

void Group::linger() {
    // Rank 0 may host the store, and torchrun stops the others once rank 0 exits: stay until
    // every other rank has read the end (said bye) or fallen silent (killed, hung), at most
    // lost_after_s.
    const auto t0 = Clock::now();
    PeerWatch watch(env_.world_size);
    while (since(t0) < env_.lost_after_s) {
        bool waiting = false;
        for (int r = 1; r < env_.world_size; ++r) {
            if (s_->store->check({"bye/" + std::to_string(r)})) continue;
            waiting = waiting || watch.silence(*s_->store, r) < 2.0;  // beats come every 0.5 s
        }
        if (!waiting) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

void Group::beat() {
    // Beats every 0.5 s and, while this rank computes, watches the peers it depends on (rank 0
    // every other rank, the others rank 0): a peer killed while this rank is inside its own
    // shard stops the run within lost_after_s, not when the shard ends.
    const std::string key = "hb/" + std::to_string(env_.rank);
    PeerWatch watch(env_.world_size);
    bool hung = false;
    while (!stop_) {
        try {
            if (!hung) s_->heart->add(key, 1);
            if (!aborted_ && s_->heart->check({"abort"})) aborted_ = true;
            const int64_t b = batch_since_ns_.load();
            if (!hung && b > 0 && double(now_ns() - b) * 1e-9 > env_.batch_timeout_s) {
                hung = true;  // stop beating: the others see this rank gone even if the abort is missed
                post_abort(*s_->heart, "backend",
                           who(env_.rank) + " hung: one batch has run for more than " +
                               seconds_text(env_.batch_timeout_s) + " (the batch timeout)");
            }
            if (!aborted_ && !hung) watch_peers(watch);
        } catch (...) {
            // the store is gone; the main thread finds out at its next call
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
}

void Group::watch_peers(PeerWatch& watch) {
    for (int p = env_.rank == 0 ? 1 : 0; p < (env_.rank == 0 ? env_.world_size : 1); ++p) {
        const std::string bye = "bye/" + std::to_string(p);
        if (s_->heart->check({bye})) continue;  // it finished and left
        const std::string msg = watch.verdict(p, watch.silence(*s_->heart, p), env_, posted_name(p));
        if (msg.empty() || s_->heart->check({bye})) continue;
        post_abort(*s_->heart, "backend", msg);
        aborted_ = true;  // the main thread stops between batches and throws the abort
        return;
    }
}

std::string Group::posted_name(int rank) const {
    // The heartbeat thread's own read of a host (hosts_ belongs to the main thread).
    const std::string key = "host/" + std::to_string(rank);
    if (s_->heart->check({key})) return "rank " + std::to_string(rank) + " on " + string_of(s_->heart->get(key));
    return "rank " + std::to_string(rank);
}

void Group::post_abort(c10d::Store& store, const std::string& kind, const std::string& message) {
    if (store.add("aborts", 1) == 1) store.set("abort", kind + "\n" + message);
}

void Group::abort(const std::string& kind, const std::string& message) noexcept {
    try {
        post_abort(*s_->store, kind, message);
    } catch (...) {
    }
}

void Group::throw_abort() {
    const std::string v = store_call([&] { return string_of(s_->store->get("abort")); });
    const auto nl = v.find('\n');
    throw_as(v.substr(0, nl), nl == std::string::npos ? v : v.substr(nl + 1));
}

void throw_as(const std::string& kind, const std::string& message) {
    if (kind == "input") throw InputError("", "", message);
    if (kind == "model") throw ModelError(message);
    throw BackendError(message);
}

void Group::wait(const std::function<bool()>& ready, const std::vector<int>& peers) {
    store_call([&] {
        PeerWatch watch(env_.world_size);
        for (;;) {
            if (s_->store->check({"abort"})) throw_abort();
            if (ready()) return 0;
            if (cancel_ && cancel_()) throw Cancelled();
            for (int p : peers) {
                const double silent = watch.silence(*s_->store, p);
                if (watch.verdict(p, silent, env_, who(p)).empty()) continue;
                learn_hosts();  // the same verdict, the host named
                const std::string msg = watch.verdict(p, silent, env_, who(p));
                abort("backend", msg);
                throw BackendError(msg);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });
}

std::vector<int> Group::silent_peers(double seconds) {
    std::vector<int> out;
    try {
        std::vector<int64_t> before;
        for (int r = 0; r < env_.world_size; ++r) before.push_back(s_->store->add("hb/" + std::to_string(r), 0));
        std::this_thread::sleep_for(std::chrono::milliseconds(int64_t(seconds * 1000)));
        for (int r = 0; r < env_.world_size; ++r)
            if (r != env_.rank && s_->store->add("hb/" + std::to_string(r), 0) == before[size_t(r)]) out.push_back(r);
    } catch (...) {
    }
    return out;
}

std::vector<std::string> Group::gather(const std::string& key, const std::string& mine) {
    if (env_.rank != 0) {
        store_call([&] {
            s_->coll->gatherSend(key, bytes_of(mine));
            return 0;
        });
        return {};
    }
    std::vector<std::string> keys;
    std::vector<int> peers;
    for (int r = 1; r < env_.world_size; ++r) {
        keys.push_back(key + "/" + std::to_string(r));
        peers.push_back(r);
    }
    wait([&] { return s_->store->check(keys); }, peers);
    std::vector<std::string> out;
    store_call([&] {
        for (auto& b : s_->coll->gatherRecv(key, {})) out.push_back(string_of(b));
        for (const auto& k : keys) s_->store->deleteKey(k);  // the store keeps no copy of the results
        return 0;
    });
    for (const auto& b : out) bytes_received_ += int64_t(b.size());
    return out;
}

void Group::broadcast(const std::string& key, const std::string& data) {
    store_call([&] {
        s_->coll->broadcastSend(key, bytes_of(data));
        return 0;
    });
}

std::string Group::receive(const std::string& key) {
    wait([&] { return s_->store->check({key}); }, {0});
    const std::string v = store_call([&] { return string_of(s_->coll->broadcastRecv(key)); });
    bytes_received_ += int64_t(v.size());
    return v;
}

std::string Group::wait_any(const std::vector<std::string>& keys) {
    std::string found;
    wait(
        [&] {
            for (const auto& k : keys)
                if (s_->store->check({k})) {
                    found = k;
                    return true;
                }
            return false;
        },
        {0});
    return found;
}

std::vector<std::string> Group::all_gather(const std::string& key, const std::string& mine) {
    auto parts = gather(key, mine);
    if (env_.rank == 0) {
        parts[0] = mine;
        nlohmann::json all = nlohmann::json::array();
        for (const auto& p : parts) all.push_back(nlohmann::json::binary(bytes_of(p)));
        broadcast(key + "/all", string_of(nlohmann::json::to_cbor(all)));
        return parts;
    }
    const std::string packed = receive(key + "/all");
    std::vector<std::string> out;
    try {
        for (const auto& b : nlohmann::json::from_cbor(packed)) out.push_back(string_of(b.get_binary()));
    } catch (const nlohmann::json::exception& e) {
        throw BackendError(who(0) + " sent an all-gather that does not decode: " + e.what());
    }
    if (out.size() != size_t(env_.world_size)) throw BackendError(who(0) + " sent an all-gather of the wrong size");
    return out;
}

}  // namespace detail
}  // namespace ampscope
