#include "base/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "base/fs.h"
#include "base/io.h"

namespace codebox::base {
namespace {

using std::chrono::milliseconds;

Command Cmd(std::vector<std::string> argv) {
  Command command;
  command.argv = std::move(argv);
  return command;
}
Command Sh(const std::string& script) { return Cmd({"sh", "-c", script}); }

// Running, not a zombie waiting for init to reap it.
bool Running(pid_t pid) {
  auto stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return false;
  size_t paren = stat->rfind(')');
  return paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] != 'Z';
}

TEST(SubprocessTest, ReportsExitCodesAndSignals) {
  auto exited = base::Run(Sh("exit 3"));
  ASSERT_TRUE(exited.ok()) << exited.status().ToString();
  EXPECT_EQ(exited->exit_code, 3);
  EXPECT_FALSE(exited->ok());
  EXPECT_EQ(exited->Describe(), "exited with status 3");

  auto killed = base::Run(Sh("kill -TERM $$"));
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(killed->signal, SIGTERM);
  EXPECT_EQ(killed->exit_code, -1);
  EXPECT_EQ(base::Run(Sh("true"))->exit_code, 0);
}

TEST(SubprocessTest, CapturesStdoutAndPassesStderrLinesOn) {
  std::vector<std::string> lines;
  RunOptions options;
  options.on_line = [&](const std::string& l) { lines.push_back(l); };
  auto r =
      base::Run(Sh("echo out; echo 'err 1' >&2; printf 'err 2\\r\\n' >&2; echo out2"), options);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "out\nout2\n");
  EXPECT_EQ(lines, (std::vector<std::string>{"err 1", "err 2"}));

  // Not captured: both streams arrive as lines, in the order written.
  lines.clear();
  options.capture_stdout = false;
  options.tail_lines = 2;
  r = base::Run(Sh("echo a; echo b >&2; echo c; printf 'no newline'"), options);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "");
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "b", "c", "no newline"}));
  EXPECT_EQ(r->tail, (std::deque<std::string>{"c", "no newline"}));
}

TEST(SubprocessTest, StdoutBeyondTheCapIsDroppedAndCheckedRunsSayWhy) {
  RunOptions options;
  options.max_output_bytes = 1000;
  auto r = base::Run(Sh("head -c 300000 /dev/zero"), options);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << "the child must not block on a full pipe";
  EXPECT_EQ(r->out.size(), 1000u);
  EXPECT_TRUE(r->out_truncated);
  EXPECT_EQ(RunChecked(Sh("head -c 300000 /dev/zero"), options).status().code(),
            StatusCode::kLimitExceeded);

  auto failing = RunChecked(Sh("echo boom >&2; exit 3"));
  ASSERT_FALSE(failing.ok());
  EXPECT_NE(failing.status().message().find("sh exited with status 3; last output:\n    boom"),
            std::string::npos)
      << failing.status().message();
}

