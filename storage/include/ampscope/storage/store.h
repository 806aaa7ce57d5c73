// SPDX-License-Identifier: MIT
#pragma once
/// \file store.h
/// The run store: one SQLite file of runs (WAL, foreign keys, versioned schema with
/// forward-only migrations). Qt-free and LibTorch-free.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ampscope/engine/rules.h"
#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"
#include "ampscope/storage/errors.h"

struct sqlite3;

namespace ampscope::storage {

/// Current schema version (PRAGMA user_version).
constexpr int kSchemaVersion = 11;

/// --db, else $AMPSCOPE_DB, else ${XDG_DATA_HOME:-~/.local/share}/ampscope/runs.sqlite.
std::string default_db_path(const std::string& flag = "");

struct RunFilter {
    std::string model;      ///< substring of the model source
    std::string precision;  ///< a pass precision the run has
    std::string device;
    std::string verdict;
    std::string status;
    std::string since, until;  ///< ISO-8601 bounds on started_at
    int limit = 1000;
};

/// One row of the run browser.
struct RunRow {
    std::string uuid, kind, status, verdict, model, probes, device, precisions, mode;
    std::string started_at, finished_at, error;
    ReviewStatus review_status = ReviewStatus::Open;
    int samples = 0;
    int annotations = 0;
};

struct Annotation {
    std::string uuid, author, created_at;
    std::string target_kind = "run";  ///< run | sample | layer
    std::string target;               ///< sample id, or "precision:index" of a layer
    std::string text;
};

// The bench gate's types are the engine's (rules.h holds the rule); named here too.
using ampscope::BenchPolicy;
using ampscope::Review;
using ampscope::Validation;

class Store {
public:
    /// How a file is opened:
    ///  - Create: recording (run, train, bench, import, the GUI): a path with no file becomes
    ///    a new database; an existing ampscope database is migrated.
    ///  - ReadWrite: an existing file only (list, show, annotate, review); never creates one.
    ///  - ReadOnly: an existing file only, never written (export, the source of an import).
    /// An empty SQLite file (0 bytes) is an empty database: initialised when writable, read as
    /// holding no runs otherwise. A file of another application (tables, no ampscope schema)
    /// is refused, unless `init_foreign` asks to add ampscope's tables to it. Impossible
    /// schema versions (negative, far beyond kSchemaVersion) and newer ones are refused.
    /// Writable opens mark runs of dead processes interrupted. Errors: StoreError naming the file.
    enum class Mode { Create, ReadWrite, ReadOnly };
    explicit Store(const std::string& path, Mode mode = Mode::Create, bool init_foreign = false);
    ~Store();
    Store(const Store&) = delete;
    Store& operator=(const Store&) = delete;

    const std::string& path() const { return path_; }
    bool read_only() const { return read_only_; }
    int schema_version() const;
    /// Throws StoreError when a table lacks a column this version uses.
    void check_layout() const;

    // ---- reading (one query per view) ----
    std::vector<RunRow> list_runs(const RunFilter& f = {}) const;
    /// Resolves a full UUID or a unique prefix; throws InputError otherwise.
    std::string resolve(const std::string& uuid_or_prefix) const;
    /// The whole run as the engine produced it (samples, passes, layers, comparisons). With
    /// `damaged`, unreadable layer-statistics chunks are skipped and described there (what is
    /// intact is returned); without it, they throw StoreError. Malformed JSON columns throw
    /// StoreError naming the file, the run and the column.
    RunResult load_run(const std::string& uuid, std::vector<std::string>* damaged = nullptr) const;
    std::string status(const std::string& uuid) const;
    std::string error(const std::string& uuid) const;
    std::vector<LayerStat> layers(const std::string& uuid, Precision p,
                                  std::vector<std::string>* damaged = nullptr) const;
    std::vector<Annotation> annotations(const std::string& uuid) const;
    /// "compare" or "train".
    std::string kind(const std::string& uuid) const;
    /// A training run as recorded: its spec, backend and model, steps, checkpoints, and the
    /// totals of its steps (training_totals). InputError when there is no training run `uuid`;
    /// StoreError naming the column when a stored value is malformed.
    TrainResult load_training(const std::string& uuid) const;
    /// The recorded steps of a training run.
    std::vector<TrainStep> training_steps(const std::string& uuid) const;
    std::vector<std::string> checkpoints(const std::string& uuid) const;
    Review review(const std::string& uuid) const;

