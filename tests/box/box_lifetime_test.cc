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

using std::chrono::steady_clock;
constexpr auto kCleanupDeadline = std::chrono::seconds(2);

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

}  // namespace
}  // namespace codebox
