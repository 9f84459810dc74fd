// Limits, teardown and the unprivileged path.
#include <dirent.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "jail/agent_image.h"
#include "jail_fixture.h"

namespace codebox::jail::testing {
namespace {

std::vector<int> Pids() {
  std::vector<int> out;
  DIR* d = ::opendir("/proc");
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    int pid = std::atoi(e->d_name);
    if (pid > 0) out.push_back(pid);
  }
  if (d) ::closedir(d);
  return out;
}

int ParentOf(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), {});
  size_t p = s.rfind(')');
  if (p == std::string::npos) return 0;
  std::istringstream is(s.substr(p + 2));
  char state;
  int ppid = 0;
  is >> state >> ppid;
  return ppid;
}

std::string Cmdline(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string s((std::istreambuf_iterator<char>(in)), {});
  for (char& c : s)
    if (c == '\0') c = ' ';
  return s;
}

// Our descendants (supervisors, agents, everything in our boxes), by pid.
std::map<int, std::string> Descendants() {
  std::map<int, int> parent;
  for (int pid : Pids()) parent[pid] = ParentOf(pid);
  std::map<int, std::string> out;
  int self = ::getpid();
  for (const auto& [pid, ppid] : parent) {
    int p = ppid;
    for (int depth = 0; p > 1 && depth < 64; ++depth) {
      if (p == self) {
        out[pid] = Cmdline(pid);
        break;
      }
      p = parent.count(p) ? parent[p] : 0;
    }
  }
  return out;
}

int CountEntries(const std::string& dir, const std::string& prefix) {
  int n = 0;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    if (std::string(e->d_name).rfind(prefix, 0) == 0) ++n;
  }
  if (d) ::closedir(d);
  return n;
}

// What a jail could leave behind, counted for this test process only (other engineers run
// boxes on this machine at the same time).
struct Census {
  size_t processes = 0;
  int fds = 0, mounts = 0, cgroups = 0, staging = 0;
  bool operator==(const Census&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Census& c) {
  return os << "{processes " << c.processes << ", fds " << c.fds << ", mounts " << c.mounts
            << ", cgroups " << c.cgroups << ", staging " << c.staging << "}";
}

Census Count() {
  // The process's one shared sealed copy of the agent is open for its life, by design; made
  // here so it is in both counts.
  (void)SharedAgentImage(AgentPath());
  Census c;
  c.processes = Descendants().size();
  c.fds = CountEntries("/proc/self/fd", "");
  std::ifstream mi("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mi, line)) ++c.mounts;
  std::string prefix = "codebox-" + std::to_string(::getpid()) + "-";
  std::ifstream cg("/proc/self/cgroup");
  while (std::getline(cg, line)) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    std::string ctrl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    for (const char* want : {"memory", "pids", "cpu"}) {
      if (ctrl.find(want) == std::string::npos) continue;
      std::string dir = std::string("/sys/fs/cgroup/") + ctrl + (path == "/" ? "" : path);
      c.cgroups += CountEntries(dir, prefix);
    }
  }
  c.staging = CountEntries(
      ::geteuid() == 0 ? "/run/codebox-jail" : "/tmp/codebox-jail-" + std::to_string(::geteuid()),
      std::to_string(::getpid()) + "-");
  return c;
}

bool WaitUntil(const std::function<bool()>& cond, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

bool CgroupV1Here() { return ::access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) == 0; }

TEST_F(JailTest, ReportsLimits) {
  StartBox(Config());
  std::string all;
  for (const auto& l : jail_->limits()) all += l + "\n";
  EXPECT_NE(all.find("disk 256 MiB (tmpfs size"), std::string::npos) << all;
  EXPECT_NE(all.find("open files 1024"), std::string::npos) << all;
  if (::geteuid() == 0 && CgroupV1Here()) {
    EXPECT_NE(all.find("memory 512 MiB (cgroup v1, no swap)"), std::string::npos) << all;
    EXPECT_NE(all.find("processes 128 (cgroup v1 pids)"), std::string::npos) << all;
    EXPECT_NE(all.find("cpu 1.00 (cgroup v1"), std::string::npos) << all;
    EXPECT_TRUE(jail_->limits_not_enforced().empty()) << jail_->limits_not_enforced()[0];
  }
}

TEST_F(JailTest, MemoryLimitCountsOomKill) {
  JailConfig c = Config();
  c.memory_bytes = 64ull << 20;
  StartBox(c);
  bool cgroup = false;
  for (const auto& l : jail_->limits()) cgroup |= l.rfind("memory 64 MiB (cgroup", 0) == 0;
  if (!cgroup) GTEST_SKIP() << "no memory cgroup here";
  EXPECT_EQ(jail_->OomKillCount(), 0u);
  auto r = Python("a = []\nfor _ in range(64): a.append(bytearray(8 << 20))\nprint('survived')");
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.signal, SIGKILL) << r.exit_code << " " << r.err;
  EXPECT_GE(jail_->OomKillCount(), 1u);
  // The box survives its process's OOM.
  EXPECT_EQ(Sh("echo still here").out, "still here\n");
}

