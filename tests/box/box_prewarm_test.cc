// Box::Prewarm in jail boxes: a program handed to the waiting python3 gives the result a cold
// `python3 -c` gives (the same snippets run both ways and compared), the waiter's death or
// hostile programs fall back or end within their deadlines, and the prewarmed kernel answers
// the first cell.
#include <dirent.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "testing/box_test_util.h"
#include "tests/box/kernel_test_util.h"

namespace codebox {
namespace {

using namespace std::chrono_literals;

// The bracket keeps grep from matching its own command line.
constexpr char kWaiterPattern[] = "_codebox_war[m]";
constexpr char kKernelPattern[] = "code-interpreter kerne[l]";

// Pids of the box's processes whose command line matches `pattern` (a grep pattern).
std::vector<std::string> BoxPids(Box& box, const std::string& pattern) {
  auto r = box.Exec(
      {"sh", "-c", "grep -l -a '" + pattern + "' /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3"});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> pids;
  if (!r.ok()) return pids;
  size_t start = 0;
  for (size_t end; (end = r->stdout_data.find('\n', start)) != std::string::npos; start = end + 1) {
    pids.push_back(r->stdout_data.substr(start, end - start));
  }
  return pids;
}

void KillWaiters(Box& box) {
  auto r = box.Exec({"sh", "-c",
                     std::string("for p in $(grep -l -a '") + kWaiterPattern +
                         "' /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do kill -9 $p; done"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->exit_code, 0) << r->stderr_data;
}

std::string Describe(const ExecResult& r) {
  return "exit " + std::to_string(r.exit_code) + " signal " + std::to_string(r.signal) +
         " timed_out " + std::to_string(r.timed_out) + " oom " + std::to_string(r.out_of_memory) +
         " truncated " + std::to_string(r.output_truncated) + "\nstdout (" +
         std::to_string(r.stdout_data.size()) + " bytes): " + r.stdout_data.substr(0, 600) +
         "\nstderr (" + std::to_string(r.stderr_data.size()) +
         " bytes): " + r.stderr_data.substr(0, 600);
}

void ExpectSameResult(const ExecResult& warm, const ExecResult& cold, const std::string& what) {
  EXPECT_EQ(warm.exit_code, cold.exit_code) << what;
  EXPECT_EQ(warm.signal, cold.signal) << what;
  EXPECT_EQ(warm.stdout_data, cold.stdout_data) << what;
  EXPECT_EQ(warm.stderr_data, cold.stderr_data) << what;
  EXPECT_EQ(warm.timed_out, cold.timed_out) << what;
  EXPECT_EQ(warm.out_of_memory, cold.out_of_memory) << what;
  EXPECT_EQ(warm.output_truncated, cold.output_truncated) << what;
  EXPECT_EQ(warm.driver, cold.driver) << what;
}

// What the interpreter's start-up made of fd 0.
constexpr char kStdinObject[] =
    "import sys\ns = sys.stdin\n"
    "print(s.seekable(), s.buffer.raw.name, s is sys.__stdin__, s.mode, s.line_buffering,\n"
    "      s.write_through, s.encoding, s.errors, s.newlines, type(s.buffer).__name__)\n"
    "print(s.tell() if s.seekable() else 'no tell', repr(s.read()))";

struct Snippet {
  std::string name;
  std::string code;
  ExecOptions options;
};

class PrewarmTest : public ::testing::Test {
 protected:
  static BoxOptions Options() {
    BoxOptions options = testing::TestBoxOptions();
    options.image = "python";
    return options;
  }

  // Runs `s` through a freshly prewarmed python3 (checking that it took it) and then cold.
  void Compare(Box& box, const Snippet& s) {
    ASSERT_TRUE(box.Prewarm().ok());
    ASSERT_EQ(BoxPids(box, kWaiterPattern).size(), 1u) << s.name << ": one python3 waits";
    auto warm = box.RunPython(s.code, s.options);
    ASSERT_TRUE(warm.ok()) << s.name << ": " << warm.status().ToString();
    EXPECT_EQ(BoxPids(box, kWaiterPattern).size(), 0u) << s.name << ": the waiter ran it";
    auto cold = box.RunPython(s.code, s.options);
    ASSERT_TRUE(cold.ok()) << s.name << ": " << cold.status().ToString();
    ExpectSameResult(*warm, *cold,
                     s.name + "\n--- warm: " + Describe(*warm) + "\n--- cold: " + Describe(*cold));
  }
};

TEST_F(PrewarmTest, TheWaitingPythonRunsTheProgram) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  ASSERT_TRUE(box->Prewarm().ok());
  std::vector<std::string> waiters = BoxPids(*box, kWaiterPattern);
  ASSERT_EQ(waiters.size(), 1u);
  auto r = box->RunPython("import os; print(os.getpid())");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, waiters[0] + "\n") << "the program ran in the waiting python3";
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->driver, "jail");
  // Used once: the next program starts its own python3.
  auto again = box->RunPython("import os; print(os.getpid())");
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->stdout_data, waiters[0] + "\n");
  EXPECT_EQ(again->exit_code, 0);
}

