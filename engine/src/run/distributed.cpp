// SPDX-License-Identifier: MIT
// A comparison run over torchrun's ranks: every rank loads the same model and probes (checked),
// runs every pass on its shard of whole batches, and sends its per-sample results to rank 0,
// which merges them into the run one process would have recorded and is the only rank that
// records (docs/distributed.md).
#include <ATen/ATen.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "ampscope/engine/vocabulary.h"
#include "ampscope/engine/distributed.h"
#include "ampscope/engine/errors.h"
#include "run/comparison.h"
#include "run/dist_group.h"
#include "run/shard.h"

namespace ampscope {
namespace detail {
namespace {

using nlohmann::json;

/// The user's progress and cancel, plus the group's: a batch starting arms the hang watch, and
/// another rank's abort cancels this rank's pass between batches.
class RankProgress : public ProgressObserver {
public:
    RankProgress(ProgressObserver* user, Group*& group) : user_(user), group_(group) {}
    void progress(const std::string& stage, int done, int total) override {
        if (group_) group_->batch_started();
        if (user_) user_->progress(stage, done, total);
    }
    bool cancel_requested() const override {
        return (user_ && user_->cancel_requested()) || (group_ && group_->aborted());
    }

private:
    ProgressObserver* user_;
    Group*& group_;
};

std::string kind_of(const std::exception& e) {
    if (dynamic_cast<const InputError*>(&e)) return "input";
    if (dynamic_cast<const ModelError*>(&e)) return "model";
    if (dynamic_cast<const Cancelled*>(&e)) return "cancelled";
    return "backend";
}

/// What must be the same on every rank, as the fields a mismatch names.
json identity(const ComparisonRun& run) {
    const auto& r = run.res;
    const auto& c = r.criteria;
    json precisions = json::array();
    for (auto p : run.spec.precisions) precisions.push_back(to_string(p));
    return {{"ampscope version", r.tool_version},
            {"torch version", r.backend.torch_version},
            {"model", r.model.source + " (sha256 " + r.model.sha256 + ")"},
            {"weights", r.model.weights_sha256},
            {"probes",
             r.probes.source + " (sha256 " + r.probes.sha256 + ", " + std::to_string(r.probes.count) + " samples)"},
            {"precision", precisions},
            {"keep_fp32", run.spec.keep_fp32},
            {"keep_bf16", run.spec.keep_bf16},
            {"fp8_what_if", run.spec.fp8_what_if},
            {"mx_scaling", to_string(run.spec.mx_scaling)},
            {"fp8_all_gemms", run.spec.fp8_all_gemms},
            {"seed", run.spec.seed},
            {"batch_size", run.model->fixed_batch > 0 ? run.model->fixed_batch : run.spec.batch_size},
            {"mode", to_string(run.spec.mode)},
            {"inspect", run.spec.inspect},
            {"criteria",
             {c.atol, c.rtol, c.tie_tolerance, to_string(c.tie_rule), c.max_flips, to_string(c.quality_metric),
              c.quality_threshold, c.quality_threshold_set, c.allow_nonfinite, c.output, c.max_flip_rate,
              c.max_mean_kld, c.min_same_top, c.mask_input, c.sequence_axis}}};
}

/// This rank's hello: who and where it is, what it loaded, or why it could not.
json setup(ComparisonRun& run, const DistributedEnv& env, std::exception_ptr& failure) {
    json h = {{"host", env.host}};
    try {
        run.setup();
        h["device"] = run.res.backend.device;
        h["identity"] = identity(run);
        h["run_id"] = run.res.run_id;
        h["fixed_at"] = run.res.criteria.fixed_at;
    } catch (const std::exception& e) {
        failure = std::current_exception();
        h["error_kind"] = kind_of(e);
        h["error"] = e.what();
    }
    return h;
}

/// Every rank's hello checked: a failed rank's error on every rank (its own on it), a rank that
/// loaded something else refused on every rank with the field named.
std::vector<json> check_hellos(Group& g, const std::vector<std::string>& raw, const std::exception_ptr& failure) {
    std::vector<json> hellos;
    std::vector<std::string> hosts;
    for (const auto& b : raw) {
        hellos.push_back(json::from_cbor(b));
        hosts.push_back(hellos.back().at("host").get<std::string>());
    }
    g.set_hosts(hosts);
    for (size_t r = 0; r < hellos.size(); ++r) {
        if (!hellos[r].contains("error")) continue;
        if (int(r) == g.env().rank) std::rethrow_exception(failure);
        throw_as(hellos[r].at("error_kind").get<std::string>(),
                 g.who(int(r)) + ": " + hellos[r].at("error").get<std::string>());
    }
    const json& ref = hellos[0].at("identity");
    for (size_t r = 1; r < hellos.size(); ++r)
        for (const auto& [field, value] : hellos[r].at("identity").items())
            if (ref.at(field) != value)
                throw InputError("", field,
                                 g.who(int(r)) + " has " + value.dump() + " but " + g.who(0) + " has " +
                                     ref.at(field).dump() + ": every rank must run the same " + field);
    return hellos;
}

std::vector<RankInfo> rank_table(const std::vector<json>& hellos, int64_t samples, int64_t batch) {
    std::vector<RankInfo> ranks;
    const int world = int(hellos.size());
    for (int r = 0; r < world; ++r) {
        const auto s = shard_range(samples, batch, r, world);
        RankInfo k;
        k.rank = r;
        k.host = hellos[size_t(r)].at("host");
        k.device = hellos[size_t(r)].at("device");
        k.first_sample = int(s.first);
        k.samples = int(s.count);
        ranks.push_back(std::move(k));
    }
    return ranks;
}

/// "rank 2, rank 3": the ranks whose shard is empty.
std::string idle_ranks(const std::vector<RankInfo>& ranks) {
    std::string out;
    for (const auto& r : ranks)
        if (r.samples == 0) out += (out.empty() ? "rank " : ", rank ") + std::to_string(r.rank);
    return out;
}

/// A failure on this rank told to the others; a cancel caused by another rank's abort is that
/// rank's error; a signal while a peer went silent (torchrun stops every rank when one dies)
/// names the peer.
[[noreturn]] void fail(Group& g, const std::exception& e) {
    g.learn_hosts();
    if (dynamic_cast<const Cancelled*>(&e)) {
        if (g.aborted()) g.throw_abort();
        if (const auto silent = g.silent_peers(2.0); !silent.empty()) {
            const std::string msg = g.who(silent.front()) + " stopped responding (no heartbeat); " +
                                    g.who(g.env().rank) +
                                    " was stopped by a signal (torchrun stops every rank when one fails)";
            g.abort("backend", msg);
            throw BackendError(msg);
        }
        g.abort("cancelled", g.who(g.env().rank) + " was interrupted");
        throw;
    }
    g.abort(kind_of(e), g.who(g.env().rank) + ": " + e.what());
    throw;
}

struct Shard {
    ProbeSet probes;
    RankProgress* progress;
};

/// This rank's pass over its shard; the hang watch is on only inside it.
PassResult local_pass(ComparisonRun& run, Group& g, const Shard& s, const PassOptions& o, bool first) {
    PassResult p = run_pass(*run.model, s.probes, run.device, o, s.progress, first);
    g.batch_ended();
    return p;
}

RunResult lead(ComparisonRun& run, Group& g, const Shard& shard) {
    int step = 0;
    run.pass_runner = [&](const PassOptions& o, bool first) {
        const std::string k = std::to_string(step++);
        g.broadcast("go/" + k, "");
        const auto t0 = std::chrono::steady_clock::now();
        bool mutated = false;
        PassOptions mine = o;
        if (o.inputs_mutated) mine.inputs_mutated = &mutated;
        std::vector<PassResult> parts{local_pass(run, g, shard, mine, first)};
        auto& ranks = run.res.ranks;
        ranks[0].seconds += parts[0].seconds;
        const auto raw = g.gather("pass/" + k, "");
        for (size_t r = 1; r < raw.size(); ++r) {
            ShardPass s = decode_shard(raw[r], int(r));
            ranks[r].seconds += s.pass.seconds;
            ranks[r].bytes += int64_t(raw[r].size());
            mutated = mutated || s.inputs_mutated;
            run.note_state_changes(s.state_changed);
            parts.push_back(std::move(s.pass));
        }
        PassResult merged = merge_shards(std::move(parts));
        merged.precision = o.precision;
        merged.keep_fp32 = o.keep_fp32;
        merged.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (o.inputs_mutated) *o.inputs_mutated = mutated;
        return merged;
    };
    RunResult res = run.execute();
    g.broadcast("done", json({{"verdict", int(res.verdict)}, {"run_id", res.run_id}}).dump());
    return res;
}

RunResult follow(ComparisonRun& run, Group& g, const Shard& shard) {
    for (int k = 0;; ++k) {
        const std::string go = "go/" + std::to_string(k);
        if (g.wait_any({go, "done"}) == "done") {
            const json d = json::parse(g.receive("done"));
            RunResult r;
            r.run_id = d.at("run_id");
            r.verdict = Verdict(d.at("verdict").get<int>());
            r.ranks = run.res.ranks;
            return r;
        }
        g.receive(go);
        PassOptions o = run.options();
        ShardPass s;
        if (k == 0) {
            o.inputs_mutated = &s.inputs_mutated;
        } else {
            o.keep_fp32 = run.spec.keep_fp32;
            o.precision = run.spec.precisions.at(size_t(k - 1));
        }
        run.state->restore(*run.model);
        s.pass = local_pass(run, g, shard, o, k == 0);
        s.state_changed = run.state->restore(*run.model);
        g.gather("pass/" + std::to_string(k), encode_shard(s));
    }
}

}  // namespace
}  // namespace detail

RunResult run_comparison_distributed(const RunSpec& spec_in, const DistributedEnv& env, RunSink* sink,
                                     ProgressObserver* progress) {
    using namespace detail;
    if (spec_in.mode == Mode::Train)
        throw InputError("", "mode",
                         "train under torchrun: dropout draws from one random stream across all batches, so a rank's "
                         "shard cannot give the single-process run's values; run train mode in one process");
    for (auto p : spec_in.precisions)
        if (p == Precision::Fp8Delayed)
            throw InputError("", "precision",
                             "fp8-delayed under torchrun: each batch's scales come from the batches before it, which "
                             "another rank runs; run fp8-delayed in one process");
    RunSpec spec = spec_in;
    spec.device = rank_device(spec.device, env);
    Group* group = nullptr;
    RankProgress rank_progress(progress, group);
    ComparisonRun run(spec, env.rank == 0 ? sink : nullptr, &rank_progress);
    Group g(env, [progress] { return progress && progress->cancel_requested(); });
    group = &g;
    try {
        std::exception_ptr failure;
        const json hello = setup(run, env, failure);
        const auto v = json::to_cbor(hello);
        const auto hellos = check_hellos(g, g.all_gather("hello", std::string(v.begin(), v.end())), failure);
        const int64_t batch = hellos[0].at("identity").at("batch_size").get<int64_t>();
        run.res.ranks = rank_table(hellos, int64_t(run.res.samples.size()), batch);
        if (const auto idle = idle_ranks(run.res.ranks); !idle.empty())
            run.res.warnings.push_back(idle + " ran no samples: the probe set has fewer batches of " +
                                       std::to_string(batch) + " than there are ranks (" +
                                       std::to_string(env.world_size) + "); a smaller batch size spreads it");
        const auto& mine = run.res.ranks[size_t(env.rank)];
        Shard shard{shard_probes(run.probes, {mine.first_sample, mine.samples}), &rank_progress};
        return env.rank == 0 ? lead(run, g, shard) : follow(run, g, shard);
    } catch (const std::exception& e) {
        fail(g, e);
    }
}

}  // namespace ampscope
