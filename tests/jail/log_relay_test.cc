// The supervisor's relay of the agent's stderr (box-controlled bytes) to the caller's stderr.
#include "jail/log_relay.h"

#include <gtest/gtest.h>

#include <string>

namespace codebox::jail {
namespace {

// Everything the relay writes for `chunks` fed one after another, then EOF.
std::string Relay(const std::vector<std::string>& chunks, size_t max_total = 1 << 20) {
  LogRelay relay(max_total);
  std::string out;
  for (const std::string& c : chunks) out += relay.Feed(c);
  return out + relay.Finish();
}

bool HasControlBytes(const std::string& s) {
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return true;
  }
  return s.find("\xc2\x9b") != std::string::npos;  // C1 CSI
}

TEST(LogRelay, PassesPlainLinesUnchanged) {
  EXPECT_EQ(Relay({"codebox-agent: hello\n", "second line\n"}),
            "codebox-agent: hello\nsecond line\n");
  EXPECT_EQ(Relay({"no newline at EOF"}), "no newline at EOF\n");
  EXPECT_EQ(Relay({"caf\xc3\xa9 \xe2\x9c\x93\n"}), "caf\xc3\xa9 \xe2\x9c\x93\n");
}

TEST(LogRelay, EscapesTerminalControls) {
  // Clear screen, set the window title, hide text, move the cursor.
  std::string out = Relay({"a\x1b[2J\x1b]0;pwned\x07 b\x1b[8m c\r\x08 d\n"});
  EXPECT_FALSE(HasControlBytes(out)) << out;
  EXPECT_EQ(out, "a\\x1b[2J\\x1b]0;pwned\\x07 b\\x1b[8m c\\x0d\\x08 d\n");
}

TEST(LogRelay, JudgesSequencesSplitAcrossReadsWhole) {
  // A valid UTF-8 character split across reads stays one character...
  EXPECT_EQ(Relay({"caf\xc3", "\xa9\n"}), "caf\xc3\xa9\n");
  // ...and a C1 CSI (U+009B, C2 9B) split the same way is still escaped, not passed on.
  std::string out = Relay({"x\xc2", "\x9b" "2J\n"});
  EXPECT_FALSE(HasControlBytes(out)) << out;
  EXPECT_EQ(out, "x\\xc2\\x9b2J\n");
  // Byte by byte: the same result as in one piece.
  std::string evil = "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ \xc2\x9b" "31m\n";
  std::vector<std::string> bytes;
  for (char c : evil) bytes.emplace_back(1, c);
  EXPECT_EQ(Relay(bytes), Relay({evil}));
  EXPECT_FALSE(HasControlBytes(Relay(bytes)));
}

TEST(LogRelay, BoundsLineLengthAndTotal) {
  std::string long_line(3 * LogRelay::kMaxLine, 'x');
  std::string out = Relay({long_line});
  EXPECT_EQ(out, std::string(LogRelay::kMaxLine, 'x') + "\n" +
                     std::string(LogRelay::kMaxLine, 'x') + "\n" +
                     std::string(LogRelay::kMaxLine, 'x') + "\n");
  // A flood: at most max_total bytes pass, then one note, then nothing.
  LogRelay relay(100);
  std::string flood = relay.Feed(std::string(60, 'a') + "\n" + std::string(60, 'b') + "\n");
  EXPECT_EQ(flood, std::string(60, 'a') + "\n" + std::string(39, 'b') + "\n" +
                       "codebox-jail: agent log cut after 100 bytes\n");
  EXPECT_EQ(relay.Feed("more\n"), "");
  EXPECT_EQ(relay.Finish(), "");
}

}  // namespace
}  // namespace codebox::jail