TEST_F(PrewarmTest, WarmAndColdGiveTheSameResults) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  ASSERT_TRUE(box->Exec({"mkdir", "-p", "sub/dir"}).ok());
  std::vector<Snippet> snippets = {
      {"print", "print('hello')", {}},
      {"stdout and stderr", "import sys\nprint('out')\nprint('err', file=sys.stderr)", {}},
      {"exit 3", "import sys; sys.exit(3)", {}},
      {"exit with a message", "import sys; sys.exit('bye')", {}},
      {"raise", "def f():\n    raise ValueError('boom')\nprint('before')\nf()", {}},
      {"chained", "try:\n    1/0\nexcept Exception as e:\n    raise KeyError('k') from e", {}},
      {"syntax error", "x = (", {}},
      {"keyboard interrupt", "raise KeyboardInterrupt", {}},
      {"excepthook",
       "import sys\nsys.excepthook = lambda t, v, tb: print('hook', t.__name__)\n1/0",
       {}},
      {"atexit after an exception", "import atexit; atexit.register(print, 'bye'); 1/0", {}},
      {"argv, name, globals, orig_argv",
       "import sys\nprint(sys.argv, __name__, sorted(globals()), sys.orig_argv[:2])",
       {}},
      {"modules", "import sys; print(sorted(sys.modules))", {}},
      {"stdin", "print(input()); print(input())", {.stdin_data = "a\nb\n"}},
      {"stdin read whole",
       "import sys; print(repr(sys.stdin.buffer.read()))",
       {.stdin_data = std::string("x\0y", 3)}},
      {"stdin object", kStdinObject, {}},
      {"stdin object with stdin", kStdinObject, {.stdin_data = "z"}},
      {"no stdin", "import os, sys; print(os.read(0, 10)); input()", {}},
      {"env",
       "import os; print(os.environ['FOO'], sorted(os.environ))",
       {.env = {{"FOO", "bar baz"}, {"EMPTY", ""}}}},
      {"env order", "import os, sys; print(list(os.environ)); os.system('env')",
       {.env = {{"ZZZ", "1"}, {"AAA", "2"}, {"MMM", "3"}}}},
      {"relative cwd",
       "import os; print(os.getcwd()); print(open('../../x', 'w') and 1)",
       {.cwd = "sub/dir"}},
      {"absolute cwd", "import os; print(os.getcwd())", {.cwd = "/tmp"}},
      {"missing cwd", "print(1)", {.cwd = "/nonexistent"}},
      {"timeout", "import time; print('start', flush=True); time.sleep(30)", {.timeout = 1s}},
      {"unicode",
       "print('h\\u00e9llo \\u2713'); print('\\udcff'.encode('utf-8', 'surrogateescape'))",
       {}},
      {"raw bytes", "import os; os.write(1, b'\\xff\\xfe\\0'); os.write(2, b'\\x80')", {}},
      {"marker bytes of its own",
       "import os; os.write(1, b'\\0codebox-warm:ack\\0'); os.write(1, "
       "b'\\0codebox-warm:ready\\0')",
       {}},
      {"no newline", "import sys; sys.stdout.write('partial')", {}},
      {"killed by itself", "import os; print('x', flush=True); os.kill(os.getpid(), 9)", {}},
      {"thread after an exception",
       "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.2), "
       "print('thread'))).start()\n1/0",
       {}},
      {"frames", "import sys, traceback\ndef f():\n    traceback.print_stack(limit=1)\nf()", {}},
  };
  for (const Snippet& s : snippets) Compare(*box, s);
}

