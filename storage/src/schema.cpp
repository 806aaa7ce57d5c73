// SPDX-License-Identifier: MIT
// Schema and forward-only migrations. Version N's script takes a database at N-1 to N.
//
// A released script is never edited: every table change is a new version with its own
// script (and kSchemaVersion + 1), because files written by earlier builds exist and must
// migrate. The v1 script below was edited in place twice before this rule (236a746, 8ebd10b);
// the layouts those builds left are recognised by their columns and converted
// (legacy_layers.h), and tests/fixtures/store holds a file written by every released layout.
#include "schema.h"

namespace ampscope::storage::schema {

const std::vector<std::string>& migrations() {
    static const std::vector<std::string> m = {
        // v1: comparison runs, passes, layers, comparisons, annotations, review
        R"sql(
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL DEFAULT 'compare',
  status TEXT NOT NULL CHECK(status IN ('running','completed','failed','interrupted','cancelled')),
  verdict TEXT,
  error TEXT,
  model_source TEXT, model_sha256 TEXT, weights_sha256 TEXT,
  probes_source TEXT, probes_sha256 TEXT, probe_count INTEGER,
  device TEXT, precisions TEXT, mode TEXT,
  criteria_sha256 TEXT, criteria_fixed_at TEXT,
  header_json TEXT NOT NULL,
  warnings_json TEXT NOT NULL DEFAULT '[]',
  tool_version TEXT,
  started_at TEXT NOT NULL, finished_at TEXT,
  pid INTEGER, host TEXT,
  review_status TEXT NOT NULL DEFAULT 'open' CHECK(review_status IN ('open','accepted','rejected')),
  reviewed_by TEXT, reviewed_at TEXT);
CREATE INDEX runs_started ON runs(started_at);
CREATE INDEX runs_model ON runs(model_sha256);
CREATE INDEX runs_status ON runs(status, verdict);
CREATE TABLE samples(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL, sample_id TEXT NOT NULL, tag TEXT NOT NULL,
  PRIMARY KEY(run_id, idx)) WITHOUT ROWID;
CREATE TABLE passes(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL, precision TEXT NOT NULL, keep_fp32 TEXT NOT NULL,
  num_outputs INTEGER NOT NULL, outputs BLOB NOT NULL,
  nonfinite_json TEXT NOT NULL, origin_json TEXT, quality REAL, seconds REAL,
  UNIQUE(run_id, seq));
CREATE INDEX passes_run ON passes(run_id);
CREATE TABLE layers(
  id INTEGER PRIMARY KEY,            -- pass_id << 32 | idx: appends, and a pass is one rowid range
  pass_id INTEGER NOT NULL REFERENCES passes(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL, module TEXT NOT NULL, op TEXT NOT NULL, dtype TEXT NOT NULL, shape BLOB NOT NULL,
  flags INTEGER NOT NULL,            -- 1 autocast, 2 inputs finite, 4 origin
  absmax REAL, nonfinite INTEGER,    -- for ad-hoc SQL; everything else is in stats
  stats BLOB NOT NULL);              -- 11 int64 counters then 6 float64 (see storage/src/layer_stats.h)
CREATE TABLE comparisons(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL, precision TEXT NOT NULL, verdict TEXT NOT NULL,
  max_abs_delta REAL, max_rel_delta REAL, UNIQUE(run_id, seq));
CREATE INDEX comparisons_run ON comparisons(run_id);
CREATE TABLE deltas(
  comparison_id INTEGER NOT NULL REFERENCES comparisons(id) ON DELETE CASCADE,
  sample_idx INTEGER NOT NULL, abs REAL, rel REAL, finite INTEGER, within INTEGER, worst_index INTEGER,
  ref_decision INTEGER, amp_decision INTEGER,
  PRIMARY KEY(comparison_id, sample_idx)) WITHOUT ROWID;
CREATE TABLE flips(
  comparison_id INTEGER NOT NULL REFERENCES comparisons(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL, sample_idx INTEGER NOT NULL, ref INTEGER, amp INTEGER, ref_margin REAL, amp_margin REAL,
  PRIMARY KEY(comparison_id, seq)) WITHOUT ROWID;
CREATE TABLE criteria_results(
  comparison_id INTEGER NOT NULL REFERENCES comparisons(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL, name TEXT NOT NULL, passed INTEGER NOT NULL, detail TEXT, samples_json TEXT NOT NULL,
  PRIMARY KEY(comparison_id, seq)) WITHOUT ROWID;
CREATE TABLE annotations(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  uuid TEXT NOT NULL UNIQUE, author TEXT NOT NULL, created_at TEXT NOT NULL,
  target_kind TEXT NOT NULL CHECK(target_kind IN ('run','sample','layer')), target TEXT NOT NULL, text TEXT NOT NULL);
CREATE INDEX annotations_run ON annotations(run_id);
CREATE TRIGGER runs_criteria_immutable BEFORE UPDATE OF header_json, criteria_sha256, criteria_fixed_at ON runs
BEGIN SELECT RAISE(ABORT, 'criteria are fixed before the first pass and cannot be edited'); END;
)sql",
        // v2: training runs (steps and checkpoints)
        R"sql(
CREATE TABLE training_steps(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL, loss_ref REAL, loss_amp REAL, scale REAL, found_inf INTEGER, skipped INTEGER,
  effective_updates INTEGER, grad_norm REAL, lr REAL, divergence REAL, nonfinite_stage TEXT, origin_json TEXT,
  PRIMARY KEY(run_id, step)) WITHOUT ROWID;
CREATE TABLE checkpoints(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL, effective_updates INTEGER, path TEXT NOT NULL, sha256 TEXT, created_at TEXT NOT NULL);
CREATE INDEX checkpoints_run ON checkpoints(run_id);
)sql",
        // v3: speed and memory measured after validation (ampscope-cli bench)
        R"sql(
CREATE TABLE benchmarks(
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,
  run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,   -- the validation run it relies on
  validated INTEGER NOT NULL,
  model_sha256 TEXT NOT NULL, probes_sha256 TEXT NOT NULL, device TEXT NOT NULL,
  created_at TEXT NOT NULL, result_json TEXT NOT NULL);
CREATE INDEX benchmarks_run ON benchmarks(run_id);
CREATE INDEX comparisons_verdict ON comparisons(precision, verdict);
)sql",
        // v4: per-op layer statistics in chunks of up to 4096 rows (storage/src/layer_chunk.h);
        // rows written before stay in `layers` and are read from there.
        R"sql(
CREATE TABLE layer_chunks(
  pass_id INTEGER NOT NULL REFERENCES passes(id) ON DELETE CASCADE,
  first_idx INTEGER NOT NULL,        -- index of the chunk's first layer
  rows INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY(pass_id, first_idx)) WITHOUT ROWID;
)sql",
        // v5: gradient elements lost to underflow per training step
        R"sql(
ALTER TABLE training_steps ADD COLUMN grad_underflow INTEGER;
)sql",
        // v6: GradScaler's growth tracker per training step
        R"sql(
