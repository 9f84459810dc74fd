// Box::RunCode when cells misbehave: timeouts, interrupts, a kernel that dies or is killed,
// cells that attack the kernel's protocol, output floods. Each is reported clearly and the
// next cell works. Jail boxes with the `python` image.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "testing/box_test_util.h"
#include "tests/box/kernel_test_util.h"

namespace codebox {
namespace {

using namespace std::chrono_literals;
using testing::RunOk;

BoxOptions Options() {
  BoxOptions options = testing::TestBoxOptions();
  options.image = "python";
  return options;
}

RunCodeOptions Timeout(std::chrono::milliseconds t) {
  RunCodeOptions o;
  o.timeout = t;
  return o;
}

void ExpectFreshKernel(Box& box) {
  Execution e = RunOk(box, "'x' in globals(), 6 * 7");
  EXPECT_FALSE(e.error) << e.error->value;
  EXPECT_EQ(e.text(), "(False, 42)");
  EXPECT_EQ(e.execution_count, 1);
}

TEST(KernelFaultTest, TimeoutInterruptsAndKeepsState) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  RunOk(*box, "x = 7");
  auto start = std::chrono::steady_clock::now();
  Execution e = RunOk(*box, "import time\nprint('sleeping')\ntime.sleep(60)", Timeout(1s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_TRUE(e.timed_out);
  EXPECT_FALSE(e.kernel_restarted);
  ASSERT_TRUE(e.error.has_value());
  EXPECT_EQ(e.error->name, "KeyboardInterrupt");
  EXPECT_EQ(testing::Joined(e.stdout_chunks), "sleeping\n");
  EXPECT_EQ(RunOk(*box, "x").text(), "7");
}

TEST(KernelFaultTest, ACellIgnoringTheInterruptRestartsTheKernel) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  RunOk(*box, "x = 7");
  auto start = std::chrono::steady_clock::now();
  Execution e = RunOk(*box,
                      "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                      "time.sleep(60)",
                      Timeout(1s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  EXPECT_TRUE(e.timed_out);
  EXPECT_TRUE(e.kernel_restarted);
  ASSERT_TRUE(e.error.has_value());
  EXPECT_EQ(e.error->name, "KernelRestarted");
  EXPECT_EQ(e.error->value.rfind("kernel restarted: state lost", 0), 0u) << e.error->value;
  EXPECT_NE(e.error->value.find("ignored the interrupt"), std::string::npos) << e.error->value;
  ExpectFreshKernel(*box);
}

TEST(KernelFaultTest, OutOfMemoryIsReportedWithTheLimit) {
  BoxOptions options = Options();
  options.memory_mib = 160;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  RunOk(*box, "x = 1");
  Execution e = RunOk(*box, "blocks = []\nwhile True:\n    blocks.append(b'x' * (16 << 20))");
  ASSERT_TRUE(e.error.has_value());
  if (e.error->name == "MemoryError") GTEST_SKIP() << "the box's memory limit raised MemoryError";
  EXPECT_TRUE(e.kernel_restarted);
  EXPECT_TRUE(e.out_of_memory) << e.error->value;
  EXPECT_EQ(e.error->name, "KernelRestarted");
  EXPECT_NE(e.error->value.find("160 MiB"), std::string::npos) << e.error->value;
  ExpectFreshKernel(*box);
}

TEST(KernelFaultTest, ACellsSigintHandlerDoesNotOutliveIt) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  RunOk(*box, "import signal, time\nx = 1\nsignal.signal(signal.SIGINT, signal.SIG_IGN)");
  Execution e = RunOk(*box, "time.sleep(60)", Timeout(1s));
  EXPECT_TRUE(e.timed_out);
  EXPECT_FALSE(e.kernel_restarted) << (e.error ? e.error->value : "");
  EXPECT_EQ(RunOk(*box, "x").text(), "1");
}

TEST(KernelFaultTest, ExitInACellRestartsTheKernel) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  RunOk(*box, "x = 1");
  Execution e = RunOk(*box, "import os\nprint('bye', flush=True)\nos._exit(3)");
  EXPECT_TRUE(e.kernel_restarted);
  EXPECT_FALSE(e.timed_out);
  ASSERT_TRUE(e.error.has_value());
  EXPECT_NE(e.error->value.find("exited with status 3"), std::string::npos) << e.error->value;
  ExpectFreshKernel(*box);
  // exit() is IPython's business: the kernel stays.
  Execution quit = RunOk(*box, "x = 5\nexit()");
  EXPECT_FALSE(quit.kernel_restarted);
  EXPECT_EQ(RunOk(*box, "x").text(), "5");
}

TEST(KernelFaultTest, AKernelThatDiesBetweenCellsIsReported) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  RunOk(*box,
        "import threading, time, os\n"
        "threading.Thread(target=lambda: (time.sleep(0.3), os._exit(9))).start()");
  std::this_thread::sleep_for(1500ms);
  Execution e = RunOk(*box, "1");
  EXPECT_TRUE(e.kernel_restarted);
  ASSERT_TRUE(e.error.has_value());
  EXPECT_NE(e.error->value.find("did not run"), std::string::npos) << e.error->value;
  ExpectFreshKernel(*box);
}

// The protocol fd: the kernel's private, close-on-exec, write-only pipe. A cell finds it as
// any code could.
constexpr char kFindProtocolFd[] =
    "import os, fcntl\n"
    "def protocol_fds():\n"
    "    for fd in range(3, 64):\n"
    "        try:\n"
    "            fl = fcntl.fcntl(fd, fcntl.F_GETFL)\n"
    "        except OSError:\n"
    "            continue\n"
    "        if fl & os.O_ACCMODE == os.O_WRONLY and not os.get_inheritable(fd):\n"
    "            yield fd\n";

TEST(KernelFaultTest, GarbageOnTheProtocolFdRestartsTheKernel) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  RunOk(*box, kFindProtocolFd);
  Execution e = RunOk(*box, "for fd in protocol_fds(): os.write(fd, b'garbage\\n')");
  EXPECT_TRUE(e.kernel_restarted);
  ASSERT_TRUE(e.error.has_value());
  EXPECT_NE(e.error->value.find("kernel sent malformed output"), std::string::npos)
      << e.error->value;
  ExpectFreshKernel(*box);
}

