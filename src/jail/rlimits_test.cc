#include "jail/rlimits.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

namespace codebox::jail::rlimits {
namespace {

JailConfig Config() {
  JailConfig c;
  c.memory_bytes = 256ull << 20;
  c.max_processes = 50;
  c.max_open_files = 77;
  return c;
}

const Limit* Find(const Plan& plan, int resource) {
  auto it = std::find_if(plan.limits.begin(), plan.limits.end(),
                         [resource](const Limit& l) { return l.resource == resource; });
  return it == plan.limits.end() ? nullptr : &*it;
}

TEST(RlimitsPlan, AlwaysOpenFilesCoreAndProcesses) {
  Plan plan = MakePlan(Config(), /*memory_cgroup=*/true, /*pids_cgroup=*/true);
  ASSERT_NE(Find(plan, RLIMIT_NOFILE), nullptr);
  EXPECT_EQ(Find(plan, RLIMIT_NOFILE)->value, 77u);
  ASSERT_NE(Find(plan, RLIMIT_CORE), nullptr);
  EXPECT_EQ(Find(plan, RLIMIT_CORE)->value, 0u);
  ASSERT_NE(Find(plan, RLIMIT_NPROC), nullptr) << "a second fence even under a pids cgroup";
  EXPECT_EQ(Find(plan, RLIMIT_NPROC)->value, 50u);
  EXPECT_EQ(Find(plan, RLIMIT_AS), nullptr) << "the memory cgroup is in force";
  EXPECT_EQ(Find(plan, RLIMIT_FSIZE), nullptr) << "a full disk is ENOSPC, not SIGXFSZ";
  // Only what the cgroups do not already describe.
  EXPECT_EQ(plan.descriptions,
            std::vector<std::string>{"open files 77 per process (RLIMIT_NOFILE)"});
}

TEST(RlimitsPlan, FallsBackWhereNoCgroupTook) {
  Plan plan = MakePlan(Config(), /*memory_cgroup=*/false, /*pids_cgroup=*/false);
  ASSERT_NE(Find(plan, RLIMIT_AS), nullptr);
  EXPECT_EQ(Find(plan, RLIMIT_AS)->value, 256ull << 20);
  EXPECT_EQ(plan.descriptions,
            (std::vector<std::string>{"open files 77 per process (RLIMIT_NOFILE)",
                                      "processes 50 (RLIMIT_NPROC of box root's uid)",
                                      "memory 256 MiB address space per process (RLIMIT_AS)"}));
}

TEST(RlimitsApply, SetsSoftAndHardLimits) {
  Plan plan = MakePlan(Config(), /*memory_cgroup=*/true, /*pids_cgroup=*/true);
  // In a child: the limits cannot be raised again.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!Apply(plan).ok()) ::_exit(10);
    rlimit rl;
    ::getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur != 77 || rl.rlim_max != 77) ::_exit(11);
    ::getrlimit(RLIMIT_CORE, &rl);
    if (rl.rlim_cur != 0 || rl.rlim_max != 0) ::_exit(12);
    ::getrlimit(RLIMIT_NPROC, &rl);
    if (rl.rlim_cur != 50 || rl.rlim_max != 50) ::_exit(13);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: Apply failed, 11-13: a limit is not in force";
}

TEST(RlimitsApply, NamesTheLimitThatFailed) {
  Plan plan;
  plan.limits.push_back({RLIMIT_NOFILE, RLIM_INFINITY, "RLIMIT_NOFILE"});
  rlimit now;
  ::getrlimit(RLIMIT_NOFILE, &now);
  if (now.rlim_max == RLIM_INFINITY || ::geteuid() == 0) {
    GTEST_SKIP() << "needs an unprivileged process with a finite RLIMIT_NOFILE hard limit";
  }
  Status st = Apply(plan);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("set RLIMIT_NOFILE"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace codebox::jail::rlimits
