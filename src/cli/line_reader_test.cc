#include "cli/line_reader.h"

#include <gtest/gtest.h>

namespace codebox::cli {
namespace {

TEST(ReplHistoryPathTest, FollowsTheXdgStateDirectory) {
  EXPECT_EQ(ReplHistoryPath("/s", "/home/u"), "/s/codebox/repl_history");
  EXPECT_EQ(ReplHistoryPath("", "/home/u"), "/home/u/.local/state/codebox/repl_history");
  EXPECT_EQ(ReplHistoryPath("relative/dir", "/home/u"),
            "/home/u/.local/state/codebox/repl_history");
  EXPECT_EQ(ReplHistoryPath("", ""), "");
}

}  // namespace
}  // namespace codebox::cli
