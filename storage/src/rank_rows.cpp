// SPDX-License-Identifier: MIT
#include "rank_rows.h"

#include <climits>
#include <cmath>

#include "ampscope/storage/errors.h"
#include "sqlite.h"

namespace ampscope::storage {

using sql::Stmt;

std::string rank_problem(const std::vector<RankInfo>& ranks, size_t samples) {
    int64_t next = 0;  // where the next rank's samples must start
    for (size_t i = 0; i < ranks.size(); ++i) {
        const auto& k = ranks[i];
        const std::string who = "rank " + std::to_string(k.rank);
        if (k.rank != int(i))
            return "run_ranks.rank: " + who + " in place " + std::to_string(i) + "; expected the ranks 0 to " +
                   std::to_string(ranks.size() - 1) + " in order";
        if (k.samples < 0)
            return "run_ranks.samples: " + who + " has " + std::to_string(k.samples) + " samples; expected 0 or more";
        if (k.first_sample != next)
            return "run_ranks.first_sample: " + who + " starts at sample " + std::to_string(k.first_sample) +
                   "; expected " + std::to_string(next) + " (" +
                   (k.first_sample < next ? "it overlaps the rank before" : "samples between the ranks are missing") +
                   "; each rank runs the samples after the previous one's)";
        if (!std::isfinite(k.seconds) || k.seconds < 0)
            return "run_ranks.seconds: " + who + " took " + std::to_string(k.seconds) +
                   " s; expected a time of 0 or more";
        if (k.bytes < 0)
            return "run_ranks.bytes: " + who + " sent " + std::to_string(k.bytes) + " bytes; expected 0 or more";
        next += k.samples;
    }
    if (!ranks.empty() && next != int64_t(samples))
        return "run_ranks.samples: the ranks ran " + std::to_string(next) + " samples; the run has " +
               std::to_string(samples);
    return {};
}

void insert_ranks(sqlite3* db, int64_t run_pk, const std::vector<RankInfo>& ranks, size_t samples) {
    if (const auto p = rank_problem(ranks, samples); !p.empty()) throw StoreError("ranks not recorded: " + p);
    Stmt s(db, "INSERT INTO run_ranks VALUES(?1,?2,?3,?4,?5,?6,?7,?8)");
    for (const auto& k : ranks) {
        s.bind(1, run_pk)
            .bind(2, k.rank)
            .bind(3, k.host)
            .bind(4, k.device)
            .bind(5, k.first_sample)
            .bind(6, k.samples)
            .bind(7, k.seconds)
            .bind(8, k.bytes);
        s.run();
    }
}

void replace_ranks(sqlite3* db, int64_t run_pk, const std::vector<RankInfo>& ranks, size_t samples) {
    Stmt d(db, "DELETE FROM run_ranks WHERE run_id=?1");
    d.bind(1, run_pk);
    d.run();
    insert_ranks(db, run_pk, ranks, samples);
}

std::vector<RankInfo> read_ranks(sqlite3* db, int64_t run_pk, size_t samples, const std::string& where) {
    Stmt s(db,
           "SELECT rank, host, device, first_sample, samples, seconds, bytes FROM run_ranks WHERE run_id=?1 "
           "ORDER BY rank");
    s.bind(1, run_pk);
    std::vector<RankInfo> out;
    auto as_int = [](int64_t v) { return v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : int(v); };
    while (s.step()) {
        RankInfo k;
        k.rank = as_int(s.i64(0));
        k.host = s.text(1);
        k.device = s.text(2);
        k.first_sample = as_int(s.i64(3));
        k.samples = as_int(s.i64(4));
        k.seconds = s.f64(5);
        k.bytes = s.i64(6);
        out.push_back(std::move(k));
    }
    if (const auto p = rank_problem(out, samples); !p.empty()) throw StoreError(where + ": column " + p);
    return out;
}

}  // namespace ampscope::storage
