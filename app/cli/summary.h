// SPDX-License-Identifier: MIT
#pragma once
// Readable terminal summaries for ampscope-cli.

#include <cstddef>
#include <ostream>
#include <string>

#include "ampscope/engine/run.h"
#include "ampscope/engine/train.h"

namespace ampscope::cli {

/// Stored or model-given text, its control characters made visible (no terminal escapes).
std::string safe(const std::string& s);
/// A table cell: safe(s), cut to `w` columns (its last one "~" when cut) or padded with spaces.
std::string pad(std::string s, size_t w);

/// Per precision: verdict, criteria table, worst samples, flips, origin.
void print_run_summary(std::ostream& os, const RunResult& r, bool layers, bool color);

/// The per-layer table of one pass: module, op, dtype, absmax, headroom to the format's
/// max in powers of two, overflow/underflow counts; origins marked.
void print_layers(std::ostream& os, const PassResult& p, bool color);

void print_backend(std::ostream& os, const BackendReport& b);

void print_ops(std::ostream& os, const OpsReport& r);

/// Iterations vs effective updates, skipped steps and when, scale trajectory, final losses.
void print_train(std::ostream& os, const TrainResult& r, bool color);

}  // namespace ampscope::cli
