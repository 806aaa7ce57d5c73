// SPDX-License-Identifier: MIT
// visible_controls, clip_echo, escape_c1_in_json: stored or user-given text shown safely.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ampscope/engine/text.h"

using ampscope::clip_echo;
using ampscope::escape_c1_in_json;
using ampscope::has_controls;
using ampscope::visible_controls;

TEST(VisibleControls, EscapesC0AndDel) {
    EXPECT_EQ(visible_controls("\x1b]0;pwned\a\x1b[2J"), "\\x1b]0;pwned\\x07\\x1b[2J");
    EXPECT_EQ(visible_controls(std::string("a\0b", 3)), "a\\x00b");
    EXPECT_EQ(visible_controls("tab\there\x7f"), "tab\\x09here\\x7f");
    EXPECT_EQ(visible_controls("line\nbreak"), "line\\x0abreak");
    EXPECT_EQ(visible_controls("line\nbreak\r", true), "line\nbreak\\x0d");
}

TEST(VisibleControls, EscapesC1AndInvalidUtf8) {
    EXPECT_EQ(visible_controls("\xc2\x9b"
                               "31m"),
              "\\u009b31m");  // CSI as a UTF-8 code point
    EXPECT_EQ(visible_controls("\x9b"
                               "2J"),
              "\\x9b2J");                                            // an 8-bit CSI byte (not UTF-8)
    EXPECT_EQ(visible_controls("\xe2\x80"), "\\xe2\\x80");           // truncated sequence
    EXPECT_EQ(visible_controls("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
    EXPECT_EQ(visible_controls("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
}

TEST(VisibleControls, LeavesTextAlone) {
    for (const std::string s : {"", "plain ascii", "Grüße, 日本語, emoji \xf0\x9f\x98\x80", "\xc2\xa0nbsp"}) {
        EXPECT_EQ(visible_controls(s), s);
        EXPECT_FALSE(has_controls(s));
    }
    EXPECT_TRUE(has_controls("\x1b"));
    EXPECT_FALSE(has_controls("a\nb", true));
}

TEST(ClipEcho, ShortensLongValues) {
    EXPECT_EQ(clip_echo("short"), "short");
    const std::string big(10 << 20, 'x');
    const auto c = clip_echo(big);
    EXPECT_LT(c.size(), 260u);
    EXPECT_EQ(c.substr(0, 200), big.substr(0, 200));
    EXPECT_NE(c.find("(10485760 bytes)"), std::string::npos) << c;
    const std::string umlauts = std::string(199, 'a') + "\xc3\xbc\xc3\xbc";  // the cut would split a character
    EXPECT_EQ(clip_echo(umlauts).substr(0, 200), std::string(199, 'a') + "\xe2");
}

TEST(EscapeC1InJson, SameValueNoRawC1) {
    const nlohmann::json j = {{"author",
                               "\xc2\x9b"
                               "2J\x1b]0;x\a"},
                              {"ok", "Grüße"}};
    const std::string text = j.dump();
    ASSERT_NE(text.find("\xc2\x9b"), std::string::npos);  // nlohmann leaves C1 raw
    const std::string safe = escape_c1_in_json(text);
    EXPECT_EQ(safe.find("\xc2\x9b"), std::string::npos);
    EXPECT_EQ(safe.find('\x1b'), std::string::npos);
    EXPECT_EQ(nlohmann::json::parse(safe), j);
}
