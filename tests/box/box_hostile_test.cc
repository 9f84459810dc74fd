// Hostile code in a jail box: each case must end with a clear result, the host unaffected.
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "base/owner.h"
#include "testing/box_test_util.h"
#include "testing/loopback_listener.h"

namespace codebox {
namespace {

using namespace std::chrono_literals;
using testing::TestBoxOptions;

std::chrono::milliseconds Elapsed(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

TEST(BoxHostileTest, InfiniteLoopAndSleepTimeOutOnTime) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  for (const char* code : {"while True: pass", "import time; time.sleep(100)"}) {
    ExecOptions opts;
    opts.timeout = 1s;
    auto start = std::chrono::steady_clock::now();
    auto r = box->RunPython(code, opts);
    auto took = Elapsed(start);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->timed_out) << code;
    EXPECT_LT(took, 1500ms) << code;
    EXPECT_GE(took, 1000ms) << code;
  }
}

TEST(BoxHostileTest, RunRaisesDeadlineExceededOnTimeout) {
  BoxOptions options = TestBoxOptions();
  options.exec_timeout = 500ms;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  auto r = box->Run("print('started', flush=True)\nwhile True: pass");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("started"), std::string::npos);
}

TEST(BoxHostileTest, SigtermIgnoringProcessIsKilled) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  ExecOptions opts;
  opts.timeout = 1s;
  auto r = box->RunPython(
      "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(100)", opts);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  // The bracket keeps grep from matching its own command line.
  auto ps = box->Exec({"sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -c 'SIG_IG[N]'"});
  ASSERT_TRUE(ps.ok());
  EXPECT_EQ(ps->stdout_data, "0\n") << "the SIGTERM-ignoring process is still alive";
}

TEST(BoxHostileTest, MemoryBombIsReportedAsOutOfMemory) {
  BoxOptions options = TestBoxOptions();
  options.memory_mib = 128;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  auto r = box->RunPython("x = []\nwhile True: x.append(bytearray(16 << 20))");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->exit_code, 0);
  // Under a cgroup the kernel kills it (out_of_memory); under an rlimit Python raises
  // MemoryError. Either way the box says so and survives.
  EXPECT_TRUE(r->out_of_memory || r->stderr_data.find("MemoryError") != std::string::npos)
      << "exit " << r->exit_code << " signal " << r->signal << " stderr " << r->stderr_data;
  auto after = box->Run("print('alive')");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, "alive\n");
}

TEST(BoxHostileTest, ForkBombAndThreadBombAreStoppedByTheProcessLimit) {
  BoxOptions options = TestBoxOptions();
  options.max_processes = 64;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  ExecOptions opts;
  opts.timeout = 5s;
  auto fork_bomb = box->Exec({"sh", "-c", "b() { b | b & }; b; sleep 2; echo survived"}, opts);
  ASSERT_TRUE(fork_bomb.ok()) << fork_bomb.status().ToString();
  auto thread_bomb = box->RunPython(
      "import threading, time\nn = 0\ntry:\n"
      "    while True:\n        threading.Thread(target=time.sleep, args=(10,), daemon=True).start(); n += 1\n"
      "except RuntimeError as e:\n    print('stopped at', n)\n",
      opts);
  ASSERT_TRUE(thread_bomb.ok()) << thread_bomb.status().ToString();
  EXPECT_NE(thread_bomb->stdout_data.find("stopped at"), std::string::npos)
      << thread_bomb->stdout_data << thread_bomb->stderr_data;
  // The host still forks fine, and so does a fresh box.
  auto fresh = Box::Create(TestBoxOptions());
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(*(*fresh)->Run("print(1)"), "1\n");
}

TEST(BoxHostileTest, HugeOutputIsCappedAndFlagged) {
  BoxOptions options = TestBoxOptions();
  options.output_limit_bytes = 1 << 20;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  auto r = box->Exec({"sh", "-c", "head -c 100000000 /dev/zero"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data.size(), 1u << 20);
  EXPECT_TRUE(r->output_truncated);
  EXPECT_EQ(r->exit_code, 0);
}

TEST(BoxHostileTest, FillingTheDiskGivesEnospcInsideOnly) {
  BoxOptions options = TestBoxOptions();
  options.disk_mib = 32;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  struct statvfs before;
  ASSERT_EQ(::statvfs("/", &before), 0);
  auto r = box->Exec({"sh", "-c", "dd if=/dev/zero of=/work/fill bs=1M count=100 2>&1; echo rc=$?"});
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->stdout_data.find("No space left on device"), std::string::npos) << r->stdout_data;
  struct statvfs after;
  ASSERT_EQ(::statvfs("/", &after), 0);
  double host_drop_mib = (static_cast<double>(before.f_bavail) - after.f_bavail) * before.f_frsize / (1 << 20);
  EXPECT_LT(host_drop_mib, 20) << "host disk shrank by " << host_drop_mib << " MiB";
}

