// SPDX-License-Identifier: MIT
#include "report.h"

#include <QAbstractItemModel>
#include <QBuffer>
#include <QChart>
#include <QChartView>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPixmap>
#include <QTextStream>

#include <memory>

#include "charts.h"
#include "layermodel.h"
#include "samplemodel.h"
#include "uitext.h"

namespace ampscope::ui {

namespace {

/// The benchmarks validated by the run: one table of figures each.
void benchmarksHtml(QTextStream& o, const std::vector<storage::Store::BenchmarkRow>& benchmarks) {
    o << "<h3>Measured gains (validated by this run)</h3>";
    for (const auto& b : benchmarks) {
        o << "<p><small>" << htmlText(b.created_at.substr(0, 19)) << ", batch " << b.result.batch << ", "
          << htmlText(b.result.timer) << "</small></p><table border=1 cellspacing=0 cellpadding=3>"
          << "<tr><th>pass</th><th>median ms</th><th>p10–p90 ms</th><th>speed-up</th><th>peak "
             "MiB</th><th>memory</th></tr>";
        for (const auto& f : b.result.figures) {
            o << "<tr><td>" << htmlText(to_string(f.precision)) << "</td><td>" << figure(f.median_ms, 4) << "</td><td>"
              << figure(f.p10_ms, 4) << "–" << figure(f.p90_ms, 4) << "</td><td>" << figure(f.speedup, 4)
              << "×</td><td>" << figure(double(f.peak_bytes) / 1048576.0, 4) << "</td><td>" << figure(f.memory_ratio, 4)
              << "×</td></tr>";
        }
        o << "</table>";
    }
}
}  // namespace

namespace {

/// Each pass: its non-finite samples, quality, time and where NaN/Inf was born.
void passesHtml(QTextStream& o, const RunResult& r) {
    for (const auto& p : r.passes) {
        o << "<h3>Pass " << htmlText(to_string(p.precision)) << "</h3><p>" << p.nonfinite_samples.size()
          << " non-finite samples";
        if (p.quality) o << ", quality " << figure(*p.quality, 4);
        o << ", " << figure(p.seconds, 4) << " s</p>";
        if (p.origin)
            o << "<p style='color:#c82828'>NaN/Inf born at <b>" << htmlText(p.origin->stage) << "</b> op #"
              << p.origin->index << " <b>" << htmlText(p.origin->op) << "</b> in module <b>"
              << htmlText(p.origin->module.empty() ? "(root)" : p.origin->module) << "</b> for "
              << p.origin->samples.size() << " samples</p>";
        if (const auto& g = p.real_gemm) {  // said plainly: the pass is simulated, these GEMMs real
            o << "<p>This pass is <b>simulated</b>: its GEMMs are FP32 products of the FP8 operands (torchao's "
                 "emulate=True).<br>";
            if (!g->ran)
                o << "Real FP8 GEMMs: not run: " << htmlText(g->reason) << "</p>";
            else
                o << "<b>Real FP8 GEMMs</b> (" << htmlText(g->kernel) << ", " << figure(g->seconds, 4)
                  << " s): " << g->differing << " of " << p.outputs.size()
                  << " scores differ from the simulated pass (max |diff| " << figure(g->max_abs_diff, 4) << "), "
                  << g->decisions_differ << " decisions differ; " << g->flips << " flips against FP32</p>";
        }
    }
}

/// The spec's precision policy beyond the passes: FP32 regions, the FP8 passes' BF16 list, fp8-delayed's settings.
void policyRowsHtml(QTextStream& o, const RunSpec& spec) {
    const auto globs = [&o](const char* label, const std::vector<std::string>& list) {
        if (list.empty()) return;
        o << "<tr><td>" << label << "</td><td>";
        for (const auto& k : list) o << htmlText(k) << " ";
        o << "</td></tr>";
    };
    globs("FP32 regions", spec.keep_fp32);
    globs("Kept in BF16 (FP8 passes)", spec.keep_bf16);
    if (spec.fp8_all_gemms)
        o << "<tr><td>FP8 GEMMs</td><td>every matrix product (addmm, mm, bmm, baddbmm; convolutions in fp8 and "
             "fp8-delayed), not only linear layers</td></tr>";
    if (spec.has_pass(Precision::Fp8Delayed))
        o << "<tr><td>fp8-delayed</td><td>amax history " << spec.fp8_amax_history << " batches, margin "
          << spec.fp8_margin << "</td></tr>";
}

}  // namespace

QString overviewHtml(const RunResult& r, const QString& status, const storage::Review& review,
                     const std::vector<storage::Annotation>& notes,
                     const std::vector<storage::Store::BenchmarkRow>& benchmarks) {
    QString h;
    QTextStream o(&h);
    const auto verdictColor = [](Verdict v) { return v == Verdict::Accepted ? "#1e8c3c" : "#c82828"; };
    o << "<h2>Run " << htmlText(r.run_id.substr(0, 8)) << " — <span style='color:" << verdictColor(r.verdict) << "'>"
      << htmlText(to_string(r.verdict)) << "</span></h2>";
    o << "<p>status <b>" << status.toHtmlEscaped() << "</b> · review <b>" << htmlText(to_string(review.status))
      << "</b>"
      << (review.by.empty()
              ? QString()
              : QString(QStringLiteral(" by ") + htmlText(review.by) + QStringLiteral(" at ") + htmlText(review.at)))
      << "</p>";
    o << "<table cellpadding=3>"
      << "<tr><td>model</td><td>" << htmlText(r.model.source) << " (" << htmlText(r.model.kind) << ", "
      << r.model.parameters << " parameters, " << htmlText(r.model.mode) << ")<br><small>sha256 "
      << htmlText(r.model.sha256) << "<br>weights " << htmlText(r.model.weights_sha256) << "</small></td></tr>"
      << "<tr><td>probes</td><td>" << htmlText(r.probes.source) << ", " << r.probes.count << " samples (";
    bool first = true;
    for (const auto& [t, n] : r.probes.tags) {
        o << (first ? "" : ", ") << n << " " << htmlText(t);
        first = false;
    }
    o << ")<br><small>sha256 " << htmlText(r.probes.sha256) << "</small></td></tr>"
      << "<tr><td>backend</td><td>" << htmlText(r.backend.device) << " (" << htmlText(r.backend.kind) << "), "
      << htmlText(r.backend.name) << ", torch " << htmlText(r.backend.torch_version)
      << (r.backend.cuda_version.empty() ? QString()
                                         : QString(QStringLiteral(", CUDA ") + htmlText(r.backend.cuda_version)))
      << ", bf16 " << (r.backend.bf16_supported ? "yes" : "no") << "</td></tr>"
      << "<tr><td>criteria</td><td>fixed at " << htmlText(r.criteria.fixed_at) << " (locked)<br>|amp−ref| ≤ "
      << figure(r.criteria.atol, 4) << " + " << figure(r.criteria.rtol, 4) << "·|ref|; ties within "
      << figure(r.criteria.tie_tolerance, 4) << " → " << htmlText(to_string(r.criteria.tie_rule)) << "; flips allowed "
      << r.criteria.max_flips << "; quality " << htmlText(to_string(r.criteria.quality_metric))
      << (r.criteria.quality_threshold_set
              ? QString(QStringLiteral(" threshold ") + figure(r.criteria.quality_threshold, 4))
              : QStringLiteral(", no threshold set"))
      << (r.criteria.allow_nonfinite ? "; non-finite allowed" : "")
      << (isSequenceRun(r) ? sequenceCriteriaHtml(r.criteria) : QString()) << "</td></tr>";
    policyRowsHtml(o, r.spec);
    o << "</table>";
    passesHtml(o, r);
    if (r.verdict == Verdict::InvalidReference)
        o << "<p style='color:#c82828'><b>The FP32 reference is not finite</b>: it is not trusted and AMP passes were "
             "not compared.</p>";
    for (const auto& c : r.comparisons) {
        o << "<h3>" << htmlText(to_string(c.precision)) << " vs fp32: <span style='color:" << verdictColor(c.verdict)
          << "'>" << htmlText(to_string(c.verdict)) << "</span></h3><table border=1 cellspacing=0 cellpadding=3>";
        for (const auto& k : c.criteria) {
            o << "<tr><td>"
              << (k.passed ? "<span style='color:#1e8c3c'>pass</span>" : "<span style='color:#c82828'>FAIL</span>")
              << "</td><td>" << htmlText(k.name) << "</td><td>" << htmlText(k.detail);
            if (!k.passed && !k.samples.empty()) {
                o << "<br><small>";
                for (size_t i = 0; i < std::min<size_t>(12, k.samples.size()); ++i) o << htmlText(k.samples[i]) << " ";
                if (k.samples.size() > 12) o << "…";
                o << "</small>";
            }
            o << "</td></tr>";
        }
        o << "</table>";
        tokensHtml(o, c);
    }
    if (!benchmarks.empty()) benchmarksHtml(o, benchmarks);
    if (!notes.empty()) {
        o << "<h3>Annotations</h3><ul>";
        for (const auto& a : notes)
            o << "<li><small>" << htmlText(a.created_at.substr(0, 19)) << " " << htmlText(a.author) << " on "
              << htmlText(a.target_kind) << " " << htmlText(a.target) << "</small><br>"
              << htmlText(a.text, /*keep_newline=*/true) << "</li>";
        o << "</ul>";
    }
    for (const auto& w : r.warnings) o << "<p><i>" << htmlText(w) << "</i></p>";
    return h;
}

QString writeReport(const RunResult& r, const QString& status, const storage::Review& review,
                    const std::vector<storage::Annotation>& notes, const QString& path) {
    auto png = [](QChart* chart) {
        QChartView view(chart);
        view.resize(1000, 560);
        view.setRenderHint(QPainter::Antialiasing);
        QByteArray bytes;
        QBuffer buf(&bytes);
        buf.open(QIODevice::WriteOnly);
        view.grab().save(&buf, "PNG");
        return QStringLiteral("<img src='data:image/png;base64,%1'/>").arg(QString::fromLatin1(bytes.toBase64()));
    };
    QString html = QStringLiteral(
                       "<!DOCTYPE html><html><head><meta charset='utf-8'><title>ampscope run %1</title>"
                       "<style>body{font-family:sans-serif;max-width:1040px;margin:auto} img{max-width:100%}</style>"
                       "</head><body>")
                       .arg(htmlText(r.run_id));
    html += overviewHtml(r, status, review, notes);
    SampleModel samples;  // outlives the chart, which png() deletes with its view
    samples.resetData(r);
    html += QStringLiteral("<h2>Score deltas</h2>") + png(makeDeltaChart(&samples)) + png(makeDeltaHistogram(&samples));
    html += QStringLiteral("<h2>Decision flips</h2>") + png(makeFlipChart(&samples));
    for (const auto& p : r.passes) {
        if (p.layers.empty()) continue;
        LayerModel layers;  // outlives the chart, which png() deletes with its view
        layers.resetData(p);
        html += QStringLiteral("<h2>Layers, %1 pass</h2>").arg(QString::fromStdString(to_string(p.precision))) +
                png(makeLayerChart(&layers));
    }
    html += QStringLiteral("</body></html>");
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) return QStringLiteral("cannot write %1").arg(path);
    f.write(html.toUtf8());
    return {};
}

QString writeCsv(const QAbstractItemModel* m, const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) return QStringLiteral("cannot write %1").arg(path);
    QTextStream o(&f);
    auto cell = [](QString s) {
        if (s.contains(QLatin1Char(',')) || s.contains(QLatin1Char('"')) || s.contains(QLatin1Char('\n')))
            s = QLatin1Char('"') + s.replace(QStringLiteral("\""), QStringLiteral("\"\"")) + QLatin1Char('"');
        return s;
    };
    for (int c = 0; c < m->columnCount(); ++c) o << (c ? "," : "") << cell(m->headerData(c, Qt::Horizontal).toString());
    o << "\n";
    for (int r = 0; r < m->rowCount(); ++r) {
        for (int c = 0; c < m->columnCount(); ++c) o << (c ? "," : "") << cell(m->index(r, c).data().toString());
        o << "\n";
    }
    return {};
}

}  // namespace ampscope::ui
