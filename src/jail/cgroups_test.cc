// The cgroup plan's parsers, and Create/OomKillCount against a directory tree that stands in
// for cgroupfs (the files the kernel would offer are plain files here).
#include "jail/cgroups.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace codebox::jail::cgroups {
namespace {

namespace fs = std::filesystem;

TEST(ParseProcCgroup, ReadsV1AndV2Lines) {
  auto own = ParseProcCgroup(
      "12:pids:/user.slice/u.scope\n"
      "4:cpu,cpuacct:/user.slice\n"
      "3:memory:/user.slice/u.scope\n"
      "1:name=systemd:/user.slice/u.scope\n"
      "0::/user.slice/u.scope\n"
      "garbage\n");
  EXPECT_EQ(own["pids"], "/user.slice/u.scope");
  EXPECT_EQ(own["cpu"], "/user.slice");
  EXPECT_EQ(own["cpuacct"], "/user.slice");
  EXPECT_EQ(own["memory"], "/user.slice/u.scope");
  EXPECT_EQ(own["unified"], "/user.slice/u.scope");
  EXPECT_EQ(own.count("garbage"), 0u);
}

TEST(ParseProcCgroup, KeepsColonsInThePath) {
  auto own = ParseProcCgroup("0::/a:b\n");
  EXPECT_EQ(own["unified"], "/a:b");
}

TEST(ParseV1Mounts, FindsCgroupV1HierarchiesOnly) {
  auto mounts = ParseV1Mounts(
      "25 1 0:23 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
      "30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid shared:9 - cgroup cgroup rw,memory\n"
      "31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw shared:10 - cgroup cgroup rw,cpu,cpuacct\n"
      "32 25 0:28 / /sys/fs/cgroup/unified rw shared:11 - cgroup2 cgroup2 rw,nsdelegate\n"
      "no separator here\n");
  EXPECT_EQ(mounts["memory"], "/sys/fs/cgroup/memory");
  EXPECT_EQ(mounts["cpu"], "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(mounts["cpuacct"], "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(mounts.count("nsdelegate"), 0u) << "cgroup2 is not a v1 hierarchy";
  EXPECT_EQ(mounts.count("pids"), 0u);
}

TEST(EncodeDirs, RoundTrips) {
  Plan plan;
  plan.version = 1;
  plan.dirs = {{"memory", "/sys/fs/cgroup/memory/a:b/codebox-1"}, {"pids", "/p/codebox-1"}};
  plan.unavailable = {"cpu: no write access to cgroup /x (Permission denied)"};
  Plan back = DecodeDirs(1, EncodeDirs(plan));
  EXPECT_EQ(back.version, 1);
  ASSERT_EQ(back.dirs.size(), 2u);
  EXPECT_EQ(back.dirs[0].controller, "memory");
  EXPECT_EQ(back.dirs[0].path, "/sys/fs/cgroup/memory/a:b/codebox-1");
  EXPECT_EQ(back.dirs[1].controller, "pids");
  EXPECT_EQ(back.unavailable, plan.unavailable);
  EXPECT_TRUE(DecodeDirs(2, {"no-colon"}).dirs.empty());
}

class FakeCgroupfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/codebox-cgroups-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    root_ = dir;
    config_.memory_bytes = 300ull << 20;
    config_.max_processes = 42;
    config_.cpus = 0.5;
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  Plan V1Plan() {
    Plan plan;
    plan.version = 1;
    for (const char* c : {"memory", "pids", "cpu"}) {
      fs::create_directories(root_ + "/" + c);
      plan.dirs.push_back({c, root_ + "/" + c + "/codebox-t"});
    }
    return plan;
  }

  std::string root_;
  JailConfig config_;
};

TEST_F(FakeCgroupfs, V1WritesEveryLimit) {
  Plan plan = V1Plan();
  plan.unavailable = {"something: why"};
  Applied applied = Create(plan, config_);
  EXPECT_TRUE(applied.memory && applied.pids && applied.cpu);
  EXPECT_EQ(Read(root_ + "/memory/codebox-t/memory.limit_in_bytes"), std::to_string(300ull << 20));
  EXPECT_EQ(Read(root_ + "/memory/codebox-t/memory.swappiness"), "0")
      << "without swap accounting, swappiness 0";
  EXPECT_EQ(Read(root_ + "/pids/codebox-t/pids.max"), "42");
  EXPECT_EQ(Read(root_ + "/cpu/codebox-t/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(Read(root_ + "/cpu/codebox-t/cpu.cfs_quota_us"), "50000");
  EXPECT_EQ(applied.limits,
            (std::vector<std::string>{"memory 300 MiB (cgroup v1, swappiness 0)",
                                      "processes 42 (cgroup v1 pids)",
                                      "cpu 0.50 (cgroup v1 cfs quota 50000/100000 us)"}));
  EXPECT_EQ(applied.not_enforced, plan.unavailable);
  EXPECT_EQ(plan.dirs.size(), 3u);
}

TEST_F(FakeCgroupfs, V1WithSwapAccountingCapsMemsw) {
  Plan plan = V1Plan();
  fs::create_directories(root_ + "/memory/codebox-t");
  { std::ofstream(root_ + "/memory/codebox-t/memory.memsw.limit_in_bytes") << "max"; }
  Applied applied = Create(plan, config_);
  EXPECT_EQ(Read(root_ + "/memory/codebox-t/memory.memsw.limit_in_bytes"),
            std::to_string(300ull << 20));
  EXPECT_EQ(applied.limits[0], "memory 300 MiB (cgroup v1, no swap)");
}

TEST_F(FakeCgroupfs, V2WritesEveryLimitInOneDirectory) {
  Plan plan;
  plan.version = 2;
  plan.dirs = {{"unified", root_ + "/codebox-t"}};
  config_.cpus = 0.001;  // below the kernel's minimum quota
  Applied applied = Create(plan, config_);
  EXPECT_TRUE(applied.memory && applied.pids && applied.cpu);
  EXPECT_EQ(Read(root_ + "/cgroup.subtree_control"), "+memory +pids +cpu");
  EXPECT_EQ(Read(root_ + "/codebox-t/memory.max"), std::to_string(300ull << 20));
  EXPECT_EQ(Read(root_ + "/codebox-t/memory.swap.max"), "0");
  EXPECT_EQ(Read(root_ + "/codebox-t/pids.max"), "42");
  EXPECT_EQ(Read(root_ + "/codebox-t/cpu.max"), "1000 100000");
}

TEST_F(FakeCgroupfs, AFailingControllerIsReportedAndTheOthersStay) {
  Plan plan = V1Plan();
  fs::create_directories(root_ + "/pids/codebox-t/pids.max");  // a directory: the write fails
  plan.dirs.push_back({"memory", root_ + "/missing-parent/codebox-t"});
  Applied applied = Create(plan, config_);
  EXPECT_TRUE(applied.memory);
  EXPECT_FALSE(applied.pids);
  EXPECT_TRUE(applied.cpu);
  ASSERT_EQ(applied.not_enforced.size(), 2u);
  EXPECT_EQ(applied.not_enforced[0].rfind("pids cgroup: ", 0), 0u) << applied.not_enforced[0];
  EXPECT_EQ(applied.not_enforced[1].rfind("memory: mkdir " + root_ + "/missing-parent", 0), 0u)
      << applied.not_enforced[1];
  EXPECT_EQ(plan.dirs.size(), 3u) << "the directory that could not be made leaves the plan";
}

TEST_F(FakeCgroupfs, NoDirectoryMeansNoCgroups) {
  Plan plan;
  plan.version = 2;
  plan.dirs = {{"unified", root_ + "/no/such/codebox-t"}};
  Applied applied = Create(plan, config_);
  EXPECT_EQ(plan.version, 0);
  EXPECT_TRUE(plan.dirs.empty());
  EXPECT_FALSE(applied.memory || applied.pids || applied.cpu);
}

TEST_F(FakeCgroupfs, OomKillCountReadsEachVersionsFile) {
  fs::create_directories(root_ + "/v2");
  { std::ofstream(root_ + "/v2/memory.events") << "low 0\nhigh 0\nmax 9\noom 3\noom_kill 2\n"; }
  Plan v2;
  v2.version = 2;
  v2.dirs = {{"unified", root_ + "/v2"}};
  EXPECT_EQ(OomKillCount(v2), 2u);

  fs::create_directories(root_ + "/v1");
  {
    std::ofstream(root_ + "/v1/memory.oom_control")
        << "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n";
  }
  Plan v1;
  v1.version = 1;
  v1.dirs = {{"pids", root_ + "/nothing"}, {"memory", root_ + "/v1"}};
  EXPECT_EQ(OomKillCount(v1), 5u);

  v1.dirs = {{"memory", root_ + "/gone"}};
  EXPECT_EQ(OomKillCount(v1), 0u);
}

TEST_F(FakeCgroupfs, KillAndRemoveOfNothingIsFine) {
  Plan plan;
  plan.version = 2;
  plan.dirs = {{"unified", root_ + "/never-made"}};
  EXPECT_TRUE(KillAndRemove(plan).ok());
  fs::create_directories(root_ + "/empty");
  plan.version = 1;  // v2 would write cgroup.kill, a plain file here
  plan.dirs = {{"unified", root_ + "/empty"}};
  EXPECT_TRUE(KillAndRemove(plan).ok());
  EXPECT_FALSE(fs::exists(root_ + "/empty"));
}

}  // namespace
}  // namespace codebox::jail::cgroups