TEST(SubprocessTest, TheDeadlineKillsTheWholeSession) {
  RunOptions options;
  options.timeout = milliseconds(300);
  Command command = Sh("sleep 30 & echo $! ; sleep 30");
  command.new_session = true;
  auto start = std::chrono::steady_clock::now();
  auto r = base::Run(command, options);
  ASSERT_TRUE(r.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_NE(r->Describe().find("deadline of 300 ms"), std::string::npos) << r->Describe();
  pid_t grandchild = std::atoi(r->out.c_str());
  ASSERT_GT(grandchild, 0);
  // Killed with its group (SIGKILL is delivered at once, but give it a moment to die).
  for (int i = 0; i < 100 && Running(grandchild); ++i) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_FALSE(Running(grandchild)) << "the background sleep survived";
}

TEST(SubprocessTest, ADescendantHoldingThePipeIsNotWaitedFor) {
  auto start = std::chrono::steady_clock::now();
  auto r = base::Run(Sh("sleep 3 & echo done"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "done\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2500));
}

TEST(SubprocessTest, PlacesTheNamedFdsAndClosesEveryOther) {
  int a[2], b[2];
  ASSERT_EQ(::pipe2(a, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(b, O_CLOEXEC), 0);
  // Above 20, so that the dup2s below never land on one of the pipes (a test runner may leave
  // fds open, so the pipes can get numbers as high as 7 or 8).
  for (int* fd : {&a[0], &a[1], &b[0], &b[1]}) {
    int high = ::fcntl(*fd, F_DUPFD_CLOEXEC, 20);
    ASSERT_GE(high, 20);
    ::close(*fd);
    *fd = high;
  }
  // Swapped numbers: a naive dup2 sequence would clobber one source with the other. (sh
  // redirects single-digit fds only.)
  ASSERT_EQ(::dup2(a[1], 7), 7);
  ASSERT_EQ(::dup2(b[1], 8), 8);
  int leak = ::dup2(a[0], 57);  // not CLOEXEC on purpose: must still not reach the child
  Command command = Sh("echo one >&8; echo two >&7; ls /proc/self/fd");
  command.fds = {{7, 8}, {8, 7}};
  auto r = base::Run(command);
  for (int fd : {a[1], b[1], 7, 8}) ::close(fd);
  ASSERT_TRUE(r.ok());
  char buf[16] = {};
  ASSERT_EQ(::read(a[0], buf, sizeof buf), 4);
  EXPECT_STREQ(buf, "one\n");
  ASSERT_EQ(::read(b[0], buf, sizeof buf), 4);
  EXPECT_STREQ(buf, "two\n");
  // 0, 1, 2, 7, 8 and the directory ls itself opens; nothing of ours.
  EXPECT_EQ(r->out.find("\n" + std::to_string(leak) + "\n"), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("\n7\n8\n"), std::string::npos) << r->out;
  EXPECT_EQ(r->out.substr(0, 6), "0\n1\n2\n");
  EXPECT_EQ(std::count(r->out.begin(), r->out.end(), '\n'), 6) << r->out;
  for (int fd : {a[0], b[0], leak}) ::close(fd);

  Command twice = Cmd({"true"});
  twice.fds = {{0, 3}, {1, 3}};
  EXPECT_EQ(Spawn(twice).status().code(), StatusCode::kInvalidArgument);
}

TEST(SubprocessTest, TheChildGetsOnlyTheGivenEnvironment) {
  ::setenv("CODEBOX_SECRET_FOR_TEST", "sk-123", 1);
  auto tool = base::Run(Cmd({"env"}));
  ASSERT_TRUE(tool.ok());
  EXPECT_EQ(tool->out, "PATH=" + std::string(kToolPath) + "\nLC_ALL=C\nLANG=C\n");
  Command given_env = Cmd({"/usr/bin/env"});
  given_env.env = {"ONLY=this"};
  auto given = base::Run(given_env);
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->out, "ONLY=this\n");
  ::unsetenv("CODEBOX_SECRET_FOR_TEST");
}

TEST(SubprocessTest, SignalStateIsResetAndTheFileSizeLimitFailsWrites) {
  struct sigaction ignore = {}, old_int = {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &old_int);
  sigset_t usr1, old_mask;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ::pthread_sigmask(SIG_BLOCK, &usr1, &old_mask);
  auto r = base::Run(Sh("grep -E '^Sig(Blk|Ign)' /proc/self/status"));
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::sigaction(SIGINT, &old_int, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");

  auto dir = MakeTempDir("/tmp", "subprocess_test_");
  ASSERT_TRUE(dir.ok());
  Command big = Sh("head -c 10000 /dev/zero > f");
  big.cwd = *dir;
  big.max_file_bytes = 1000;
  auto capped = base::Run(big);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->signal, 0) << "SIGXFSZ must not kill it";
  EXPECT_NE(capped->exit_code, 0);
  struct stat st;
  ASSERT_EQ(::stat((*dir + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1000);
  EXPECT_TRUE(RemoveTree(*dir).ok());
}

TEST(SubprocessTest, AProgramThatCannotRunIsNamedWithTheReason) {
  auto missing = Spawn(Cmd({"definitely-not-a-program-xyz"}));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("definitely-not-a-program-xyz"), std::string::npos);

  auto dir = MakeTempDir("/tmp", "subprocess_test_");
  ASSERT_TRUE(dir.ok());
  std::string plain = *dir + "/plain";
  ASSERT_TRUE(WriteFile(plain, "data").ok());
  ::chmod(plain.c_str(), 0644);
  auto not_executable = Spawn(Cmd({plain}));
  EXPECT_TRUE(RemoveTree(*dir).ok());
  ASSERT_FALSE(not_executable.ok());
  EXPECT_NE(not_executable.status().message().find("could not run " + plain), std::string::npos)
      << not_executable.status().message();
  EXPECT_NE(not_executable.status().message().find("Permission denied"), std::string::npos);

  Command in_missing_dir = Cmd({"true"});
  in_missing_dir.cwd = "/nonexistent-dir";
  auto bad_cwd = Spawn(in_missing_dir);
  ASSERT_FALSE(bad_cwd.ok());
  EXPECT_NE(bad_cwd.status().message().find("/nonexistent-dir"), std::string::npos)
      << bad_cwd.status().message();
  // The failed child was reaped: nothing is left to wait for.
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(SubprocessTest, ParentDeathSignalFiresWhenTheSpawningThreadEnds) {
  StatusOr<pid_t> pid = Internal("not spawned");
  std::thread([&] {
    Command command = Cmd({"sleep", "30"});
    command.parent_death_signal = SIGKILL;
    pid = Spawn(command);
  }).join();
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  int status = 0;
  ASSERT_EQ(::waitpid(*pid, &status, 0), *pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST(SubprocessTest, ParentDeathSignalFiresWhenTheParentProcessIsKilled) {
  int report[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
  pid_t parent = ::fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    Command command = Cmd({"sleep", "30"});
    command.parent_death_signal = SIGKILL;
    auto pid = Spawn(command);
    pid_t child = pid.ok() ? *pid : -1;
    (void)!::write(report[1], &child, sizeof child);
    ::pause();
    ::_exit(0);
  }
  ::close(report[1]);
  pid_t child = -1;
  ASSERT_EQ(::read(report[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  ::close(report[0]);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(Running(child));
  ::kill(parent, SIGKILL);
  ::waitpid(parent, nullptr, 0);
  for (int i = 0; i < 100 && Running(child); ++i) std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(Running(child)) << "the child outlived its SIGKILLed parent";
}

TEST(SubprocessTest, ManyThreadsSpawnAtOnce) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        auto r = base::Run(Sh("echo x"));
        if (r.ok() && r->out == "x\n") ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 80);
}

}  // namespace
}  // namespace codebox::base