TEST_F(PrewarmTest, HostileProgramsGiveTheColdResult) {
  BoxOptions options = Options();
  options.output_limit_bytes = 64 << 10;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  std::vector<Snippet> snippets = {
      {"stdout over the limit", "import sys\nfor i in range(20000): print(i)", {}},
      {"stderr over the limit", "import sys\nsys.stderr.write('e' * 300000)", {}},
      {"flood until the timeout",
       "import os\nwhile True: os.write(1, b'x' * 65536); os.write(2, b'y' * 65536)",
       {.timeout = 1s}},
      {"closes 0, 1 and 2", "import os\nfor fd in (0, 1, 2): os.close(fd)\nprint('lost')", {}},
      {"closes stdout, then raises", "import os; os.close(1); 1/0", {}},
      {"dup2 /dev/null over 1 and 2",
       "import os\nn = os.open('/dev/null', os.O_WRONLY)\nos.dup2(n, 1); os.dup2(n, 2)\n"
       "print('gone'); 1/0",
       {}},
      {"closes stdin and reads", "import os; os.close(0); input()", {.stdin_data = "data\n"}},
      {"closes stdout and hangs",
       "import os, time; os.close(1); os.close(2); time.sleep(60)",
       {.timeout = 1s}},
      {"a daemon keeps stdout open",
       "import os\nif os.fork() == 0:\n    os.setsid()\n"
       "    os.execvp('sh', ['sh', '-c', 'sleep 3; echo late'])\nprint('parent', flush=True)",
       {}},
      {"ignores SIGTERM and SIGINT",
       "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
       "signal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('x', flush=True)\ntime.sleep(60)",
       {.timeout = 1s}},
  };
  for (const Snippet& s : snippets) {
    auto start = std::chrono::steady_clock::now();
    Compare(*box, s);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << s.name << ": bounded";
  }
}

TEST_F(PrewarmTest, AWaiterKilledFromInsideTheBoxFallsBackToColdPython) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  for (int round = 0; round < 5; ++round) {
    ASSERT_TRUE(box->Prewarm().ok());
    KillWaiters(*box);
    // Its exit may not have reached the host yet: either way the program runs, once.
    auto r = box->RunPython("print('ran')");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_data, "ran\n") << Describe(*r);
    EXPECT_EQ(r->exit_code, 0);
  }
  // After a pause the host surely saw the exit.
  ASSERT_TRUE(box->Prewarm().ok());
  KillWaiters(*box);
  std::this_thread::sleep_for(300ms);
  auto r = box->RunPython("print('ran')");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "ran\n");
}

TEST_F(PrewarmTest, TheTimeoutCountsFromTheHandOverAndIsReported) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  ASSERT_TRUE(box->Prewarm().ok());
  std::this_thread::sleep_for(1500ms);  // waiting is not running: none of it counts
  auto start = std::chrono::steady_clock::now();
  auto r = box->RunPython("import time; time.sleep(0.5); print('slept')", {.timeout = 1200ms});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->timed_out) << Describe(*r);
  EXPECT_EQ(r->stdout_data, "slept\n");
  ASSERT_TRUE(box->Prewarm().ok());
  start = std::chrono::steady_clock::now();
  r = box->RunPython("import time\nwhile True: time.sleep(1)", {.timeout = 1s});
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out) << Describe(*r);
  EXPECT_EQ(r->signal, 9);
  EXPECT_GE(r->duration, 1s);
  EXPECT_LT(took, 5s);
  // No timeout at all works too.
  ASSERT_TRUE(box->Prewarm().ok());
  r = box->RunPython("print(2)", {.timeout = kNoTimeout});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "2\n");
}

