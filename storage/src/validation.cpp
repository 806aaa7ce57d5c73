// SPDX-License-Identifier: MIT
// The bench gate: which recorded comparison run validates a benchmarked policy.
#include <sqlite3.h>

#include <algorithm>
#include <set>

#include "ampscope/storage/store.h"
#include "serialize.h"
#include "sqlite.h"

namespace ampscope::storage {

using sql::Stmt;

namespace {

/// A comparison run that accepted the policy's precision, with the policy it ran.
struct Candidate {
    std::string uuid, started_at, model, weights, probes, device, mode, header;
    std::set<std::string> keep_fp32;
    Review review;
};

std::string regions(const std::set<std::string>& s) {
    if (s.empty()) return "none";
    std::string out;
    for (const auto& g : s) out += (out.empty() ? "" : ", ") + g;
    return "[" + out + "]";
}

std::string short_hash(const std::string& h) { return h.size() > 12 ? h.substr(0, 12) : h; }

/// Each way `c` differs from `p`, in words ("" when it is the benchmarked policy).
std::vector<std::string> differences(const Candidate& c, const BenchPolicy& p, const std::set<std::string>& keep) {
    std::vector<std::string> d;
    auto differs = [&](const char* what, const std::string& validated, const std::string& benched) {
        if (validated != benched) d.push_back(std::string(what) + " (validated " + validated + ", benchmarked " + benched + ")");
    };
    differs("model file", short_hash(c.model), short_hash(p.model_sha256));
    differs("weights", short_hash(c.weights), short_hash(p.weights_sha256));
    differs("probe set", short_hash(c.probes), short_hash(p.probes_sha256));
    differs("device", c.device, p.device);
    differs("mode", c.mode, p.mode);
    differs("FP32 regions", regions(c.keep_fp32), regions(keep));
    return d;
}

std::vector<Candidate> candidates(sqlite3* db, Precision precision) {
    // Newest first; every completed comparison run that accepted this precision.
    Stmt s(db, "SELECT r.uuid, r.started_at, COALESCE(r.model_sha256,''), COALESCE(r.weights_sha256,''), "
               "COALESCE(r.probes_sha256,''), COALESCE(r.device,''), COALESCE(r.mode,''), p.keep_fp32, r.review_status, "
               "COALESCE(r.reviewed_by,''), COALESCE(r.reviewed_at,''), r.header_json "
               "FROM runs r JOIN comparisons c ON c.run_id = r.id "
               "JOIN passes p ON p.run_id = r.id AND p.precision = c.precision "
               "WHERE r.kind='compare' AND r.status='completed' AND c.precision=?1 AND c.verdict='accepted' "
               "ORDER BY r.started_at DESC, r.id DESC");
    s.bind(1, to_string(precision));
    std::vector<Candidate> out;
    while (s.step()) {
        Candidate c{s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5), s.text(6), s.text(11), {}, {}};
        const auto k = nlohmann::json::parse(s.text(7), nullptr, false);
        if (!k.is_array()) continue;  // malformed: validates nothing
        for (const auto& g : k)
            if (g.is_string()) c.keep_fp32.insert(g.get<std::string>());
        c.review = {s.text(8), s.text(9), s.text(10)};
        out.push_back(std::move(c));
    }
    return out;
}

Criteria criteria_of(const Candidate& c, const std::string& path) {
    RunResult r;
    try {
        ser::read_header(nlohmann::json::parse(c.header), r);
    } catch (const nlohmann::json::exception& e) {
        throw StoreError(path + ": run " + c.uuid + ": column runs.header_json is malformed: " + e.what());
    }
    return r.criteria;
}

}  // namespace

Validation Store::find_validation(const BenchPolicy& p) const {
    Validation v;
    v.precision = p.precision;
    const std::set<std::string> keep(p.keep_fp32.begin(), p.keep_fp32.end());
    const std::string what = to_string(p.precision) + " with FP32 regions " + regions(keep) + ", mode " + p.mode +
                             ", on " + p.device;
    if (still_empty()) {
        v.refusal = path_ + " holds no runs: no accepted validation run of " + what;
        return v;
    }
    const auto all = candidates(db_, p.precision);
    const Candidate* nearest = nullptr;
    size_t nearest_diffs = 0;
    for (const auto& c : all) {
        const auto d = differences(c, p, keep);
        if (d.empty()) {
            if (c.review.status == "rejected") {
                v.refusal = "run " + c.uuid + " validated exactly this policy (" + what + ") but its review is rejected" +
                            (c.review.by.empty() ? std::string() : " (by " + c.review.by + ")") +
                            ": a human rejection is not overridden by an older run; record a new validation run";
                return v;
            }
            v.run = c.uuid;
            v.review = c.review;
            v.criteria = criteria_of(c, path_);
            return v;
        }
        if (!nearest || d.size() < nearest_diffs) {
            nearest = &c;
            nearest_diffs = d.size();
        }
    }
    v.refusal = path_ + " holds no accepted validation run of " + what;
    if (nearest) {
        std::string d;
        for (const auto& x : differences(*nearest, p, keep)) d += (d.empty() ? "" : "; ") + x;
        v.refusal += "; the nearest, run " + nearest->uuid + ", accepted " + to_string(p.precision) + " but differs in " + d;
    }
    return v;
}

}  // namespace ampscope::storage
