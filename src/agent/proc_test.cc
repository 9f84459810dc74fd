#include "agent/proc.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "agent/guest_limits.h"

namespace codebox::agent {
namespace {

TEST(ParseStatLine, ReadsTheFieldsAfterTheLastParenthesis) {
  ProcInfo p;
  // A command name may hold spaces and ')' (box code chooses it).
  ASSERT_TRUE(ParseStatLine(42, "42 (evil) S 1 2 3) R 7 8 9 0 0 0", &p));
  EXPECT_EQ(p.pid, 42);
  EXPECT_EQ(p.state, 'R');
  EXPECT_EQ(p.ppid, 7);
  EXPECT_EQ(p.pgrp, 8);
  EXPECT_EQ(p.session, 9);
  ASSERT_TRUE(ParseStatLine(5, "5 (sh) Z 4 5 5 0 -1", &p));
  EXPECT_EQ(p.state, 'Z');
  EXPECT_EQ(p.ppid, 4);
}

TEST(ParseStatLine, RefusesMalformedLines) {
  ProcInfo p;
  EXPECT_FALSE(ParseStatLine(1, "", &p));
  EXPECT_FALSE(ParseStatLine(1, "1 no-parenthesis S 0 1 1", &p));
  EXPECT_FALSE(ParseStatLine(1, "1 (cut) S 0", &p));
  EXPECT_FALSE(ParseStatLine(1, "1 (x) S a b c", &p));
}

TEST(ParseOomKillCount, FindsTheWholeKeyOnly) {
  EXPECT_EQ(ParseOomKillCount("nr_free_pages 5\noom_kill 17\nother 3\n"), 17u);
  EXPECT_EQ(ParseOomKillCount("nr_free_pages 5\nx_oom_kill 9\noom_kill 2\n"), 2u);
  EXPECT_EQ(ParseOomKillCount("nr_free_pages 5\noom_kill_extra 9\n"), 0u);
  EXPECT_EQ(ParseOomKillCount(""), 0u);
}

TEST(DescendsFrom, FollowsParentLinks) {
  std::vector<ProcInfo> all = {{10, 1}, {11, 10}, {12, 11}, {20, 1}};
  EXPECT_TRUE(DescendsFrom(12, 10, all));
  EXPECT_TRUE(DescendsFrom(11, 10, all));
  EXPECT_FALSE(DescendsFrom(10, 10, all)) << "a process is not its own descendant";
  EXPECT_FALSE(DescendsFrom(20, 10, all));
  EXPECT_FALSE(DescendsFrom(99, 10, all)) << "unknown pid";
}

TEST(DescendsFrom, EndsOnACycleInARacySnapshot) {
  std::vector<ProcInfo> all = {{30, 31}, {31, 30}};
  EXPECT_FALSE(DescendsFrom(30, 10, all));
}

TEST(ListProcesses, SeesThisProcessAndItsParent) {
  auto all = ListProcesses();
  bool found = false;
  for (const ProcInfo& p : all) {
    if (p.pid != ::getpid()) continue;
    found = true;
    EXPECT_EQ(p.ppid, ::getppid());
    EXPECT_EQ(p.pgrp, ::getpgrp());
    EXPECT_NE(p.state, 'Z');
  }
  EXPECT_TRUE(found);
}

TEST(GuestLimits, NoLimitIsMaxAndOutsideAGuestThereIsNoCgroup) {
  EXPECT_EQ(CgroupLimit(0), "max");
  EXPECT_EQ(CgroupLimit(128), "128");
  // A memory.events as the kernel writes it, with the newline ExecCgroupOomKills adds.
  EXPECT_EQ(ParseOomKillCount("\nlow 0\nhigh 0\nmax 40\noom 2\noom_kill 3\noom_group_kill 0\n"),
            3u);
  // Nothing set the cgroup up: an exec's child stays where it is, and the count is the kernel's.
  EXPECT_FALSE(ExecCgroupOomKills().has_value());
  EXPECT_TRUE(JoinExecCgroup());
}

}  // namespace
}  // namespace codebox::agent
