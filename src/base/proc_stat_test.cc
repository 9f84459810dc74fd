#include "base/proc_stat.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace codebox::base {
namespace {

TEST(ProcStatTest, ThisProcessesCpuTimeGrowsWithWork) {
  const auto before = ProcessCpuTime(::getpid());
  ASSERT_TRUE(before.has_value());
  // About 0.2 s of CPU: more than a clock tick (10 ms) several times over.
  volatile uint64_t sink = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < until) sink = sink + 1;
  const auto after = ProcessCpuTime(::getpid());
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(*after - *before, std::chrono::milliseconds(100));
}

TEST(ProcStatTest, PssCountsTouchedMemory) {
  const auto before = ProcessPssBytes(::getpid());
  ASSERT_TRUE(before.has_value());
  std::vector<char> held(64 << 20, 'x');  // touched: resident
  const auto after = ProcessPssBytes(::getpid());
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(*after, *before + (48u << 20)) << held[held.size() / 2];
}

TEST(ProcStatTest, NoProcessIsNothing) {
  EXPECT_FALSE(ProcessCpuTime(0).has_value());
  EXPECT_FALSE(ProcessCpuTime(-5).has_value());
  EXPECT_FALSE(ProcessPssBytes(0).has_value());
  // Past the largest pid this kernel hands out (pid_max is at most 4194304).
  EXPECT_FALSE(ProcessCpuTime(4194305).has_value());
}

}  // namespace
}  // namespace codebox::base
