// What a killed host process left behind is collected: by the first box start of the next
// codebox process and by `codebox gc`, and only where the owner is really gone (pid and start
// time, so a reused pid is no alive owner).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "base/fs.h"
#include "base/io.h"
#include "base/owner.h"
#include "base/paths.h"
#include "box/leftovers.h"
#include "image/store.h"
#include "jail/cgroups.h"
#include "jail/jail.h"
#include "testing/box_test_util.h"
#include "tests/box/owner_process.h"
#include "vm/vm.h"

namespace codebox {
namespace {

using testing::Codebox;
using testing::Exists;
using testing::Owner;
using testing::OwnerStderr;
using testing::Running;
using testing::StartOwner;
using testing::WaitForOutput;

// A pid and start time of a process that has ended.
base::OwnerRef DeadOwner() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  base::OwnerRef dead{pid, base::ProcessStartTime(pid)};
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return dead;
}

std::string Tag(const base::OwnerRef& o) {
  return std::to_string(o.pid) + "-" + std::to_string(o.start);
}

TEST(OwnerTest, TagParsesBackAndTellsLiveFromDeadAndReused) {
  const base::OwnerRef self{::getpid(), base::ProcessStartTime(::getpid())};
  ASSERT_GT(self.start, 0u);
  base::OwnerRef parsed;
  ASSERT_TRUE(base::ParseOwnerTag(base::OwnerTag() + "-7-0badc0de", &parsed));
  EXPECT_EQ(parsed.pid, self.pid);
  EXPECT_EQ(parsed.start, self.start);
  EXPECT_TRUE(base::OwnerAlive(self));
  EXPECT_FALSE(base::OwnerAlive({self.pid, self.start + 1})) << "a reused pid is not the owner";
  EXPECT_FALSE(base::OwnerAlive(DeadOwner()));
  for (const char* bad : {"", "abc", "12", "12-", "12-x", "0-5", "-3-4"}) {
    EXPECT_FALSE(base::ParseOwnerTag(bad, &parsed)) << bad;
  }
  ASSERT_TRUE(base::ParseOwnerTag("12-3-abc", &parsed, /*with_start=*/false));
  EXPECT_EQ(parsed.pid, 12);
  EXPECT_EQ(parsed.start, 0u);

  // A zombie (exited, not yet reaped) is gone: its code has ended.
  int tag_pipe[2], go_pipe[2];
  ASSERT_EQ(::pipe(tag_pipe), 0);
  ASSERT_EQ(::pipe(go_pipe), 0);
  pid_t child = ::fork();
  if (child == 0) {
    // A forked child gets its own tag, not its parent's cached one.
    std::string tag = base::OwnerTag();
    (void)!::write(tag_pipe[1], tag.data(), tag.size());
    ::close(go_pipe[1]);
    char b;
    (void)!::read(go_pipe[0], &b, 1);  // until the parent lets go
    ::_exit(0);
  }
  ::close(tag_pipe[1]);
  ::close(go_pipe[0]);
  char buf[64] = {};
  ASSERT_GT(::read(tag_pipe[0], buf, sizeof buf - 1), 0);
  ::close(tag_pipe[0]);
  base::OwnerRef kid;
  ASSERT_TRUE(base::ParseOwnerTag(buf, &kid)) << buf;
  EXPECT_EQ(kid.pid, child);
  EXPECT_TRUE(base::OwnerAlive(kid));
  ::close(go_pipe[1]);
  for (int i = 0; i < 400 && Running(child); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(base::OwnerAlive(kid)) << "a zombie owner counts as gone";
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(base::OwnerAlive(kid));
}

TEST(BoxGcTest, RemovesOnlyLeftoversOfDeadOwners) {
  char tmpl[] = "/tmp/codebox-gc-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string home = tmpl;
  const base::OwnerRef dead = DeadOwner();
  ASSERT_GT(dead.start, 0u);
  const base::OwnerRef self{::getpid(), base::ProcessStartTime(::getpid())};
  // Our pid with another start time: what a dead owner's name looks like once its pid has been
  // reused by a live process.
  const base::OwnerRef reused{self.pid, self.start + 1};
  ASSERT_EQ(base::OwnerTag(), Tag(self));

  std::vector<std::string> gone, kept;
  auto plant_dir = [](const std::string& path) { ASSERT_TRUE(base::MakeDirs(path).ok()) << path; };
  auto plant_file = [](const std::string& path) {
    ASSERT_TRUE(base::MakeDirs(path.substr(0, path.rfind('/'))).ok());
    ASSERT_TRUE(base::WriteFile(path, "x").ok()) << path;
  };
  // vm run directories (with a file inside: the whole tree goes).
  for (auto [owner, list] : {std::pair{dead, &gone}, {reused, &gone}, {self, &kept}}) {
    std::string dir = home + "/run/vm-" + Tag(owner) + "-gcTest";
    plant_file(dir + "/console.log");
    list->push_back(dir);
  }
  // Image builder temp dirs (pid-only names; a live build also holds flock).
  plant_dir(home + "/images/.tmp-0123456789abcdef-" + std::to_string(dead.pid));
  gone.push_back(home + "/images/.tmp-0123456789abcdef-" + std::to_string(dead.pid));
  plant_dir(home + "/images/.tmp-0123456789abcdef-" + std::to_string(self.pid));
  kept.push_back(home + "/images/.tmp-0123456789abcdef-" + std::to_string(self.pid));
  // vm disk temp files beside an image tree and in disks/.
  plant_file(home + "/images/0123456789abcdef/rootfs.erofs.tmp." + Tag(dead) + ".abc");
  gone.push_back(home + "/images/0123456789abcdef/rootfs.erofs.tmp." + Tag(dead) + ".abc");
  plant_file(home + "/disks/feed.erofs.tmp." + Tag(self) + ".abc");
  kept.push_back(home + "/disks/feed.erofs.tmp." + Tag(self) + ".abc");
  // Jail staging directories (the real parent: gc looks there).
  const std::string staging = jail::StagingParentPath();
  if (::mkdir(staging.c_str(), 0711) != 0) {
    ASSERT_EQ(errno, EEXIST);
  }
  for (auto [owner, list] : {std::pair{dead, &gone}, {reused, &gone}, {self, &kept}}) {
    std::string dir = staging + "/" + Tag(owner) + "-999-0badc0de";
    plant_dir(dir);
    list->push_back(dir);
  }
  // Jail cgroups, where this process's jails would put theirs (when we may create them).
  jail::cgroups::Plan plan = jail::cgroups::MakePlan("probe");
  std::vector<std::string> cgroup_dirs;
  for (const auto& d : plan.dirs) {
    std::string parent = d.path.substr(0, d.path.rfind('/'));
    for (auto [owner, list] : {std::pair{dead, &gone}, {self, &kept}}) {
      std::string dir = parent + "/codebox-" + Tag(owner) + "-998-0badc0de";
      if (::mkdir(dir.c_str(), 0755) == 0) {
        list->push_back(dir);
        cgroup_dirs.push_back(dir);
      }
    }
  }

  // The CLI: prints what it removed.
  Owner gc = StartOwner({"gc", "--home", home});
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(gc.out.get(), buf, sizeof buf)) > 0;) out.append(buf, n);
  int wstatus = 0;
  ::waitpid(gc.pid, &wstatus, 0);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << OwnerStderr(gc);
  for (const auto& path : gone) {
    EXPECT_FALSE(Exists(path)) << "leftover of a dead owner kept: " << path;
    EXPECT_NE(out.find("removed "), std::string::npos);
    EXPECT_NE(out.find(path), std::string::npos) << "not reported: " << path << "\n" << out;
  }
  for (const auto& path : kept) {
    EXPECT_TRUE(Exists(path)) << "removed although its owner (this test) runs: " << path;
    EXPECT_EQ(out.find(path), std::string::npos) << out;
  }
  std::cerr << "[ info ] codebox gc said:\n" << out;

