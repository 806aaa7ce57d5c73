// SPDX-License-Identifier: MIT
// Replays recorded as runs of kind "replay": model, checkpoint (weights_sha256 holds the
// checkpoint files' hash), batch (probes_source / probes_sha256) and the replay JSON as header.
#include "ampscope/storage/replay_record.h"

#include <unistd.h>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/run.h"
#include "ampscope/engine/text.h"
#include "ampscope/storage/errors.h"
#include "sqlite.h"

namespace ampscope::storage {

std::string host_name();

void record_replay(Store& store, const ReplayRecord& r) {
    if (store.read_only()) throw StoreError(store.path() + ": opened read-only; a replay cannot be recorded");
    sqlite3* db = StoreAccess::db(store);
    sql::Stmt s(db,
                "INSERT INTO runs(uuid, kind, status, verdict, model_source, weights_sha256, probes_source, "
                "probes_sha256, device, "
                "precisions, mode, header_json, tool_version, started_at, finished_at, pid, host) "
                "VALUES(?1,'replay','completed',?2,?3,?4,?5,?6,?7,?8,'train',?9,?10,?11,?12,?13,?14)");
    s.bind(1, r.uuid)
        .bind(2, r.verdict)
        .bind(3, r.model)
        .bind(4, r.checkpoint_sha256)
        .bind(5, r.batch)
        .bind(6, r.batch_sha256)
        .bind(7, r.device)
        .bind(8, r.precisions)
        .bind(9, r.json)
        .bind(10, version())
        .bind(11, r.started_at)
        .bind(12, r.finished_at)
        .bind(13, int64_t(getpid()))
        .bind(14, host_name());
    s.run();
}

bool copy_replay(const Store& from, Store& to, const std::string& uuid) {
    if (to.read_only()) throw StoreError(to.path() + ": opened read-only; a replay cannot be recorded");
    {
        sql::Stmt have(StoreAccess::db(to), "SELECT 1 FROM runs WHERE uuid=?1");
        have.bind(1, uuid);
        if (have.step()) return false;
    }
    static const char* columns =
        "uuid, kind, status, verdict, model_source, weights_sha256, probes_source, probes_sha256, device, precisions, "
        "mode, "
        "header_json, tool_version, started_at, finished_at, host";
    sql::Stmt q(StoreAccess::db(from),
                (std::string("SELECT ") + columns + " FROM runs WHERE uuid=?1 AND kind='replay'").c_str());
    q.bind(1, uuid);
    if (!q.step()) throw InputError(from.path(), uuid, "no replay run with this id");
    sql::Stmt ins(StoreAccess::db(to), (std::string("INSERT INTO runs(") + columns +
                                        ") VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)")
                                           .c_str());
    for (int i = 0; i < 16; ++i) ins.bind(i + 1, q.text(i));
    ins.run();
    for (auto a : from.annotations(uuid)) to.annotate(uuid, a);
    if (const auto rv = from.review(uuid); rv.status != ReviewStatus::Open) to.set_review(uuid, rv.status, rv.by);
    return true;
}

std::string replay_json(const Store& store, const std::string& uuid) {
    sql::Stmt s(StoreAccess::db(store), "SELECT header_json FROM runs WHERE uuid=?1 AND kind='replay'");
    s.bind(1, uuid);
    if (!s.step()) throw InputError(store.path(), uuid, "no replay run with this id");
    return s.text(0);
}

ReplayResult checked_replay(const Store& store, const std::string& uuid) {
    const std::string where = store.path() + ": run " + uuid + ": column runs.header_json";
    ReplayResult r;
    try {
        r = replay_from_json(replay_json(store, uuid), where);
    } catch (const InputError& e) {
        throw StoreError(std::string("not a valid replay record: ") + e.what());
    }
    if (r.run_id != uuid)
        throw StoreError(where + ": not a valid replay record: field 'run_id' is '" + clip_echo(r.run_id, 80) +
                         "', not the run's own id");
    return r;
}

}  // namespace ampscope::storage