TEST_F(JailTest, PidsLimitStopsForkBomb) {
  JailConfig c = Config();
  c.max_processes = 16;
  StartBox(c);
  auto r = Python(
      "import os, time\n"
      "pids = []\n"
      "try:\n"
      "    for i in range(200):\n"
      "        pid = os.fork()\n"
      "        if pid == 0:\n"
      "            time.sleep(60); os._exit(0)\n"
      "        pids.append(pid)\n"
      "    print('unbounded')\n"
      "except OSError as e:\n"
      "    print('stopped', len(pids) < 16, e.errno)\n"
      "for p in pids: os.kill(p, 9)\n"
      "for p in pids: os.waitpid(p, 0)\n");
  EXPECT_EQ(r.out, "stopped True 11\n") << r.err;  // EAGAIN
}

TEST_F(JailTest, DiskFullIsEnospc) {
  JailConfig c = Config();
  c.disk_bytes = 16ull << 20;
  StartBox(c);
  auto r = Sh("dd if=/dev/zero of=/work/big bs=1M count=64");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  // /tmp shares the same budget.
  EXPECT_NE(Sh("dd if=/dev/zero of=/tmp/more bs=1M count=4").exit_code, 0);
}

TEST_F(JailTest, DestroyKillsDaemons) {
  StartBox(Config());
  auto r = Sh("setsid sh -c 'exec sleep 987654' </dev/null >/dev/null 2>&1 & echo started");
  EXPECT_EQ(r.out, "started\n");
  auto daemons = [] {
    int n = 0;
    for (const auto& [pid, cmd] : Descendants()) n += cmd.find("sleep 987654") != std::string::npos;
    return n;
  };
  EXPECT_TRUE(WaitUntil([&] { return daemons() == 1; }, std::chrono::seconds(3)));
  Status st = jail_->Destroy();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(daemons(), 0);
  EXPECT_TRUE(jail_->Destroy().ok());  // idempotent
}

// The supervisor gets nothing of ours: no environment, and only /dev/null, the caller's
// stderr, sockets, pipes and anonymous inodes (pidfd, signalfd) as fds.
TEST_F(JailTest, SupervisorHasEmptyEnvironmentAndFewFds) {
  ::setenv("CODEBOX_HOST_SECRET", "hunter2", 1);
  StartBox(Config());
  ::unsetenv("CODEBOX_HOST_SECRET");
  int supervisor = 0;
  for (const auto& [pid, cmd] : Descendants()) {
    if (ParentOf(pid) == ::getpid() && cmd.rfind("codebox-jail", 0) == 0) supervisor = pid;
  }
  ASSERT_GT(supervisor, 0);
  std::ifstream env("/proc/" + std::to_string(supervisor) + "/environ");
  std::string env_text((std::istreambuf_iterator<char>(env)), {});
  EXPECT_EQ(env_text, "");
  std::string fd_dir = "/proc/" + std::to_string(supervisor) + "/fd";
  std::string stderr_target(4096, '\0');
  stderr_target.resize(std::max<ssize_t>(
      0, ::readlink("/proc/self/fd/2", stderr_target.data(), stderr_target.size())));
  DIR* d = ::opendir(fd_dir.c_str());
  ASSERT_NE(d, nullptr);
  int count = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    ++count;
    char target[4096];
    ssize_t n = ::readlink((fd_dir + "/" + e->d_name).c_str(), target, sizeof target);
    std::string t(target, n > 0 ? static_cast<size_t>(n) : 0);
    bool allowed = t == "/dev/null" || t == stderr_target || t.rfind("socket:", 0) == 0 ||
                   t.rfind("pipe:", 0) == 0 || t.rfind("anon_inode:", 0) == 0;
    EXPECT_TRUE(allowed) << "fd " << e->d_name << " -> " << t;
  }
  ::closedir(d);
  EXPECT_LE(count, 8);
}

