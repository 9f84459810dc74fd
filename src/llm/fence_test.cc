#include "llm/fence.h"

#include <gtest/gtest.h>

namespace codebox::llm {
namespace {

TEST(FenceTest, PythonBlockIsPreferredOverOthers) {
  auto code = ExtractFencedCode(
      "Install it:\n```bash\npip install x\n```\nThen:\n```python\nprint(1)\nprint(2)\n```\n");
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, "print(1)\nprint(2)\n");
}

TEST(FenceTest, BareBlockAndTagVariants) {
  EXPECT_EQ(*ExtractFencedCode("```\nx = 1\n```"), "x = 1\n");
  EXPECT_EQ(*ExtractFencedCode("```py\na\n```"), "a\n");
  EXPECT_EQ(*ExtractFencedCode("```Python3 title\nb\n```"), "b\n");
  EXPECT_EQ(*ExtractFencedCode("text\r\n```python\r\nc\r\n```\r\n"), "c\n");
}

TEST(FenceTest, OtherLanguagesAndProseAreNotCode) {
  EXPECT_FALSE(ExtractFencedCode("The answer is 42."));
  EXPECT_FALSE(ExtractFencedCode("```text\n42\n```"));
}

TEST(FenceTest, UnclosedBlockRunsToTheEnd) {
  EXPECT_EQ(*ExtractFencedCode("```python\nprint(1)\nprint(2"), "print(1)\nprint(2\n");
}

TEST(FenceTest, IndentedFencesAndBackticksInsideCode) {
  EXPECT_EQ(*ExtractFencedCode("  ```python\ns = '``'\n  ```\n"), "s = '``'\n");
}

}  // namespace
}  // namespace codebox::llm
