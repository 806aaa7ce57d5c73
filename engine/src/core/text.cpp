// SPDX-License-Identifier: MIT
#include "ampscope/engine/text.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace ampscope {

namespace {

/// Length of the valid UTF-8 sequence starting at s[i] (0 when invalid) and its code point.
size_t utf8_sequence(const std::string& s, size_t i, char32_t& cp) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    if (b < 0x80) {
        cp = b;
        return 1;
    }
    if (b >= 0xC2 && b <= 0xDF) {
        n = 2;
        cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        cp = b & 0x0F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        cp = b & 0x07;
    } else {
        return 0;
    }
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        const auto c = static_cast<unsigned char>(s[i + k]);
        if ((c & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (c & 0x3F);
    }
    const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

std::string hex_escape(const char* prefix, unsigned v) {
    char buf[12];
    std::snprintf(buf, sizeof buf, "%s%02x", prefix, v);
    return buf;
}

}  // namespace

std::string visible_controls(const std::string& s, bool keep_newline) {
    if (!has_controls(s, keep_newline)) return s;
    std::string out;
    out.reserve(s.size() + 16);
    for (size_t i = 0; i < s.size();) {
        char32_t cp = 0;
        const size_t n = utf8_sequence(s, i, cp);
        if (n == 0) {
            out += hex_escape("\\x", static_cast<unsigned char>(s[i]));
            ++i;
            continue;
        }
        if ((cp < 0x20 && !(keep_newline && cp == '\n')) || cp == 0x7F)
            out += hex_escape("\\x", unsigned(cp));
        else if (cp >= 0x80 && cp <= 0x9F)
            out += hex_escape("\\u00", unsigned(cp));
        else
            out.append(s, i, n);
        i += n;
    }
    return out;
}

bool has_controls(const std::string& s, bool keep_newline) {
    for (size_t i = 0; i < s.size();) {
        char32_t cp = 0;
        const size_t n = utf8_sequence(s, i, cp);
        if (n == 0 || (cp < 0x20 && !(keep_newline && cp == '\n')) || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F))
            return true;
        i += n;
    }
    return false;
}

std::string clip_echo(const std::string& s, std::size_t max) {
    if (s.size() <= max) return s;
    size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
    return s.substr(0, cut) + "\u2026 (" + std::to_string(s.size()) + " bytes)";
}

std::string escape_c1_in_json(const std::string& json_text) {
    std::string out;
    out.reserve(json_text.size());
    for (size_t i = 0; i < json_text.size(); ++i) {
        const auto b = static_cast<unsigned char>(json_text[i]);
        const auto next = i + 1 < json_text.size() ? static_cast<unsigned char>(json_text[i + 1]) : 0;
        if (b == 0xC2 && next >= 0x80 && next <= 0x9F) {
            out += hex_escape("\\u00", next);
            ++i;
        } else {
            out += json_text[i];
        }
    }
    return out;
}

std::string short_number(double v) {
    if (std::isnan(v)) return "nan";
    std::ostringstream s;
    s.precision(4);
    s << v;
    return s.str();
}

std::string exact_glob(const std::string& path) {
    std::string g;
    for (char c : path) {
        if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') g += '\\';
        g += c;
    }
    return g;
}

}  // namespace ampscope