TEST_F(JailTest, CleanupAfterSupervisorIsKilled) {
  Census before = Count();
  StartBox(Config());
  int supervisor = 0, agent = 0;
  for (const auto& [pid, cmd] : Descendants()) {
    if (ParentOf(pid) == ::getpid() && cmd.rfind("codebox-jail", 0) == 0) supervisor = pid;
  }
  ASSERT_GT(supervisor, 0);
  for (const auto& [pid, cmd] : Descendants()) {
    if (ParentOf(pid) == supervisor && cmd.find("codebox-agent") != std::string::npos) agent = pid;
  }
  ASSERT_GT(agent, 0);
  ASSERT_EQ(::kill(supervisor, SIGKILL), 0);
  // The agent has PR_SET_PDEATHSIG: the box goes down with its supervisor. (Once orphaned it is
  // no longer our descendant, so look for the process itself: gone, or a zombie.)
  EXPECT_TRUE(WaitUntil(
      [agent] {
        std::ifstream stat("/proc/" + std::to_string(agent) + "/stat");
        std::string line;
        if (!std::getline(stat, line)) return true;
        size_t close = line.rfind(')');
        return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
      },
      std::chrono::seconds(5)))
      << "the agent (pid " << agent << ") outlived its SIGKILLed supervisor";
  Status st = jail_->Destroy();
  EXPECT_TRUE(st.ok()) << st.ToString();
  client_.reset();
  EXPECT_EQ(Count(), before);
}

TEST_F(JailTest, TwoHundredJailsLeaveNothingBehind) {
  Census before = Count();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) {
    auto jail = Jail::Start(Config());
    ASSERT_TRUE(jail.ok()) << i << ": " << jail.status().ToString();
    if (i % 40 == 0) {
      MiniClient client((*jail)->TakeAgentFd());
      ASSERT_TRUE(client.Hello().ok());
      auto r = client.Sh("sleep 1000 & echo $!");
      ASSERT_TRUE(r.ok() && r->exit_code == 0);
    }
    Status st = (*jail)->Destroy();
    ASSERT_TRUE(st.ok()) << i << ": " << st.ToString();
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count();
  std::printf("200 jails started and destroyed in %lld ms (%.1f ms each)\n",
              static_cast<long long>(ms), ms / 200.0);
  EXPECT_EQ(Count(), before);
}

// The Box API and the Python module start jails from many threads at once.
TEST_F(JailTest, StartsFromManyThreadsAtOnce) {
  Census before = Count();
  constexpr int kThreads = 8;
  std::vector<std::string> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        auto jail = Jail::Start(Config());
        if (!jail.ok()) {
          results[t] = jail.status().ToString();
          return;
        }
        MiniClient client((*jail)->TakeAgentFd());
        auto r = client.Hello().ok() ? client.Sh("echo $((6 * 7))")
                                     : StatusOr<MiniResult>(IoError("hello"));
        if (!r.ok() || r->out != "42\n") {
          results[t] = r.ok() ? "output " + r->out : r.status().ToString();
          return;
        }
        Status st = (*jail)->Destroy();
        if (!st.ok()) results[t] = st.ToString();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(results[t], "") << "thread " << t;
  EXPECT_EQ(Count(), before);
}

// The basic case as an unprivileged user (uid 65534): a forked child drops to nobody and
// starts a jail itself; no cgroups there, so the rlimit fallbacks must be reported.
TEST_F(JailTest, WorksUnprivileged) {
  if (::geteuid() != 0) GTEST_SKIP() << "already unprivileged: the other tests cover it";
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "unprivileged jails limit memory with RLIMIT_AS, which leaves no room for "
                  "AddressSanitizer's shadow memory in the sanitized supervisor; the release "
                  "run covers this test";
#endif
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    auto report = [&](const std::string& s, int code) {
      (void)!::write(fds[1], s.data(), s.size());
      ::_exit(code);
    };
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0) {
      report("cannot become nobody", 1);
    }
    Status probe = ProbeJailSupport();
    if (!probe.ok()) report("SKIP " + probe.message(), 2);
    auto jail = Jail::Start(Config());
    if (!jail.ok()) report("start: " + jail.status().ToString(), 1);
    std::string info;
    for (const auto& l : (*jail)->limits()) info += "limit: " + l + "\n";
    for (const auto& l : (*jail)->limits_not_enforced()) info += "not enforced: " + l + "\n";
    MiniClient client((*jail)->TakeAgentFd());
    if (!client.Hello().ok()) report(info + "hello failed", 1);
    auto r = client.Sh(
        "id -u; cat /proc/sys/kernel/hostname; echo ok > /work/f && cat /work/f; "
        "touch /usr/x 2>/dev/null || echo ro; python3 -c 'print(6 * 7)'");
    if (!r.ok()) report(info + "exec: " + r.status().ToString(), 1);
    Status st = (*jail)->Destroy();
    report(info + "out: " + r->out + "destroy: " + st.ToString() + "\n", 0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
    GTEST_SKIP() << "host forbids unprivileged user namespaces: " << text;
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;
  EXPECT_NE(text.find("out: 0\ncodebox\nok\nro\n42\n"), std::string::npos) << text;
  EXPECT_NE(text.find("destroy: ok"), std::string::npos) << text;
  EXPECT_NE(text.find("not enforced: "), std::string::npos) << text;  // no cgroups for nobody
  std::printf("%s", text.c_str());
}

}  // namespace
}  // namespace codebox::jail::testing
