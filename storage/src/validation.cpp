// SPDX-License-Identifier: MIT
// The bench gate's data: the recorded comparison runs that may validate a benchmarked policy
// (the rule itself is the engine's choose_validation).
#include <sqlite3.h>

#include "ampscope/engine/rules.h"
#include "ampscope/storage/store.h"
#include "serialize.h"
#include "sqlite.h"

namespace ampscope::storage {

using sql::Stmt;

namespace {

/// Every completed comparison run that accepted `precision`, newest first, with the policy it
/// ran; `headers` gets each one's header column (read only for the chosen run).
std::vector<ValidationCandidate> candidates(sqlite3* db, Precision precision, std::vector<std::string>& headers) {
    Stmt s(db,
           "SELECT r.uuid, COALESCE(r.model_sha256,''), COALESCE(r.weights_sha256,''), "
           "COALESCE(r.probes_sha256,''), COALESCE(r.device,''), COALESCE(r.mode,''), p.keep_fp32, r.review_status, "
           "COALESCE(r.reviewed_by,''), COALESCE(r.reviewed_at,''), r.header_json "
           "FROM runs r JOIN comparisons c ON c.run_id = r.id "
           "JOIN passes p ON p.run_id = r.id AND p.precision = c.precision "
           "WHERE r.kind='compare' AND r.status='completed' AND c.precision=?1 AND c.verdict='accepted' "
           "ORDER BY r.started_at DESC, r.id DESC");
    s.bind(1, to_string(precision));
    std::vector<ValidationCandidate> out;
    while (s.step()) {
        ValidationCandidate c;
        c.run = s.text(0);
        c.policy = {s.text(1), s.text(2), s.text(3), s.text(4), precision, s.text(5), {}};
        const auto k = nlohmann::json::parse(s.text(6), nullptr, false);
        if (!k.is_array()) continue;  // malformed: validates nothing
        for (const auto& g : k)
            if (g.is_string()) c.policy.keep_fp32.push_back(g.get<std::string>());
        c.review = {parse_review_status(s.text(7), "review_status"), s.text(8), s.text(9)};
        out.push_back(std::move(c));
        headers.push_back(s.text(10));
    }
    return out;
}

}  // namespace

Validation Store::find_validation(const BenchPolicy& p) const {
    if (still_empty()) {
        Validation v;
        v.precision = p.precision;
        v.refusal = path_ + " holds no runs: no accepted validation run of " + describe(p);
        return v;
    }
    std::vector<std::string> headers;
    const auto all = candidates(db_, p.precision, headers);
    Validation v = choose_validation(p, all, path_);
    for (size_t i = 0; i < all.size() && !v.run.empty(); ++i)
        if (all[i].run == v.run) {
            RunResult r;
            ser::read_header(headers[i], r, path_ + ": run " + v.run + ": column runs.header_json");
            v.criteria = r.criteria;
            break;
        }
    return v;
}

}  // namespace ampscope::storage