ALTER TABLE training_steps ADD COLUMN growth_tracker INTEGER;
)sql",
        // v7: sequence outputs (language models) judged per position: the position of a flip, the
        // per-token figures of a comparison, and the reference's boundary positions
        R"sql(
ALTER TABLE flips ADD COLUMN position INTEGER;
CREATE TABLE token_stats(
  comparison_id INTEGER PRIMARY KEY REFERENCES comparisons(id) ON DELETE CASCADE,
  length INTEGER NOT NULL, vocab INTEGER NOT NULL, positions INTEGER NOT NULL, masked INTEGER NOT NULL,
  mean_kld REAL, p99_kld REAL, max_kld REAL, same_top REAL, top5_overlap REAL, rms_dp REAL,
  label_tokens INTEGER NOT NULL, ref_ce REAL, amp_ce REAL,
  kld BLOB NOT NULL);                -- float32 KL(ref || amp) per position [samples x length], NaN where not compared
CREATE TABLE token_boundaries(
  comparison_id INTEGER NOT NULL REFERENCES comparisons(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL, sample_idx INTEGER NOT NULL, position INTEGER NOT NULL, ref_margin REAL,
  PRIMARY KEY(comparison_id, seq)) WITHOUT ROWID;
)sql",
        // v8: the ranks of a run launched under torchrun (docs/distributed.md): which samples each
        // ran, where, how long; a single-process run has none
        R"sql(
CREATE TABLE run_ranks(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank INTEGER NOT NULL, host TEXT NOT NULL, device TEXT NOT NULL,
  first_sample INTEGER NOT NULL, samples INTEGER NOT NULL,   -- samples [first_sample, first_sample + samples)
  seconds REAL NOT NULL,             -- wall time of the rank's passes
  bytes INTEGER NOT NULL,            -- per-sample results it sent to rank 0
  PRIMARY KEY(run_id, rank)) WITHOUT ROWID;
)sql",
        // v9: the quantized GEMM operands of a simulated FP8 pass (issue 30): per module and
        // operand its QuantStats (ampscope/engine/fp8.h) over all batches; other passes have none
        R"sql(