// A bad bundle from the cell's own display() is the cell's mistake, not a broken kernel: the
// kernel drops the value that is not base64 and the session goes on.
TEST(KernelFaultTest, ADisplayedImageThatIsNotBase64IsDroppedNotFatal) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  RunOk(*box, "x = 7");
  Execution e = RunOk(*box,
                      "from IPython.display import display\n"
                      "display({'image/png': 'x y', 'text/plain': 'still here'}, raw=True)");
  EXPECT_FALSE(e.kernel_restarted);
  EXPECT_FALSE(e.error) << e.error->value;
  ASSERT_EQ(e.results.size(), 1u);
  EXPECT_EQ(e.results[0].Get("image/png"), nullptr);
  ASSERT_NE(e.results[0].Get("text/plain"), nullptr);
  EXPECT_EQ(*e.results[0].Get("text/plain"), "still here");
  EXPECT_EQ(RunOk(*box, "x").text(), "7");
}

TEST(KernelFaultTest, AnOversizedLineRestartsTheKernel) {
  BoxOptions options = Options();
  options.output_limit_bytes = 64 << 10;  // lines may be this plus a few MiB
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  RunOk(*box, kFindProtocolFd);
  Execution e = RunOk(*box,
                      "blob = b'{\"type\": \"stream\", \"text\": \"' + b'x' * (16 << 20)\n"
                      "for fd in protocol_fds(): os.write(fd, blob)");
  EXPECT_TRUE(e.kernel_restarted);
  ASSERT_TRUE(e.error.has_value());
  EXPECT_NE(e.error->value.find("longer than"), std::string::npos) << e.error->value;
  ExpectFreshKernel(*box);
}

TEST(KernelFaultTest, OutputPastTheCapIsDropped) {
  BoxOptions options = Options();
  options.output_limit_bytes = 100 << 10;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  Execution e = RunOk(*box,
                      "import sys, subprocess\n"
                      "for i in range(2000): print('y' * 1000)\n"
                      "subprocess.run(['sh', '-c', 'head -c 5000000 /dev/zero | tr \"\\\\0\" z'])\n"
                      "'still here'");
  EXPECT_TRUE(e.output_truncated);
  std::string out = testing::Joined(e.stdout_chunks);
  EXPECT_LE(out.size(), 100u << 10);
  EXPECT_GE(out.size(), 90u << 10);
  EXPECT_EQ(e.text(), "") << "the main result came past the cap";
  // The next cell has its own budget.
  Execution next = RunOk(*box, "print('ok')\n1");
  EXPECT_FALSE(next.output_truncated);
  EXPECT_EQ(testing::Joined(next.stdout_chunks), "ok\n");
  EXPECT_EQ(next.text(), "1");
}

TEST(KernelFaultTest, ACellClosingItsOutputFdsDoesNotBreakTheNext) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  Execution e =
      RunOk(*box, "import os, sys\nprint('a')\nsys.stdout.close()\nos.close(1)\nos.close(2)");
  EXPECT_FALSE(e.kernel_restarted);
  Execution next = RunOk(*box, "import sys\nprint('back')\nprint('err', file=sys.stderr)\n3");
  EXPECT_FALSE(next.kernel_restarted);
  EXPECT_EQ(testing::Joined(next.stdout_chunks), "back\n");
  EXPECT_EQ(testing::Joined(next.stderr_chunks), "err\n");
  EXPECT_EQ(next.text(), "3");
}