    /// The validation a benchmark relies on (the bench gate): choose_validation (rules.h) over
    /// the completed comparison runs that accepted `policy.precision`, newest first, each with
    /// the policy it ran (hashes, device, mode, the FP32 regions of that AMP pass); `criteria`
    /// is the chosen run's.
    Validation find_validation(const BenchPolicy& policy) const;
    /// A recorded benchmark: what was measured (figures, batch, timer; model, probes and backend).
    struct BenchmarkRow {
        std::string uuid, created_at;
        bool validated = false;
        BenchResult result;
    };
    /// Benchmarks that rely on a run. StoreError naming the column when a result is malformed.
    std::vector<BenchmarkRow> benchmarks(const std::string& run_uuid) const;
    /// Records a benchmark of `spec` with the validations it relied on (one per AMP precision;
    /// validated when each has a run). Returns its UUID.
    std::string record_benchmark(const BenchResult& result, const BenchSpec& spec,
                                 const std::vector<Validation>& validations);

    // ---- writing ----
    void annotate(const std::string& uuid, Annotation a);
    void set_review(const std::string& uuid, ReviewStatus status, const std::string& by);
    void delete_run(const std::string& uuid);
    /// Inserts a complete run (import/export); false when the UUID is already present.
    bool insert_run(const RunResult& r, const std::string& status, const std::string& error,
                    const std::vector<Annotation>& notes, const Review& review);

private:
    void open_checked(bool init_foreign);
    void migrate();
    void mark_dead_runs_interrupted();
    void load_passes(int64_t run_pk, RunResult& r, std::vector<std::string>* damaged) const;
    void load_comparisons(int64_t run_pk, RunResult& r) const;
    /// An empty file opened read-only that nobody has initialised since.
    bool still_empty() const;
    sqlite3* db_ = nullptr;
    std::string path_;
    bool read_only_ = false;
    bool empty_ = false;  ///< an empty SQLite file opened read-only: no tables, no runs
    /// A read-only database whose -wal SQLite could not read in place: the private copy opened
    /// instead (removed when the store closes); "" otherwise.
    std::string snapshot_dir_;
    friend class RunWriter;
    friend class TrainWriter;
    friend struct StoreAccess;  ///< the connection, for the library's own files (src/sqlite.h)
};

/// Records a training run step by step (kind "train"): the header at start, each step and
/// checkpoint in its own transaction, the status at the end.
class TrainWriter : public TrainSink {
public:
    explicit TrainWriter(Store& store) : store_(store) {}
    void train_started(const TrainResult& header) override;
    void step_finished(const TrainStep& s) override;
    void checkpoint_written(const std::string& path, int step) override;
    void train_finished(const TrainResult& r) override;
    void train_failed(const std::string& status, const std::string& message) override;
    const std::string& run_uuid() const { return uuid_; }

private:
    Store& store_;
    std::string uuid_;
    int64_t run_id_ = -1;
    int effective_ = 0;
};

/// Records a run while it is produced: header at start, each pass and comparison in its own
/// transaction, the final status at the end. A killed process leaves every finished unit and
/// a run marked `running`, which the next read-write open turns into `interrupted`.
class RunWriter : public RunSink {
public:
    explicit RunWriter(Store& store) : store_(store) {}
    void run_started(const RunResult& header) override;
    void pass_finished(const PassResult& pass) override;
    void comparison_finished(const Comparison& cmp) override;
    void run_finished(const RunResult& result) override;
    void run_failed(const std::string& status, const std::string& message) override;
    const std::string& run_uuid() const { return uuid_; }

private:
    Store& store_;
    std::string uuid_;
    int64_t run_id_ = -1;
    int passes_ = 0, comparisons_ = 0;
    std::vector<SampleInfo> samples_;
};

/// Writes the given runs (with annotations and review) into a new self-contained file,
/// through a temporary file in the same folder renamed into place (a failure leaves nothing).
/// An existing `file` is replaced only when it is an ampscope export, or with `force`; the
/// database being exported from (by file identity: symlinks and other paths to it included)
/// is never replaced. A run with damaged layer statistics is refused (nothing would say so in
/// the file). Errors: InputError naming the file.
void export_runs(const Store& from, const std::vector<std::string>& uuids, const std::string& file, bool force = false);

/// True when `file` is an ampscope export (what export_runs may replace without force).
bool is_export_file(const std::string& file);

struct ImportResult {
    int added = 0, skipped = 0;
};
/// Merges an untrusted .ampscope file into `into` (runs keyed by UUID: importing twice adds
/// nothing). The file is opened read-only with SQLite's defensive settings and validated.
ImportResult import_file(Store& into, const std::string& file);

}  // namespace ampscope::storage