CREATE TABLE fp8_operands(
  pass_id INTEGER NOT NULL REFERENCES passes(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,              -- the pass's order (first GEMM operand seen first)
  module TEXT NOT NULL, op TEXT NOT NULL, operand TEXT NOT NULL,   -- operand: 'input' | 'weight'
  scheme TEXT NOT NULL, element TEXT NOT NULL,                     -- 'tensorwise' ..., 'e4m3' ...
  elements INTEGER NOT NULL, nonfinite INTEGER NOT NULL, nonzero INTEGER NOT NULL,
  underflow INTEGER NOT NULL, subnormal INTEGER NOT NULL, saturated INTEGER NOT NULL,
  nonfinite_out INTEGER NOT NULL,
  amax REAL,                         -- NULL: NaN (an operand holding a NaN)
  scales INTEGER NOT NULL, scale_min REAL, scale_max REAL, tensor_scale REAL,
  sqnr_db REAL, signal REAL, noise REAL,
  PRIMARY KEY(pass_id, seq)) WITHOUT ROWID;
)sql",
        // v10: fp8-delayed training (issue 30): per step the elements its FP8 casts clamped beyond
        // the stale scales' range, and the first tensor that had one; NULL for other precisions
        R"sql(
ALTER TABLE training_steps ADD COLUMN fp8_saturated INTEGER;
ALTER TABLE training_steps ADD COLUMN fp8_saturated_at TEXT;
)sql",
        // v11: an fp8 / fp8-rowwise pass run again with real FP8 GEMMs (torch._scaled_mm) beside
        // its simulated ones (issue 30): at most one row per pass, none when not asked for
        R"sql(
CREATE TABLE fp8_real_gemm(
  pass_id INTEGER PRIMARY KEY REFERENCES passes(id) ON DELETE CASCADE,
  ran INTEGER NOT NULL, reason TEXT NOT NULL, kernel TEXT NOT NULL,
  differing INTEGER NOT NULL,        -- output values differing from the simulated pass's (bitwise)
  max_abs_diff REAL,                 -- max |real - simulated|
  decisions_differ INTEGER NOT NULL, flips INTEGER NOT NULL, seconds REAL NOT NULL,
  outputs BLOB NOT NULL);            -- float32 [samples x num_outputs], as passes.outputs
)sql",
    };
    return m;
}

const std::map<std::string, std::vector<std::string>>& expected_tables() {
    static const std::map<std::string, std::vector<std::string>> t = {
        {"runs",
         {"id", "uuid", "kind", "status", "verdict", "error", "header_json", "started_at", "finished_at",
          "review_status", "reviewed_by", "reviewed_at"}},
        {"samples", {"run_id", "idx", "sample_id", "tag"}},
        {"passes",
         {"id", "run_id", "seq", "precision", "keep_fp32", "num_outputs", "outputs", "nonfinite_json", "origin_json",
          "quality", "seconds"}},
        {"layers", {"id", "pass_id", "idx", "module", "op", "dtype", "shape", "flags", "absmax", "nonfinite", "stats"}},
        {"layer_chunks", {"pass_id", "first_idx", "rows", "data"}},
        {"comparisons", {"id", "run_id", "seq", "precision", "verdict", "max_abs_delta", "max_rel_delta"}},
        {"deltas", {"comparison_id", "sample_idx", "abs", "rel", "finite", "within", "ref_decision", "amp_decision"}},
        {"flips", {"comparison_id", "seq", "sample_idx", "ref", "amp", "ref_margin", "amp_margin"}},
        {"criteria_results", {"comparison_id", "seq", "name", "passed", "detail", "samples_json"}},
        {"annotations", {"id", "run_id", "uuid", "author", "created_at", "target_kind", "target", "text"}},
        {"training_steps", {"run_id", "step"}},
        {"checkpoints", {"id", "run_id", "step", "path"}},
        {"benchmarks", {"id", "uuid", "run_id", "validated", "result_json"}},
        {"token_stats", {"comparison_id", "length", "vocab", "positions", "masked", "mean_kld", "kld"}},
        {"token_boundaries", {"comparison_id", "seq", "sample_idx", "position", "ref_margin"}},
        {"run_ranks", {"run_id", "rank", "host", "device", "first_sample", "samples", "seconds", "bytes"}},
        {"fp8_operands",
         {"pass_id",   "seq",       "module",       "op",        "operand",   "scheme",        "element", "elements",
          "nonfinite", "nonzero",   "underflow",    "subnormal", "saturated", "nonfinite_out", "amax",    "scales",
          "scale_min", "scale_max", "tensor_scale", "sqnr_db",   "signal",    "noise"}},
        {"fp8_real_gemm",
         {"pass_id", "ran", "reason", "kernel", "differing", "max_abs_diff", "decisions_differ", "flips", "seconds",
          "outputs"}},
    };
    return t;
}

}  // namespace ampscope::storage::schema