TEST(KernelFaultTest, ConcurrentCellsTakeTurns) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  RunOk(*box, "n = 0");
  std::vector<std::thread> threads;
  std::vector<Execution> results(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      // Not atomic if two cells overlapped: the sleep sits between the read and the write.
      results[i] = RunOk(*box, "import time\nm = n\ntime.sleep(0.2)\nn = m + 1\nn");
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> seen;
  std::set<int64_t> counts;
  for (const Execution& e : results) {
    seen.insert(e.text());
    counts.insert(e.execution_count);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"1", "2", "3", "4"}));
  EXPECT_EQ(counts.size(), 4u);
  EXPECT_EQ(RunOk(*box, "n").text(), "4");
}

TEST(KernelFaultTest, RestartKernelDropsState) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  RunOk(*box, "x = 1");
  RunOk(*box, "open('kept.txt', 'w').write('files stay')");
  ASSERT_TRUE(box->RestartKernel().ok());
  ExpectFreshKernel(*box);
  EXPECT_EQ(RunOk(*box, "open('kept.txt').read()").text(), "'files stay'");
  // Restarting with no kernel, or twice, is fine.
  EXPECT_TRUE(box->RestartKernel().ok());
  EXPECT_TRUE(box->RestartKernel().ok());
}

TEST(KernelFaultTest, InterruptCodeFromAnotherThread) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  EXPECT_TRUE(box->InterruptCode().ok()) << "no cell runs: nothing happens";
  RunOk(*box, "x = 3");
  std::atomic<bool> started{false};
  RunCodeOptions options;
  options.on_stdout = [&](std::string_view) { started = true; };
  std::thread interrupter([&] {
    while (!started) std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(box->InterruptCode().ok());
  });
  Execution e = RunOk(*box, "import time\nprint('go', flush=True)\ntime.sleep(60)", options);
  interrupter.join();
  ASSERT_TRUE(e.error.has_value());
  EXPECT_EQ(e.error->name, "KeyboardInterrupt");
  EXPECT_FALSE(e.timed_out);
  EXPECT_FALSE(e.kernel_restarted);
  EXPECT_EQ(RunOk(*box, "x").text(), "3");
}

TEST(KernelFaultTest, AnIdleInterruptDoesNotKillTheKernel) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  std::string pid = RunOk(*box, "import os\nx = 2\nos.getpid()").text();
  ASSERT_FALSE(pid.empty());
  // A SIGINT while no cell runs, as a late timeout or InterruptCode could send.
  auto r = box->Exec({"sh", "-c", "kill -INT " + pid});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  std::this_thread::sleep_for(200ms);
  Execution e = RunOk(*box, "x");
  EXPECT_FALSE(e.kernel_restarted) << (e.error ? e.error->value : "");
  EXPECT_EQ(e.text(), "2");
}

TEST(KernelFaultTest, AnImageWithoutIPythonIsAFailedPrecondition) {
  BoxOptions options = Options();
  options.env["PYTHONPATH"] = "/tmp/no-ipython";
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  // What `import IPython` says where it is not installed.
  ASSERT_TRUE(box->Exec({"sh", "-c",
                         "mkdir -p /tmp/no-ipython/IPython && echo \"raise ImportError(\\\"No "
                         "module named 'IPython'\\\")\" > /tmp/no-ipython/IPython/__init__.py"})
                  .ok());
  auto e = box->RunCode("1");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kFailedPrecondition) << e.status().ToString();
  EXPECT_NE(e.status().message().find("has no IPython"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("python3-ipython"), std::string::npos);
}

TEST(KernelFaultTest, DestroyEndsTheKernelAndLaterCellsFail) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, Options());
  RunOk(*box, "x = 1");
  std::thread runner([&] {
    auto e = box->RunCode("import time\ntime.sleep(60)");
    EXPECT_FALSE(e.ok());
  });
  std::this_thread::sleep_for(500ms);
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(box->Destroy().ok());
  runner.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  auto later = box->RunCode("1");
  ASSERT_FALSE(later.ok());
  EXPECT_NE(later.status().message().find("destroyed"), std::string::npos);
}

TEST(KernelFaultTest, TheBoxLifetimeEndsACellWithoutATimeout) {
  BoxOptions options = Options();
  options.box_timeout = 4s;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  RunOk(*box, "x = 1");
  auto start = std::chrono::steady_clock::now();
  auto e = box->RunCode("import time\ntime.sleep(60)", Timeout(kNoTimeout));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  // Capped at the lifetime, the cell is interrupted first; or the box ends under it.
  if (e.ok()) {
    EXPECT_TRUE(e->timed_out);
  } else {
    EXPECT_EQ(e.status().code(), StatusCode::kDeadlineExceeded) << e.status().ToString();
  }
  auto later = box->RunCode("1");
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.status().code(), StatusCode::kDeadlineExceeded) << later.status().ToString();
}

}  // namespace
}  // namespace codebox
