// SPDX-License-Identifier: MIT
#pragma once
// How the GUI turns the engine's and the store's text and numbers into what it shows: one
// function per meaning, used by every room (models, views, charts, dialogs, report).
//   plainText   text the program wrote itself (kinds, precisions, engine messages), as is;
//   storedText  text from a user's files or the database (sample ids, module names, notes):
//               control characters made visible, never acted on;
//   htmlText    stored text for rich text (labels, the report): made visible, then HTML-escaped;
//   numberOrDash a table figure, "-" where there is none (not finite);
//   figure      a measured figure that may be non-finite, NaN and infinities as such.

#include <QString>

#include <string>

namespace ampscope::ui {

/// Text the program wrote itself, as is (UTF-8).
QString plainText(const std::string& s);

/// Stored text: control characters shown (visible_controls), never acted on.
QString storedText(const std::string& s);

/// Stored text for HTML: control characters made visible (visible_controls; `keep_newline`
/// turns line breaks into <br>), then HTML-escaped.
QString htmlText(const std::string& s, bool keep_newline = false);

/// `v` with `digits` significant digits; "-" when it is not finite.
QString numberOrDash(double v, int digits = 3);

/// `v` with `digits` significant digits; NaN and infinities as such ("nan", "inf", "-inf"):
/// an incident's loss or perplexity is one.
QString figure(double v, int digits = 3);

/// An error as the GUI says it: the engine and storage name the field they refuse
/// ("keep_fp32[2]", "batch_size"), not a CLI flag; the GUI says it with the field's label in its
/// dialogs ("Keep in FP32 (region 3): 'x' matches no module ..."). Other errors: their text. As
/// the job signals carried it before: raw (the views make control characters visible).
QString errorText(const std::exception& e);

}  // namespace ampscope::ui
