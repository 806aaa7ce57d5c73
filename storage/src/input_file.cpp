// SPDX-License-Identifier: MIT
#include "ampscope/storage/input_file.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ampscope/engine/advise.h"
#include "ampscope/engine/errors.h"
#include "ampscope/engine/text.h"

namespace ampscope::storage {

std::string read_small_file(const std::string& path, const std::string& what, std::size_t max_bytes) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
        throw InputError(path, what, std::string("cannot open file for reading: ") + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) throw InputError(path, what, "a directory; expected a file");
    if (!S_ISREG(st.st_mode))
        throw InputError(path, what,
                         std::string(S_ISFIFO(st.st_mode)                         ? "a FIFO"
                                     : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                                  : "a socket") +
                             ", not a regular file; expected a file");
    const auto limit = std::to_string(max_bytes >> 20) + " MB";
    if (uintmax_t(st.st_size) > max_bytes)
        throw InputError(
            path, what,
            "larger than " + limit + " (" + std::to_string(st.st_size) + " bytes); expected a small text file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, what, "cannot open file for reading");
    std::string text(max_bytes + 1, '\0');
    in.read(text.data(),
            std::streamsize(text.size()));  // a file that grows (or lies about its size, /proc) is cut here
    text.resize(std::size_t(in.gcount()));
    if (text.size() > max_bytes) throw InputError(path, what, "larger than " + limit + "; expected a small text file");
    return text;
}

namespace {

const char* const kExpected =
    "expected a text file with one module-path glob a line, or the JSON that ampscope-cli advise --json "
    "(or the GUI's Advise…) writes";

/// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(const std::string& s) {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
        for (std::size_t k = 1; k < n; ++k) {
            const auto d = static_cast<unsigned char>(s[i + k]);
            if ((d >> 6) != 0x2) return false;
            cp = (cp << 6) | (d & 0x3F);
        }
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += n;
    }
    return true;
}

/// An advise JSON's "outcome" and "kept_in", where present: one of the words advise writes (a
/// wrong type or an unknown word is no advice ampscope wrote, and never taken for 'found').
void check_advice_words(const std::string& path, const nlohmann::json& j) {
    using O = AdviseResult::Outcome;
    std::vector<std::string> outcomes;  // the names advise writes (to_string)
    for (const auto o :
         {O::Found, O::AlreadyAccepted, O::Unverified, O::InvalidReference, O::Fp32CannotPass, O::WholeModelOnly})
        outcomes.push_back(to_string(o));
    const auto word = [&](const char* field, const std::vector<std::string>& words) {
        if (!j.contains(field) || j[field].is_null()) return;
        std::string listed;
        for (const auto& w : words) listed += (listed.empty() ? "'" : ", '") + w + "'";
        const auto& v = j[field];
        if (!v.is_string() || std::find(words.begin(), words.end(), v.get<std::string>()) == words.end())
            throw InputError(path, field,
                             (v.is_string() ? "'" + visible_controls(clip_echo(v.get<std::string>(), 40)) + "'"
                                            : clip_echo(v.dump(), 40)) +
                                 "; expected one of " + listed + " (as ampscope-cli advise writes it)");
    };
    word("outcome", outcomes);
    word("kept_in", {"fp32", "bf16"});
}

