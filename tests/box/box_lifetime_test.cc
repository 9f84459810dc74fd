// No box outlives its host process, and what a killed host process left behind is collected. The
// owner here is the real thing: the `codebox` CLI running `exec` in a box, SIGKILLed in the middle
// of the run. Within 2 s nothing of its box may be left: no process (supervisor or keeper, agent,
// QEMU, box code, a daemon), no cgroup, no mount, no staging or run directory.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "base/io.h"
#include "base/owner.h"
#include "base/paths.h"
#include "box/leftovers.h"
#include "image/store.h"
#include "jail/cgroups.h"
#include "jail/jail.h"
#include "tests/box/box_test_util.h"
#include "vm/fs.h"
#include "vm/vm.h"

namespace codebox {
namespace {

using std::chrono::steady_clock;
constexpr auto kCleanupDeadline = std::chrono::seconds(2);

std::string Codebox() { return base::SelfExeDir() + "/codebox"; }

struct ProcInfo {
  int ppid = 0;
  char state = '?';
  std::string cmd;
};

std::map<int, ProcInfo> Processes() {
  std::map<int, ProcInfo> out;
  for (const auto& name : base::ListDirectory("/proc")) {
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto stat = base::ReadFile("/proc/" + name + "/stat");
    if (!stat.ok()) continue;
    size_t close = stat->rfind(')');
    if (close == std::string::npos) continue;
    ProcInfo p;
    std::istringstream rest(stat->substr(close + 2));
    rest >> p.state >> p.ppid;
    auto cmd = base::ReadFile("/proc/" + name + "/cmdline");
    if (cmd.ok()) {
      p.cmd = *cmd;
      for (char& c : p.cmd) c = c == '\0' ? ' ' : c;
    }
    out[std::stoi(name)] = p;
  }
  return out;
}

// Live (non-zombie) descendants of `root`.
std::map<int, std::string> Descendants(int root) {
  auto procs = Processes();
  std::map<int, std::string> out;
  for (const auto& [pid, p] : procs) {
    if (p.state == 'Z' || p.state == 'X') continue;
    for (int up = p.ppid, hops = 0; up > 1 && hops < 64; ++hops) {
      if (up == root) {
        out[pid] = p.cmd;
        break;
      }
      auto it = procs.find(up);
      if (it == procs.end()) break;
      up = it->second.ppid;
    }
  }
  return out;
}

bool Running(int pid) {
  auto stat = base::ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return false;
  size_t close = stat->rfind(')');
  return close != std::string::npos && close + 2 < stat->size() && (*stat)[close + 2] != 'Z' &&
         (*stat)[close + 2] != 'X';
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// Cgroup directories named for jails of `pid` where this process's jails would go.
std::vector<std::string> CgroupsOf(int pid) {
  std::vector<std::string> out;
  jail::cgroups::Plan plan = jail::cgroups::MakePlan("probe");
  for (const auto& d : plan.dirs) {
    std::string parent = d.path.substr(0, d.path.rfind('/'));
    for (const auto& name : base::ListDirectory(parent)) {
      if (name.starts_with("codebox-" + std::to_string(pid) + "-"))
        out.push_back(parent + "/" + name);
    }
  }
  return out;
}

std::vector<std::string> EntriesWithPrefix(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& name : base::ListDirectory(dir)) {
    if (name.starts_with(prefix)) out.push_back(dir + "/" + name);
  }
  return out;
}

// A running `codebox exec ...`; stdout is a pipe we read "started" from.
struct Owner {
  pid_t pid = -1;
  base::UniqueFd out;
  std::string err_path;
};

Owner StartOwner(const std::vector<std::string>& args) {
  Owner o;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return o;
  base::UniqueFd rd(fds[0]), wr(fds[1]);
  o.err_path = ::testing::TempDir() + "/lifetime_owner_" + std::to_string(::getpid()) + ".err";
  base::UniqueFd err(::open(o.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  std::vector<std::string> argv = {Codebox()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(wr.get(), 1);
    ::dup2(err.get(), 2);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  o.pid = pid;
  o.out = std::move(rd);
  return o;
}

// Reads the owner's stdout until `word` shows up; false on EOF (the owner exited) or timeout.
bool WaitForOutput(const Owner& o, const std::string& word, std::chrono::seconds timeout) {
  std::string got;
  auto deadline = steady_clock::now() + timeout;
  while (steady_clock::now() < deadline) {
    pollfd p = {o.out.get(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    ssize_t n = ::read(o.out.get(), buf, sizeof buf);
    if (n <= 0) return false;
    got.append(buf, static_cast<size_t>(n));
    if (got.find(word) != std::string::npos) return true;
  }
  return false;
}

std::string OwnerStderr(const Owner& o) {
  auto text = base::ReadFile(o.err_path);
  return text.ok() ? *text : "";
}

// Everything of the owner's box that must vanish with it.
struct BoxTraces {
  std::map<int, std::string> processes;
  std::vector<std::string> paths;  // staging dir, run dir, cgroup dirs
  std::string mount_needle;        // a path no mount of ours may name afterwards
};

// What is still there (empty when nothing is).
std::string StillThere(const BoxTraces& t) {
  std::string left;
  for (const auto& [pid, cmd] : t.processes) {
    if (Running(pid)) left += "process " + std::to_string(pid) + " (" + cmd + "); ";
  }
  for (const auto& p : t.paths) {
    if (Exists(p)) left += p + "; ";
  }
  if (!t.mount_needle.empty()) {
    auto mounts = base::ReadFile("/proc/self/mountinfo");
    if (mounts.ok() && mounts->find(t.mount_needle) != std::string::npos) {
      left += "a mount under " + t.mount_needle + "; ";
    }
  }
  return left;
}

// Kills the owner and waits (at most kCleanupDeadline) for its box to be gone.
void KillOwnerAndExpectNothingLeft(Owner& o, const BoxTraces& traces) {
  ASSERT_EQ(::kill(o.pid, SIGKILL), 0);
  auto killed = steady_clock::now();
  ::waitpid(o.pid, nullptr, 0);
  std::string left;
  while (steady_clock::now() - killed < kCleanupDeadline) {
    // We are a subreaper: orphaned supervisors/keepers come to us to be reaped.
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    left = StillThere(traces);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() - killed);
  EXPECT_EQ(left, "") << "left " << took.count() << " ms after the owner was SIGKILLed";
  std::cerr << "[ info ] box gone " << took.count() << " ms after its owner was SIGKILLed\n";
}

class BoxLifetimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (::access(Codebox().c_str(), X_OK) != 0) GTEST_SKIP() << "no codebox CLI at " << Codebox();
    auto image = image::FindImage(base::CodeboxHome(""), "python");
    if (!image.ok()) GTEST_SKIP() << "image 'python' is not built: " << image.status().message();
  }
};

TEST_F(BoxLifetimeTest, JailDiesWithItsSigkilledOwner) {
  // A long command plus a daemon that left its parent (double fork, own session).
  Owner o = StartOwner({"exec", "--driver", "jail", "--", "sh", "-c",
                        "(setsid sleep 1001 &) ; echo started; sleep 1000"});
  ASSERT_GT(o.pid, 0);
  if (!WaitForOutput(o, "started", std::chrono::seconds(30))) {
    ::kill(o.pid, SIGKILL);
    ::waitpid(o.pid, nullptr, 0);
    std::string err = OwnerStderr(o);
    if (err.find("jail") != std::string::npos && err.find("nable") != std::string::npos) {
      GTEST_SKIP() << "no jail here: " << err;
    }
    FAIL() << "the box did not start: " << err;
  }
  BoxTraces t;
  // Bounded wait for the daemon to show up as a process of the box.
  for (int i = 0; i < 100; ++i) {
    t.processes = Descendants(o.pid);
    int sleeps = 0;
    for (const auto& [pid, cmd] : t.processes) sleeps += cmd.starts_with("sleep 100");
    if (sleeps == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::set<std::string> kinds;
  for (const auto& [pid, cmd] : t.processes) kinds.insert(cmd.substr(0, cmd.find(' ')));
  ASSERT_TRUE(kinds.count("codebox-jail") && kinds.count("codebox-agent") && kinds.count("sleep"))
      << "box processes not found under the owner";
  t.paths = EntriesWithPrefix(jail::StagingParentPath(), std::to_string(o.pid) + "-");
  ASSERT_EQ(t.paths.size(), 1u) << "staging directory of the owner's jail";
  t.mount_needle = t.paths[0];
  std::vector<std::string> cgroups = CgroupsOf(o.pid);
  t.paths.insert(t.paths.end(), cgroups.begin(), cgroups.end());

  KillOwnerAndExpectNothingLeft(o, t);
  EXPECT_TRUE(CgroupsOf(o.pid).empty());
}

TEST_F(BoxLifetimeTest, VmQemuDiesWithItsSigkilledOwner) {
  vm::AcceleratorProbe probe = vm::ProbeAccelerators();
  if (!probe.tcg_usable && !probe.kvm_usable) GTEST_SKIP() << "no QEMU: " << probe.tcg_reason;
  Owner o = StartOwner({"exec", "--driver", "vm", "--allow-emulation", "--", "sh", "-c",
                        "(setsid sleep 1001 &) ; echo started; sleep 1000"});
  ASSERT_GT(o.pid, 0);
  if (!WaitForOutput(o, "started", std::chrono::seconds(120))) {
    ::kill(o.pid, SIGKILL);
    ::waitpid(o.pid, nullptr, 0);
    std::string err = OwnerStderr(o);
    // No kernel (no network to fetch one) or no erofs tools: this host cannot boot a vm box.
    if (err.find("kernel") != std::string::npos || err.find("not found") != std::string::npos ||
        err.find("nable") != std::string::npos) {
      GTEST_SKIP() << "cannot boot a vm box here: " << err;
    }
    FAIL() << "the vm box did not start: " << err;
  }
  BoxTraces t;
  t.processes = Descendants(o.pid);
  std::set<std::string> kinds;
  for (const auto& [pid, cmd] : t.processes) {
    std::string exe = cmd.substr(0, cmd.find(' '));
    kinds.insert(exe.substr(exe.rfind('/') + 1));
  }
  ASSERT_TRUE(kinds.count("codebox-vm-keeper") && kinds.count("qemu-system-x86_64"))
      << "keeper and QEMU not found under the owner";
  t.paths = EntriesWithPrefix(base::CodeboxHome("") + "/run", "vm-" + std::to_string(o.pid) + "-");
  ASSERT_EQ(t.paths.size(), 1u) << "run directory of the owner's vm";

  KillOwnerAndExpectNothingLeft(o, t);
}

// The other half of the keeper's design: the box is tied to the owner *process*, not to the thread
// that created it (PR_SET_PDEATHSIG on QEMU itself would kill it here).
TEST_F(BoxLifetimeTest, VmBoxOutlivesTheThreadThatMadeIt) {
  vm::AcceleratorProbe probe = vm::ProbeAccelerators();
  if (!probe.tcg_usable && !probe.kvm_usable) GTEST_SKIP() << "no QEMU: " << probe.tcg_reason;
  BoxOptions options = testing::TestBoxOptions();
  options.driver = DriverKind::kVm;
  options.allow_emulation = true;
  options.exec_timeout = std::chrono::seconds(60);
  StatusOr<std::unique_ptr<Box>> made = Unavailable("not made");
  std::thread([&] { made = Box::Create(options); }).join();
  if (!made.ok() && (made.status().code() == StatusCode::kNotFound ||
                     made.status().code() == StatusCode::kUnavailable)) {
    GTEST_SKIP() << "cannot boot a vm box here: " << made.status().message();
  }
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto r = (*made)->Exec({"echo", "still here"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "still here\n");
  EXPECT_TRUE((*made)->Destroy().ok());
  EXPECT_EQ(testing::CountOurBoxProcesses(), 0);
}

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
  auto plant_dir = [](const std::string& path) { ASSERT_TRUE(vm::MakeDirs(path).ok()) << path; };
  auto plant_file = [](const std::string& path) {
    ASSERT_TRUE(vm::MakeDirs(path.substr(0, path.rfind('/'))).ok());
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
  for (const auto& path : kept) (void)vm::RemoveTree(path);
  (void)vm::RemoveTree(home);
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