TEST_F(PrewarmTest, OutputStreamsAsItComes) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  ASSERT_TRUE(box->Prewarm().ok());
  std::mutex mu;
  std::string out, err;
  std::chrono::steady_clock::time_point first_out{};
  ExecOptions options;
  options.on_stdout = [&](std::string_view b) {
    std::lock_guard<std::mutex> lock(mu);
    if (out.empty()) first_out = std::chrono::steady_clock::now();
    out.append(b);
  };
  options.on_stderr = [&](std::string_view b) {
    std::lock_guard<std::mutex> lock(mu);
    err.append(b);
  };
  auto r = box->RunPython(
      "import sys, time\nprint('a', flush=True)\ntime.sleep(0.6)\nprint('b')\n"
      "print('e', file=sys.stderr)",
      options);
  auto end = std::chrono::steady_clock::now();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(out, "a\nb\n");
  EXPECT_EQ(out, r->stdout_data);
  EXPECT_EQ(err, "e\n");
  EXPECT_GT(end - first_out, 400ms) << "the first chunk came before the program's end";
  // A callback that throws fails the call, as it does for a cold python3.
  ASSERT_TRUE(box->Prewarm().ok());
  ExecOptions throwing;
  throwing.on_stdout = [](std::string_view) { throw std::runtime_error("no"); };
  auto bad = box->RunPython("print(1)", throwing);
  auto bad_cold = box->RunPython("print(1)", throwing);
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(bad_cold.ok());
  EXPECT_EQ(bad.status().code(), bad_cold.status().code());
  auto still = box->Run("print(3)");
  ASSERT_TRUE(still.ok()) << "the box still works: " << still.status().ToString();
  EXPECT_EQ(*still, "3\n");
}

TEST_F(PrewarmTest, StartupVariablesAndHugeProgramsRunColdAndLeaveTheWaiter) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  ASSERT_TRUE(box->Prewarm().ok());
  // PYTHONHASHSEED works only at start-up: the waiter cannot honour it.
  const std::string hash = "print(hash('codebox'))";
  auto seeded = box->RunPython(hash, {.env = {{"PYTHONHASHSEED", "7"}}});
  auto again = box->RunPython(hash, {.env = {{"PYTHONHASHSEED", "7"}}});
  ASSERT_TRUE(seeded.ok() && again.ok());
  EXPECT_EQ(seeded->stdout_data, again->stdout_data) << "both ran with the seed";
  auto path = box->RunPython("import os; print(os.environ['PATH'])", {.env = {{"PATH", "/bin"}}});
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(path->stdout_data, "/bin\n");
  std::string big = "x = 1\n" + std::string(17 << 20, '#') + "\nprint(x)";
  auto huge = box->RunPython(big);
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  EXPECT_EQ(huge->stdout_data, "1\n");
  EXPECT_EQ(BoxPids(*box, kWaiterPattern).size(), 1u) << "still waiting for a program it can run";
  auto plain = box->RunPython("print('warm')");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->stdout_data, "warm\n");
  EXPECT_EQ(BoxPids(*box, kWaiterPattern).size(), 0u);
}

TEST_F(PrewarmTest, ConcurrentRunsTakeTheWaiterOnce) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  ASSERT_TRUE(box->Prewarm().ok());
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto r = box->RunPython("print(" + std::to_string(i) + ")");
      if (r.ok() && r->stdout_data == std::to_string(i) + "\n") ++good;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good, 4);
}

