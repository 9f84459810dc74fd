#include "base/utc_time.h"

#include <gtest/gtest.h>

namespace codebox::base {
namespace {

TEST(UtcTimeTest, Rfc3339IsUtcWithMilliseconds) {
  EXPECT_EQ(Rfc3339(std::chrono::system_clock::time_point{}), "1970-01-01T00:00:00.000Z");
  // 2026-12-03T12:34:56.789Z
  const auto t = std::chrono::system_clock::time_point{std::chrono::milliseconds(1796301296789)};
  EXPECT_EQ(Rfc3339(t), "2026-12-03T12:34:56.789Z");
}

}  // namespace
}  // namespace codebox::base
