#include "cli/cell_input.h"

#include <gtest/gtest.h>

namespace codebox::cli {
namespace {

TEST(NeedsMoreInputTest, SimpleStatementsAreComplete) {
  EXPECT_FALSE(NeedsMoreInput("x = 1"));
  EXPECT_FALSE(NeedsMoreInput("print('a:')  # ends with a colon:"));
  EXPECT_FALSE(NeedsMoreInput("d = {'a': 1}"));
  EXPECT_FALSE(NeedsMoreInput("a @ b"));
  EXPECT_FALSE(NeedsMoreInput("match = 3"));
  EXPECT_FALSE(NeedsMoreInput("x: int = 3"));
  EXPECT_FALSE(NeedsMoreInput("iffy = 1"));  // a keyword's prefix is not the keyword
}

TEST(NeedsMoreInputTest, BlocksWaitForAnEmptyLine) {
  EXPECT_TRUE(NeedsMoreInput("def f(x):"));
  EXPECT_TRUE(NeedsMoreInput("def f(x):\n    return x + 1"));
  EXPECT_FALSE(NeedsMoreInput("def f(x):\n    return x + 1\n"));
  EXPECT_FALSE(NeedsMoreInput("def f(x):\n    return x + 1\n   "));
  EXPECT_TRUE(NeedsMoreInput("if True: print(1)"));  // as Python's REPL does
  EXPECT_TRUE(NeedsMoreInput("for i in range(3):\n    pass\nelse:"));
  EXPECT_TRUE(NeedsMoreInput("match x:"));
  EXPECT_TRUE(NeedsMoreInput("@decorator"));
  EXPECT_TRUE(NeedsMoreInput("class A:  # a comment after the colon"));
  EXPECT_TRUE(NeedsMoreInput("async def f():\n    await g()"));
}

TEST(NeedsMoreInputTest, OpenBracketsContinue) {
  EXPECT_TRUE(NeedsMoreInput("x = [1,"));
  EXPECT_TRUE(NeedsMoreInput("f(a,\n  (b,"));
  EXPECT_FALSE(NeedsMoreInput("f(a,\n  (b,\n c))"));
  // A blank line inside brackets does not end the cell.
  EXPECT_TRUE(NeedsMoreInput("x = {\n"));
  EXPECT_FALSE(NeedsMoreInput("x = '('"));     // brackets in strings do not count
  EXPECT_FALSE(NeedsMoreInput("x = 1  # ("));  // nor in comments
}

TEST(NeedsMoreInputTest, BackslashContinues) {
  EXPECT_TRUE(NeedsMoreInput("x = 1 + \\"));
  EXPECT_FALSE(NeedsMoreInput("x = 1 + \\\n  2"));
  EXPECT_TRUE(NeedsMoreInput("s = 'abc\\"));  // a '...' string continued on the next line
  EXPECT_FALSE(NeedsMoreInput("s = 'abc\\\ndef'"));
}

TEST(NeedsMoreInputTest, TripleQuotedStringsContinue) {
  EXPECT_TRUE(NeedsMoreInput("s = \"\"\"hello"));
  EXPECT_TRUE(NeedsMoreInput("s = '''hello\n\n"));  // blank lines belong to the string
  EXPECT_FALSE(NeedsMoreInput("s = '''hello\n'''"));
  EXPECT_TRUE(NeedsMoreInput("s = '''it's \"quoted\" '' still open"));
  EXPECT_FALSE(NeedsMoreInput("s = r'\\''"));  // an escaped quote does not end it
  EXPECT_FALSE(NeedsMoreInput("s = \"#\" + ':'"));
}

TEST(NeedsMoreInputTest, HopelessErrorsGoToTheKernel) {
  EXPECT_FALSE(NeedsMoreInput("x = 'abc"));         // unterminated string
  EXPECT_FALSE(NeedsMoreInput("x = 'abc\ny = ("));  // ... even with an open bracket after it
  EXPECT_FALSE(NeedsMoreInput("x = 1)"));           // a stray closing bracket
}

TEST(IsExitCommandTest, ExitAndQuit) {
  EXPECT_TRUE(IsExitCommand("exit()"));
  EXPECT_TRUE(IsExitCommand("  quit ( ) "));
  EXPECT_TRUE(IsExitCommand("exit"));
  EXPECT_FALSE(IsExitCommand("exit(1)"));
  EXPECT_FALSE(IsExitCommand("exited = True"));
  EXPECT_FALSE(IsExitCommand("sys.exit()"));
}

}  // namespace
}  // namespace codebox::cli
