// SPDX-License-Identifier: MIT
// Probe and training files in CSV (libcsv, strict): a header naming the columns, one sample a row.
#include "probes/probe_csv.h"

#include <ATen/ATen.h>

#include <csv.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ampscope/engine/errors.h"
#include "ampscope/engine/files.h"
#include "ampscope/engine/hash.h"

namespace ampscope::detail {

namespace {

struct CsvRows {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> cur;
};

/// The CSV text after a UTF-8 byte-order mark; UTF-16/32 files (BOM or NUL bytes) refused.
std::string_view csv_text(const std::vector<char>& bytes, const std::string& path) {
    std::string_view text(bytes.data(), bytes.size());
    auto starts = [&](std::string_view p) { return text.substr(0, p.size()) == p; };
    if (starts("\xFF\xFE") || starts("\xFE\xFF") || text.find('\0') != std::string_view::npos)
        throw InputError(path, "", "is not UTF-8 text (UTF-16 or binary: it holds NUL bytes); save the CSV as UTF-8");
    if (starts("\xEF\xBB\xBF")) text.remove_prefix(3);
    return text;
}

/// The rows of a CSV text (libcsv, strict); InputError when malformed.
CsvRows parse_csv(std::string_view bytes, const std::string& path) {
    csv_parser p;
    csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL);
    CsvRows r;
    auto on_field = [](void* s, size_t len, void* data) {
        static_cast<CsvRows*>(data)->cur.emplace_back(static_cast<const char*>(s), len);
    };
    auto on_row = [](int, void* data) {
        auto* rr = static_cast<CsvRows*>(data);
        rr->rows.push_back(std::move(rr->cur));
        rr->cur.clear();
    };
    if (csv_parse(&p, bytes.data(), bytes.size(), on_field, on_row, &r) != bytes.size() ||
        csv_fini(&p, on_field, on_row, &r) != 0) {
        const std::string err = csv_strerror(csv_error(&p));
        csv_free(&p);
        throw InputError(path, "", "malformed CSV: " + err);
    }
    csv_free(&p);
    return r;
}

}  // namespace

ProbeSet load_csv(const std::string& path) {
    const auto file_bytes = read_regular_file(path, "", "a .pt or .csv file");
    const std::string_view bytes = csv_text(file_bytes, path);
    const CsvRows r = parse_csv(bytes, path);
    if (r.rows.empty()) throw InputError(path, "header", "missing; expected a header row naming the columns");
    const auto header = r.rows.front();
    int id_col = -1, tag_col = -1, label_col = -1;
    std::vector<int> target_cols, feature_cols;
    for (int c = 0; c < int(header.size()); ++c) {
        const auto& h = header[size_t(c)];
        if (h == "id")
            id_col = c;
        else if (h == "tag")
            tag_col = c;
        else if (h == "label")
            label_col = c;
        else if (h == "target" || h.rfind("target_", 0) == 0)
            target_cols.push_back(c);
        else
            feature_cols.push_back(c);
    }
    if (feature_cols.empty())
        throw InputError(path, "header", "no feature columns; expected numeric columns besides id, tag, label, target");
    const int64_t n = int64_t(r.rows.size()) - 1;
    if (n == 0) throw InputError(path, "rows", "empty probe set; expected at least one data row after the header");
    ProbeSet ps;
    auto x = at::empty({n, int64_t(feature_cols.size())}, at::kFloat);
    auto* xp = x.data_ptr<float>();
    auto number = [&](const std::string& s, int64_t row, int col) {
        const char* b = s.c_str();
        char* e = nullptr;
        const double v = std::strtod(b, &e);
        while (e && (*e == ' ' || *e == '\t' || *e == '\r')) ++e;
        if (s.empty() || e == b || *e != '\0')
            throw InputError(path, "row " + std::to_string(row + 2) + ", column '" + header[size_t(col)] + "'",
                             "'" + s + "' is not a number");
        return v;
    };
    for (int64_t i = 0; i < n; ++i) {
        const auto& row = r.rows[size_t(i + 1)];
        if (row.size() != header.size())
            throw InputError(
                path, "row " + std::to_string(i + 2),
                "has " + std::to_string(row.size()) + " fields; expected " + std::to_string(header.size()));
        for (size_t j = 0; j < feature_cols.size(); ++j)
            xp[i * int64_t(feature_cols.size()) + int64_t(j)] =
                float(number(row[size_t(feature_cols[j])], i, feature_cols[j]));
        if (label_col >= 0) {
            const double l = number(row[size_t(label_col)], i, label_col);
            if (l != std::floor(l) || l < 0 || l > double(1 << 30))
                throw InputError(
                    path, "row " + std::to_string(i + 2) + ", column 'label'",
                    "'" + row[size_t(label_col)] + "' is not a class index; expected an integer in [0, 2^30]");
            ps.labels.push_back(int64_t(l));
        }
        for (int c : target_cols) ps.targets.push_back(float(number(row[size_t(c)], i, c)));
        ps.samples.push_back({id_col >= 0 ? row[size_t(id_col)] : std::to_string(i),
                              tag_col >= 0 && !row[size_t(tag_col)].empty() ? row[size_t(tag_col)] : "ordinary"});
    }
    ps.target_width = int(target_cols.size());
    ps.inputs.push_back(x);
    Sha256 h;
    h.update(file_bytes.data(), file_bytes.size());
    ps.info.sha256 = h.hex();
    return ps;
}

}  // namespace ampscope::detail
