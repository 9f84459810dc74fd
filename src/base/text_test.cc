#include "base/text.h"

#include <gtest/gtest.h>

namespace codebox::base {
namespace {

TEST(TerminalSafeTest, KeepsPrintableTextNewlinesTabsAndUtf8) {
  EXPECT_EQ(TerminalSafe("hello\tworld\n"), "hello\tworld\n");
  EXPECT_EQ(TerminalSafe("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x93\x88"),
            "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x93\x88");
}

TEST(TerminalSafeTest, EscapesControlsAnsiAndC1) {
  // ESC ] 0 ; title BEL: sets the terminal title; ESC [ 2 J clears the screen.
  EXPECT_EQ(TerminalSafe("\x1b]0;pwned\x07\x1b[2J"), "\\x1b]0;pwned\\x07\\x1b[2J");
  EXPECT_EQ(TerminalSafe("a\rb\x7f"), "a\\x0db\\x7f");
  EXPECT_EQ(TerminalSafe("\xc2\x9b"
                         "31m"),
            "\\xc2\\x9b31m");  // C1 CSI in UTF-8
  EXPECT_EQ(TerminalSafe(std::string("nul\0byte", 8)), "nul\\x00byte");
}

TEST(TerminalSafeTest, EscapesInvalidUtf8) {
  EXPECT_EQ(TerminalSafe("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(TerminalSafe("\xc3"), "\\xc3");                    // truncated sequence
  EXPECT_EQ(TerminalSafe("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(TerminalSafe("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // surrogate
}

TEST(TerminalSafeTest, CutsAtTheLimitAndSaysHowMuch) {
  EXPECT_EQ(TerminalSafe(std::string(10, 'a'), 4), "aaaa...[6 bytes cut]");
}

TEST(TailLinesTest, KeepsTheLastLinesWithoutTrailingNewlines) {
  EXPECT_EQ(TailLines("a\nb\nc\n", 2), "b\nc");
  EXPECT_EQ(TailLines("a\nb", 5), "a\nb");
  EXPECT_EQ(TailLines("", 3), "");
}

TEST(AsciiLowerTest, LowersAsciiLettersOnly) {
  EXPECT_EQ(AsciiLower("Content-Type: Application/JSON"), "content-type: application/json");
  EXPECT_EQ(AsciiLower("[::1]:80 \xc3\x89"), "[::1]:80 \xc3\x89");  // bytes past ASCII stay
  EXPECT_EQ(AsciiLower(""), "");
}

TEST(FormatSizeTest, PicksTheUnit) {
  EXPECT_EQ(FormatSize(512), "512 B");
  EXPECT_EQ(FormatSize(3 * 1024), "3 KiB");
  EXPECT_EQ(FormatSize(163ull << 20), "163 MiB");
  EXPECT_EQ(FormatSize((12ull << 30) / 10), "1.2 GiB");
}

TEST(IsValidUtf8Test, TellsTextFromBytes) {
  EXPECT_TRUE(IsValidUtf8("plain \xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_TRUE(IsValidUtf8("\xc2\x85"));  // a C1 control is still UTF-8
  EXPECT_TRUE(IsValidUtf8(std::string("nul \0 inside", 13)));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("cut \xe2\x82"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));           // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));       // a surrogate
  EXPECT_FALSE(IsValidUtf8("\x89PNG\r\n\x1a\n"));  // binary
}

TEST(ParseDecimalTest, DigitsOnlyAndNeverPastTheMost) {
  EXPECT_EQ(ParseDecimal("0", 10), 0u);
  EXPECT_EQ(ParseDecimal("1000", 1000), 1000u);
  EXPECT_EQ(ParseDecimal("0012", 100), 12u);
  EXPECT_EQ(ParseDecimal("18446744073709551615", UINT64_MAX), UINT64_MAX);
  for (const char* bad : {"", "1001", "-1", "+1", " 1", "1 ", "0x10", "1e3", "1.0",
                          "18446744073709551616", "99999999999999999999999"}) {
    EXPECT_EQ(ParseDecimal(bad, 1000), std::nullopt) << bad;
  }
  EXPECT_EQ(ParseDecimal("18446744073709551616", UINT64_MAX), std::nullopt);
}

TEST(IsUserNameTest, TakesWhatUseraddTakes) {
  for (const char* good : {"user", "root", "_apt", "app-1", "a"}) EXPECT_TRUE(IsUserName(good));
  for (const char* bad : {"", "User", "1user", "-x", "a b", "a:b", "../x", "a\n"}) {
    EXPECT_FALSE(IsUserName(bad)) << bad;
  }
  EXPECT_FALSE(IsUserName(std::string(33, 'a')));
}

TEST(ClosestWordTest, SuggestsOnlyNearWords) {
  const std::vector<std::string_view> commands = {"run", "exec", "repl", "image", "doctor"};
  EXPECT_EQ(ClosestWord("rnu", commands), "run");  // a transposition is one slip
  EXPECT_EQ(ClosestWord("exce", commands), "exec");
  EXPECT_EQ(ClosestWord("doctr", commands), "doctor");
  EXPECT_EQ(ClosestWord("kubernetes", commands), "");
  EXPECT_EQ(ClosestWord("x", {}), "");
  EXPECT_EQ(EditDistance("memroy", "memory"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
}

}  // namespace
}  // namespace codebox::base
