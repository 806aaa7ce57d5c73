// SPDX-License-Identifier: MIT
#include "token_rows.h"

#include <cmath>
#include <cstring>

#include "ampscope/storage/errors.h"
#include "real_column.h"
#include "sqlite.h"

namespace ampscope::storage {

using sql::Stmt;

void insert_tokens(sqlite3* db, int64_t cid, const TokenStats& t, const std::map<std::string, int64_t>& index) {
    Stmt s(db,
           "INSERT INTO token_stats(comparison_id, length, vocab, positions, masked, mean_kld, p99_kld, max_kld, "
           "same_top, top5_overlap, "
           "rms_dp, label_tokens, ref_ce, amp_ce, kld) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)");
    s.bind(1, cid)
        .bind(2, t.length)
        .bind(3, t.vocab)
        .bind(4, t.positions)
        .bind(5, t.masked)
        .bind(6, t.mean_kld)
        .bind(7, t.p99_kld)
        .bind(8, t.max_kld)
        .bind(9, t.same_top)
        .bind(10, t.top5_overlap)
        .bind(11, t.rms_dp)
        .bind(12, t.label_tokens)
        .bind(13, t.ref_ce)
        .bind(14, t.amp_ce)
        .bind_blob(15, t.kld.data(), t.kld.size() * sizeof(float));
    s.run();
    Stmt b(db, "INSERT INTO token_boundaries VALUES(?1,?2,?3,?4,?5)");
    for (size_t i = 0; i < t.boundary.size(); ++i) {
        const auto& x = t.boundary[i];
        b.bind(1, cid).bind(2, int64_t(i)).bind(3, index.at(x.sample)).bind(4, x.position).bind(5, x.ref_margin);
        b.run();
    }
}

std::optional<TokenStats> read_tokens(sqlite3* db, int64_t cid, const std::vector<SampleInfo>& samples,
                                      const std::string& where) {
    Stmt s(db,
           "SELECT length, vocab, positions, masked, mean_kld, p99_kld, max_kld, same_top, top5_overlap, rms_dp, "
           "label_tokens, ref_ce, "
           "amp_ce, kld FROM token_stats WHERE comparison_id=?1");
    s.bind(1, cid);
    if (!s.step()) return std::nullopt;
    TokenStats t;
    t.length = int(s.i64(0));
    t.vocab = int(s.i64(1));
    t.positions = s.i64(2);
    t.masked = s.i64(3);
    t.mean_kld = real::figure(s, 4);
    t.p99_kld = real::figure(s, 5);
    t.max_kld = real::figure(s, 6);
    t.same_top = real::figure(s, 7);
    t.top5_overlap = real::figure(s, 8);
    t.rms_dp = real::figure(s, 9);
    t.label_tokens = s.i64(10);
    t.ref_ce = real::figure(s, 11);  // NULL: a NaN SQLite made NULL (real_column.h)
    t.amp_ce = real::figure(s, 12);
    t.ref_ppl = std::exp(t.ref_ce);
    t.amp_ppl = std::exp(t.amp_ce);
    const auto bytes = s.blob(13);
    if (t.length < 0 || bytes.size() != samples.size() * size_t(t.length) * sizeof(float))
        throw StoreError(where + ": token_stats.kld holds " + std::to_string(bytes.size()) + " bytes; expected " +
                         std::to_string(samples.size()) + " samples x " + std::to_string(t.length) +
                         " positions of float32");
    t.kld.resize(bytes.size() / sizeof(float));
    if (!bytes.empty()) std::memcpy(t.kld.data(), bytes.data(), bytes.size());
    Stmt b(db, "SELECT sample_idx, position, ref_margin FROM token_boundaries WHERE comparison_id=?1 ORDER BY seq");
    b.bind(1, cid);
    while (b.step()) {
        const int64_t i = b.i64(0);
        if (i < 0 || size_t(i) >= samples.size())
            throw StoreError(where + ": boundary position for unknown sample index " + std::to_string(i));
        t.boundary.push_back({samples[size_t(i)].id, int(b.i64(1)), b.f64(2)});
    }
    return t;
}

}  // namespace ampscope::storage
