#include "base/deadline.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "codebox/timeout.h"

namespace codebox::base {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(DeadlineAfterTest, IsStartPlusTheTimeout) {
  const Clock::time_point start = Clock::now();
  EXPECT_EQ(DeadlineAfter(start, 1500ms), start + 1500ms);
  EXPECT_EQ(DeadlineAfter(start, 0ms), start);
}

// Past what the clock's nanoseconds hold, there is no deadline (and no overflow: the
// asan-ubsan build checks that).
TEST(DeadlineAfterTest, ALimitTheClockCannotReachIsNone) {
  const Clock::time_point start = Clock::now();
  EXPECT_EQ(DeadlineAfter(start, kNoTimeout), std::nullopt);
  EXPECT_EQ(DeadlineAfter(start, kNoTimeout - 1ms), std::nullopt);
  EXPECT_EQ(DeadlineAfter(start, std::chrono::milliseconds(INT64_MAX / 1000)), std::nullopt);
  // 100 years is within reach (the clock counts about 292 years from its epoch).
  EXPECT_TRUE(DeadlineAfter(start, std::chrono::hours(24 * 365 * 100)).has_value());
}

}  // namespace
}  // namespace codebox::base