std::vector<std::string> regions_of_json(const std::string& path, const std::string& text, bool allow_unverified,
                                         RegionsList list) {
    const bool bf16 = list == RegionsList::KeepBf16;
    const std::string key = bf16 ? "keep_bf16" : "keep_fp32";
    const std::string expected = "expected a JSON object with a \"" + key +
                                 "\" list of module paths (as ampscope-cli advise" +
                                 (bf16 ? " --precision fp8 (or another FP8 recipe)" : "") + " writes)";
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw InputError(path, key, "not valid JSON (at byte " + std::to_string(e.byte) + "); " + expected);
    }
    if (!bf16 && j.is_object() && j.contains("keep_bf16"))
        throw InputError(path, "keep_bf16",
                         "the advice of an FP8 recipe: its modules stay in BF16 out of FP8 (keep_bf16), not in FP32; "
                         "expected an fp16/bf16 advice's FP32 set (give an FP8 advice's modules to keep_bf16)");
    if (bf16 && j.is_object() && !j.contains("keep_bf16") && j.contains("keep_fp32"))
        throw InputError(
            path, "keep_fp32",
            "the advice of fp16/bf16 passes: its modules stay in FP32 (keep_fp32), not in BF16 out of FP8; "
            "expected an FP8 recipe's advice (keep_bf16), or give these modules to keep_fp32");
    if (!j.is_object() || !j.contains(key) || !j[key].is_array()) throw InputError(path, key, expected);
    check_advice_words(path, j);
    if (j.contains("kept_in") && j["kept_in"].is_string() && j["kept_in"] != (bf16 ? "bf16" : "fp32"))
        throw InputError(path, "kept_in",
                         "'" + j["kept_in"].get<std::string>() + "': " +
                             (bf16 ? "the set of fp16/bf16 passes, kept in FP32, not in BF16 out of FP8; expected an "
                                     "FP8 recipe's advice (kept_in 'bf16'), or give it to --keep-fp32-file"
                                   : "an FP8 recipe's set, kept in BF16 out of FP8, not in FP32; expected an fp16/bf16 "
                                     "advice (kept_in 'fp32'), or give it to --keep-bf16-file"));
    // the outcomes that advise no set: no list of modules to keep
    for (const char* none : {"invalid_reference", "fp32_cannot_pass", "whole_model_only"})
        if (j.contains("outcome") && j["outcome"] == none)
            throw InputError(path, "outcome",
                             std::string("'") + none +
                                 "': no set short of the whole model was advised, so the file is no list of modules "
                                 "to keep; expected an advise JSON of outcome 'found'");
    if (j.contains("outcome") && j["outcome"] == "unverified" && !allow_unverified)
        throw InputError(
            path, "outcome",
            "'unverified': the advised set's verifying run was rejected, so the set is not advice; expected a "
            "verified advise JSON (outcome 'found'), or --allow-unverified (ampscope-cli run, train, replay) to use "
            "the set anyway");
    std::vector<std::string> out;
    for (const auto& m : j[key]) {
        if (!m.is_string() || m.get<std::string>().empty())
            throw InputError(path, key, "expected non-empty module-path strings, found " + m.dump());
        out.push_back(exact_glob(m.get<std::string>()));  // advise's module paths, each matching itself alone
    }
    return out;
}

}  // namespace

std::vector<std::string> read_regions_file(const std::string& path, const std::string& what, bool allow_unverified,
                                           RegionsList list) {
    std::string text = read_small_file(path, what);
    if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // a UTF-8 byte-order mark (Windows editors)
    for (const unsigned char c : text)
        if (c == 0 || (c < 0x20 && c != '\n' && c != '\r' && c != '\t'))
            throw InputError(path, what, std::string("not text: binary content (control bytes); ") + kExpected);
    if (!valid_utf8(text)) throw InputError(path, what, std::string("not UTF-8 text; ") + kExpected);
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && (text[first] == '{' || text[first] == '['))
        return regions_of_json(path, text, allow_unverified, list);
    std::vector<std::string> out;
    std::istringstream lines(text);
    int n = 0;
    for (std::string line; std::getline(lines, line);) {
        ++n;
        if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        const auto b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
        if (b == std::string::npos) continue;
        const std::string glob = line.substr(b, e - b + 1);
        if (glob.find_first_of(" \t,") != std::string::npos)
            throw InputError(
                path, "line " + std::to_string(n),
                "expected one module-path glob a line (no spaces or commas), found '" + clip_echo(glob) + "'");
        out.push_back(glob);
    }
    if (out.empty())
        throw InputError(path, what,
                         std::string(list == RegionsList::KeepBf16 ? "no module glob in the file; "
                                                                   : "no FP32 region in the file; ") +
                             kExpected);
    return out;
}

}  // namespace ampscope::storage