  // Once this process is gone, what it owns is fair game; until then, a second pass keeps it.
  box::LeftoverReport again = box::CollectLeftovers({home, false, false});
  for (const auto& line : again.removed) ADD_FAILURE() << "second pass removed " << line;
  for (const auto& dir : cgroup_dirs) ::rmdir(dir.c_str());
  for (const auto& path : kept) (void)base::RemoveTree(path);
  (void)base::RemoveTree(home);
}

// Without `codebox gc`: the next codebox process collects leftovers on its first box start.
TEST(BoxGcTest, FirstBoxStartCollectsLeftovers) {
  if (::access(Codebox().c_str(), X_OK) != 0) GTEST_SKIP() << "no codebox CLI at " << Codebox();
  if (!image::FindImage(base::CodeboxHome(""), "python").ok()) GTEST_SKIP() << "no python image";
  const base::OwnerRef dead = DeadOwner();
  const std::string staging = jail::StagingParentPath();
  if (::mkdir(staging.c_str(), 0711) != 0) {
    ASSERT_EQ(errno, EEXIST);
  }
  const std::string stale = staging + "/" + Tag(dead) + "-997-0badc0de";
  const std::string live = staging + "/" + base::OwnerTag() + "-997-0badc0de";
  ASSERT_EQ(::mkdir(stale.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(live.c_str(), 0700), 0);
  Owner run = StartOwner({"exec", "--driver", "jail", "--", "echo", "ran"});
  ASSERT_TRUE(WaitForOutput(run, "ran", std::chrono::seconds(30))) << OwnerStderr(run);
  ::waitpid(run.pid, nullptr, 0);
  EXPECT_FALSE(Exists(stale)) << "a dead owner's staging directory survived a box start";
  EXPECT_TRUE(Exists(live)) << "a live owner's staging directory was removed";
  ::rmdir(live.c_str());
}

// Outside this process's own cgroup, a "codebox-<pid>-..." may be a box of codebox in a
// container, whose pids name other processes here: gc removes such a cgroup only when it is
// empty, and never kills what runs in it.
TEST(BoxGcTest, ForeignCgroupsAreRemovedOnlyWhenEmpty) {
  jail::cgroups::Plan plan = jail::cgroups::MakePlan("probe");
  if (plan.dirs.empty()) GTEST_SKIP() << "no writable cgroup here";
  const auto& d = plan.dirs.front();
  const std::string own_parent = d.path.substr(0, d.path.rfind('/'));
  const std::string foreign = own_parent + "/gc-test-foreign-" + std::to_string(::getpid());
  if (::mkdir(foreign.c_str(), 0755) != 0) GTEST_SKIP() << "cannot make " << foreign;
  if (plan.version == 2) {
    (void)base::WriteFile(foreign + "/cgroup.subtree_control", "+pids");
  }
  const base::OwnerRef dead = DeadOwner();
  const std::string busy = foreign + "/codebox-" + Tag(dead) + "-1-0badc0de";
  const std::string idle = foreign + "/codebox-" + Tag(dead) + "-2-0badc0de";
  ASSERT_EQ(::mkdir(busy.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(idle.c_str(), 0755), 0);
  pid_t sleeper = ::fork();
  if (sleeper == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_TRUE(base::WriteFile(busy + "/cgroup.procs", std::to_string(sleeper)).ok());

  box::LeftoverReport report = box::CollectLeftovers({"", /*walk_all_cgroups=*/true, false});
  EXPECT_FALSE(Exists(idle)) << "an empty cgroup of a dead owner is litter";
  EXPECT_TRUE(Exists(busy));
  EXPECT_TRUE(Running(sleeper)) << "gc killed a process outside its own cgroup";
  bool reported = false;
  for (const auto& line : report.failed)
    reported = reported || line.find(busy) != std::string::npos;
  EXPECT_TRUE(reported) << "the busy foreign cgroup should be reported as not removed";

  ::kill(sleeper, SIGKILL);
  ::waitpid(sleeper, nullptr, 0);
  for (int i = 0; i < 200 && ::rmdir(busy.c_str()) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::rmdir(idle.c_str());
  ::rmdir(foreign.c_str());
}

}  // namespace
}  // namespace codebox
