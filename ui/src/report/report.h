// SPDX-License-Identifier: MIT
#pragma once
// Self-contained HTML report of a run (charts embedded as PNG data URIs) and CSV of tables.

#include <QString>

#include "ampscope/storage/store.h"

class QAbstractItemModel;
class QTextStream;

namespace ampscope::ui {

/// The run overview as HTML (used by the Overview tab and the report).
QString overviewHtml(const RunResult& run, const QString& status, const storage::Review& review,
                     const std::vector<storage::Annotation>& notes,
                     const std::vector<storage::Store::BenchmarkRow>& benchmarks = {});

/// Writes a self-contained HTML report with the run's charts rendered at 1000x560.
QString writeReport(const RunResult& run, const QString& status, const storage::Review& review,
                    const std::vector<storage::Annotation>& notes, const QString& path);

/// Two comparison runs side by side: inputs, verdicts and per precision what differs.
QString compareHtml(const RunResult& a, const RunResult& b);

/// Sequence runs (report_tokens.cpp): a comparison of the run is per position; the
/// per-position criteria (a line of the overview's criteria); a comparison's per-token figures.
bool isSequenceRun(const RunResult& run);
QString sequenceCriteriaHtml(const Criteria& criteria);
void tokensHtml(QTextStream& o, const Comparison& comparison);

/// Writes a table model as CSV (display text, header row first).
QString writeCsv(const QAbstractItemModel* model, const QString& path);

}  // namespace ampscope::ui
