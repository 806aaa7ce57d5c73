// SPDX-License-Identifier: MIT
#pragma once
/// \file text.h
/// Text that came from outside (stored runs, imported bundles, probe ids, command-line values)
/// made safe to show: control characters visible instead of acted upon by a terminal, and
/// over-long values shortened when echoed in an error.

#include <cstddef>
#include <string>

namespace ampscope {

/// `s` with every C0 control character (and DEL) written as a visible `\xNN`, every C1 control
/// character (U+0080..U+009F) as `\u00NN`, and every byte that is not part of valid UTF-8 as
/// `\xNN`; other text unchanged. `keep_newline`: '\n' stays a line break (annotations).
std::string visible_controls(const std::string& s, bool keep_newline = false);

/// Whether `s` holds a byte visible_controls would rewrite.
bool has_controls(const std::string& s, bool keep_newline = false);

/// A user-given value echoed in a message: unchanged up to `max` bytes, else its first `max`
/// bytes (on a UTF-8 boundary) followed by "… (N bytes)".
std::string clip_echo(const std::string& s, std::size_t max = 200);

/// JSON text with C1 control characters (U+0080..U+009F, raw in UTF-8 strings) written as
/// \u0080..\u009f escapes: the same JSON value, safe to print on a terminal.
std::string escape_c1_in_json(const std::string& json_text);

/// A figure in a sentence: 4 significant digits ("0.001235", "1.235e+05"); NaN as "nan", never
/// "-nan" (the sign of a NaN means nothing).
std::string short_number(double v);

/// The module-path glob (fnmatch, as --keep-fp32 takes) that matches the module `path` alone: its
/// glob characters * ? [ ] and backslash escaped (a ModuleDict key may hold them).
std::string exact_glob(const std::string& path);

}  // namespace ampscope