TEST_F(PrewarmTest, OutOfMemoryIsReportedAndAnOomBeforeUseRunsCold) {
  BoxOptions options = Options();
  options.memory_mib = 128;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  const std::string bomb = "x = []\nwhile True: x.append(bytearray(16 << 20))";
  Compare(*box, {"memory bomb", bomb, {}});
  // An OOM kill in the box after the waiter started (maybe of the waiter): the next program
  // runs cold, and right.
  ASSERT_TRUE(box->Prewarm().ok());
  std::vector<std::string> waiters = BoxPids(*box, kWaiterPattern);
  ASSERT_EQ(waiters.size(), 1u);
  auto oom = box->RunPython(bomb, {.env = {{"PYTHONHASHSEED", "1"}}});  // cold: waiter stays
  ASSERT_TRUE(oom.ok());
  if (!oom->out_of_memory) GTEST_SKIP() << "no OOM kill here (rlimit): " << Describe(*oom);
  auto r = box->RunPython("import os; print(os.getpid())");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->stdout_data, waiters[0] + "\n") << "ran cold";
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_FALSE(r->out_of_memory);
  EXPECT_EQ(BoxPids(*box, kWaiterPattern).size(), 0u) << "the stale waiter was ended";
}

TEST_F(PrewarmTest, PrewarmTwiceKeepsOneWaiter) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  ASSERT_TRUE(box->Prewarm().ok());
  ASSERT_TRUE(box->Prewarm().ok());
  std::vector<std::string> waiters = BoxPids(*box, kWaiterPattern);
  ASSERT_EQ(waiters.size(), 1u);
  auto r = box->RunPython("import os; print(os.getpid())");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, waiters[0] + "\n");
  EXPECT_TRUE(box->Prewarm({.python = false, .kernel = false}).ok());
  EXPECT_EQ(BoxPids(*box, kWaiterPattern).size(), 0u) << "nothing asked, nothing started";
}

int CountThreads() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

TEST_F(PrewarmTest, DestroyEndsTheWaiterAndLaterCallsFailClearly) {
  const int threads_before = CountThreads();
  {
    CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
    ASSERT_TRUE(box->Prewarm({.python = true, .kernel = true}).ok());
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(box->Destroy().ok());
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    Status again = box->Prewarm();
    EXPECT_EQ(again.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(again.message().find("destroyed"), std::string::npos) << again.message();
    auto r = box->RunPython("print(1)");
    EXPECT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("destroyed"), std::string::npos);
  }
  EXPECT_EQ(testing::CountOurBoxProcesses(), 0);
  EXPECT_EQ(CountThreads(), threads_before) << "every thread of the box and its waiter ended";
  // Dropping a box with a waiter, without Destroy, is the same.
  {
    CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
    ASSERT_TRUE(box->Prewarm().ok());
  }
  EXPECT_EQ(testing::CountOurBoxProcesses(), 0);
  EXPECT_EQ(CountThreads(), threads_before);
}

TEST_F(PrewarmTest, PrewarmedKernelAnswersTheFirstCellAndKeepsState) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  ASSERT_TRUE(box->Prewarm({.python = false, .kernel = true}).ok());
  std::vector<std::string> kernels = BoxPids(*box, kKernelPattern);
  ASSERT_EQ(kernels.size(), 1u) << "the kernel runs before the first cell";
  EXPECT_EQ(BoxPids(*box, kWaiterPattern).size(), 0u);
  ASSERT_TRUE(box->Prewarm({.python = false, .kernel = true}).ok());
  EXPECT_EQ(BoxPids(*box, kKernelPattern), kernels) << "a second Prewarm keeps that kernel";
  Execution first = testing::RunOk(*box, "import os\nx = 41\nos.getpid()");
  EXPECT_FALSE(first.error) << first.error->value;
  EXPECT_EQ(first.execution_count, 1);
  EXPECT_EQ(first.text(), kernels[0]) << "the cell ran in the prewarmed kernel";
  EXPECT_EQ(testing::RunOk(*box, "x + 1").text(), "42");
}

TEST_F(PrewarmTest, BoxLifetimeEndsAWarmRun) {
  BoxOptions options = Options();
  options.box_timeout = 3s;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  ASSERT_TRUE(box->Prewarm().ok());
  auto start = std::chrono::steady_clock::now();
  auto r = box->RunPython("import time; time.sleep(60)", {.timeout = kNoTimeout});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  // Killed at the lifetime's end (timed out), or the box ended under it: never a hang.
  if (r.ok()) {
    EXPECT_TRUE(r->timed_out) << Describe(*r);
  } else {
    EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  }
}

}  // namespace
}  // namespace codebox
