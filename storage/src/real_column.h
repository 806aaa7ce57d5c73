// SPDX-License-Identifier: MIT
#pragma once
// Figures that may be non-finite in REAL columns (storage-internal). SQLite keeps +inf and -inf
// as REAL values but stores a NaN double as NULL, so:
// - a column that is always written (a token cross-entropy, a training step's loss) reads NULL
//   as NaN: it can only be a NaN SQLite made NULL, also in files of earlier builds;
// - a column where NULL means "none" (a pass's quality: not evaluated) holds NaN as the text
//   'nan', the string the run JSON writes for it.

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "sqlite.h"

namespace ampscope::storage::real {

/// An always-written figure: NULL is NaN.
inline double figure(const sql::Stmt& s, int c) {
    return s.is_null(c) ? std::numeric_limits<double>::quiet_NaN() : s.f64(c);
}

/// Binds an optional figure: none as NULL, NaN as the text 'nan', anything else as a REAL.
inline void bind_optional(sql::Stmt& s, int i, const std::optional<double>& v) {
    if (!v)
        s.bind_null(i);
    else if (std::isnan(*v))
        s.bind(i, "nan");
    else
        s.bind(i, *v);
}

/// Reads what bind_optional wrote; `where` names the column for a text that is not a figure.
inline std::optional<double> optional(const sql::Stmt& s, int c, const std::string& where) {
    if (s.is_null(c)) return std::nullopt;
    if (s.type(c) != SQLITE_TEXT) return s.f64(c);
    const auto t = s.text(c);
    if (t == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (t == "inf" || t == "-inf") return t == "inf" ? INFINITY : -INFINITY;
    throw StoreError(where + " holds a text that is not a figure; expected a number, NULL or 'nan'");
}

}  // namespace ampscope::storage::real
