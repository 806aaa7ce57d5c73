// SPDX-License-Identifier: MIT
// torchrun's environment, read without LibTorch (the store commands' front end checks it too).
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "ampscope/engine/distributed.h"
#include "ampscope/engine/errors.h"

namespace ampscope {

namespace {

/// An environment variable as an integer in [lo, hi]; InputError naming it otherwise.
int env_int(const char* name, int lo, int hi, std::optional<int> fallback = std::nullopt) {
    const char* v = std::getenv(name);
    if (!v || !*v) {
        if (fallback) return *fallback;
        throw InputError("environment", name, "is not set; expected it from torchrun (an integer)");
    }
    char* end = nullptr;
    errno = 0;
    const long x = std::strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || x < lo || x > hi)
        throw InputError(
            "environment", name,
            "'" + std::string(v) + "' is not an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
    return int(x);
}

std::string env_str(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : fallback;
}

}  // namespace

std::optional<DistributedEnv> distributed_env() {
    if (!std::getenv("WORLD_SIZE")) return std::nullopt;
    DistributedEnv e;
    e.world_size = env_int("WORLD_SIZE", 1, 1 << 20);
    if (e.world_size == 1) return std::nullopt;
    e.rank = env_int("RANK", 0, e.world_size - 1);
    e.local_rank = env_int("LOCAL_RANK", 0, e.world_size - 1, 0);
    e.master_addr = env_str("MASTER_ADDR", "");
    if (e.master_addr.empty())
        throw InputError("environment", "MASTER_ADDR", "is not set; expected the rendezvous host from torchrun");
    e.master_port = env_int("MASTER_PORT", 1, 65535);
    e.agent_store = env_str("TORCHELASTIC_USE_AGENT_STORE", "") == "True";
    e.run_id = env_str("TORCHELASTIC_RUN_ID", "none");
    e.restart = env_int("TORCHELASTIC_RESTART_COUNT", 0, std::numeric_limits<int>::max(), 0);
    char host[256] = {};
    e.host = gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string("unknown host");
    return e;
}

std::string rank_device(const std::string& device, const DistributedEnv& env) {
    if (device == "cuda") return "cuda:" + std::to_string(env.local_rank);
    return device;
}

}  // namespace ampscope