TEST(BoxHostileTest, HostEnvironmentAndFilesStayOut) {
  ::setenv("CODEBOX_TEST_SECRET", "hunter2-secret", 1);
  std::string host_file = ::testing::TempDir() + "/codebox_host_only_" + std::to_string(::getpid());
  FILE* f = std::fopen(host_file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("host only", f);
  std::fclose(f);
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  auto r = box->Exec({"sh", "-c", "env; cat /proc/1/environ; ls " + host_file + " 2>&1; hostname"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data.find("hunter2-secret"), std::string::npos);
  EXPECT_NE(r->stdout_data.find("No such file"), std::string::npos) << r->stdout_data;
  EXPECT_NE(r->stdout_data.find("codebox"), std::string::npos);
  ::unsetenv("CODEBOX_TEST_SECRET");
  std::remove(host_file.c_str());
}

TEST(BoxHostileTest, NoNetworkEvenToTheHostsLoopback) {
  auto server = testing::ListenOnLoopback();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  int port = server->port;
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  auto r = box->RunPython(
      "import socket\ntry:\n    socket.create_connection(('127.0.0.1', " + std::to_string(port) +
      "), timeout=2)\n    print('CONNECTED')\nexcept OSError as e:\n    print('refused', e)\n"
      "import os\nprint(sorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') else 'nosys')\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data.find("CONNECTED"), std::string::npos) << r->stdout_data;
  EXPECT_NE(r->stdout_data.find("refused"), std::string::npos) << r->stdout_data;
}

TEST(BoxHostileTest, KillEverythingInsideGivesAClearAnswer) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  auto r = box->Exec({"sh", "-c", "kill -9 -1; sleep 1; echo still here"});
  // Either the box survived (the agent is PID 1 and immune to kill -1) and reports the exec,
  // or it ended and says so. Never a hang or a crash of this process.
  if (r.ok()) {
    auto after = box->Run("print('alive')");
    if (after.ok()) {
      EXPECT_EQ(*after, "alive\n");
    } else {
      EXPECT_EQ(after.status().code(), StatusCode::kBoxCrashed) << after.status().ToString();
    }
  } else {
    EXPECT_EQ(r.status().code(), StatusCode::kBoxCrashed) << r.status().ToString();
  }
}

TEST(BoxHostileTest, DaemonsDieWithTheBox) {
  const std::string marker = "4242.0" + std::to_string(::getpid());
  {
    CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
    auto r = box->Exec({"sh", "-c", "setsid sleep " + marker + " >/dev/null 2>&1 < /dev/null & echo started"});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->stdout_data, "started\n");
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(testing::CountHostProcesses(marker), 1) << "the daemon should run while the box lives";
  }
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(testing::CountHostProcesses(marker), 0) << "a daemon outlived its box";
}

// /tmp entries this process's boxes could have left: codebox names what it makes with its
// maker's owner tag (pid and start time, so `codebox gc` can tell whose it is). Other tests,
// which ctest runs beside this one, make and remove codebox* entries of their own there.
int CountOurTmpEntries() { return testing::CountDirEntriesContaining("/tmp", base::OwnerTag()); }

TEST(BoxHostileTest, TwoHundredBoxesLeaveNothingBehind) {
  {  // warm up lazily created state (probes, caches) before counting
    CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  }
  int fds = testing::CountOpenFds();
  int procs = testing::CountOurBoxProcesses();
  int cgroups = testing::CountOurCgroups();
  // Jail staging directories live under /run/codebox-jail (root) or /tmp/codebox-jail-UID,
  // named by jail id (counted below); anything else codebox makes carries its owner tag.
  int tmp = CountOurTmpEntries();
  int run = testing::CountDirEntries("/run/codebox-jail", testing::OurJailIdPrefix());
  for (int i = 0; i < 200; ++i) {
    auto box = Box::Create(TestBoxOptions());
    ASSERT_TRUE(box.ok()) << "box " << i << ": " << box.status().ToString();
    if (i % 50 == 0) {
      auto r = (*box)->Run("print(1)");
      ASSERT_TRUE(r.ok());
    }
    if (i == 0) {  // the counters do see a live box, so equal counts below mean something
      EXPECT_GT(testing::CountOurBoxProcesses(), procs);
      EXPECT_GT(testing::CountDirEntries("/run/codebox-jail", testing::OurJailIdPrefix()), run);
      if (::geteuid() == 0) {
        EXPECT_GT(testing::CountOurCgroups(), cgroups);
      }
    }
  }
  EXPECT_EQ(testing::CountOpenFds(), fds);
  EXPECT_EQ(testing::CountOurBoxProcesses(), procs);
  EXPECT_EQ(testing::CountOurCgroups(), cgroups);
  EXPECT_EQ(CountOurTmpEntries(), tmp);
  EXPECT_EQ(testing::CountDirEntries("/run/codebox-jail", testing::OurJailIdPrefix()), run);
}

}  // namespace
}  // namespace codebox
