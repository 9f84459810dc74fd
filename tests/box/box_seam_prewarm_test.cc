// Box::Prewarm through the BoxEnv seam: the agent's own code in a child of the test, so the
// waiting python3 is the host's. Checks what needs a tampering relay or a short idle deadline:
// an idle waiter is never ended by the idle deadline, a waiter whose markers are forged is not
// trusted (the program runs cold), and a warm run whose exit never comes ends within its
// deadline.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "seam_fixture.h"

namespace codebox::testing {
namespace {

using protocol::FrameType;

int ParentOf(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  char state;
  int ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

bool DescendsFromUs(std::string pid) {
  for (int depth = 0; depth < 64; ++depth) {
    int parent = ParentOf(pid);
    if (parent <= 1) return false;
    if (parent == ::getpid()) return true;
    pid = std::to_string(parent);
  }
  return false;
}

// Pids of this test's waiting python3s (its descendants running warm_python.py; other
// programs' boxes on the machine have theirs).
std::vector<std::string> WaiterPids() {
  std::vector<std::string> pids;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return pids;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in("/proc/" + name + "/cmdline");
    std::stringstream cmd;
    cmd << in.rdbuf();
    if (cmd.str().find("_codebox_warm") != std::string::npos && DescendsFromUs(name)) {
      pids.push_back(name);
    }
  }
  ::closedir(d);
  return pids;
}

// Waits up to 5 s for the waiter count to become `n`.
bool WaitForWaiters(size_t n) {
  for (int i = 0; i < 100 && WaiterPids().size() != n; ++i) std::this_thread::sleep_for(50ms);
  return WaiterPids().size() == n;
}

// Rewrites stdout frames to the host that hold `marker` (the waiter's own words).
Tamper ForgeStdout(std::string marker) {
  return [marker](Direction dir, protocol::Frame& f) {
    if (dir == Direction::kToHost && f.type == FrameType::kStdout &&
        f.payload.find(marker) != std::string::npos) {
      f.payload = "forged";
    }
    return Verdict::kForward;
  };
}

TEST_F(SeamTest, AnIdleWaiterOutlivesTheIdleDeadlineAndRunsTheProgram) {
  env_.idle = 300ms;
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ASSERT_TRUE(box->Prewarm().ok());
  std::this_thread::sleep_for(1500ms);  // five idle periods without a frame
  std::vector<std::string> waiters = WaiterPids();
  ASSERT_EQ(waiters.size(), 1u);
  auto r = box->RunPython("import os, time; time.sleep(0.8); print(os.getpid())");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, waiters[0] + "\n") << r->stderr_data;
  EXPECT_TRUE(WaitForWaiters(0));
}

TEST_F(SeamTest, AForgedReadyMarkerFailsPrewarmAndTheProgramRunsCold) {
  env_.tamper = ForgeStdout("codebox-warm:ready");
  auto box = Create();
  ASSERT_NE(box, nullptr);
  Status st = box->Prewarm();
  EXPECT_EQ(st.code(), StatusCode::kStartFailed) << st.ToString();
  EXPECT_NE(st.message().find("wrote to stdout during its start-up"), std::string::npos)
      << st.message();
  EXPECT_TRUE(WaitForWaiters(0)) << "the untrusted waiter was killed";
  auto r = box->RunPython("print(1)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "1\n");
}

TEST_F(SeamTest, AForgedAckMakesTheProgramRunCold) {
  env_.tamper = ForgeStdout("codebox-warm:ack");
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ASSERT_TRUE(box->Prewarm().ok());
  auto r = box->RunPython("import sys; print(1); sys.exit(4)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "1\n") << "nothing of the untrusted waiter is in the result";
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_TRUE(WaitForWaiters(0));
}

TEST_F(SeamTest, AnOomKillSinceThePrewarmMakesTheProgramRunCold) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ASSERT_TRUE(box->Prewarm().ok());
  std::vector<std::string> waiters = WaiterPids();
  ASSERT_EQ(waiters.size(), 1u);
  state().oom_kills++;  // the agent's OOM count of the waiter's exec starts before this one
  auto r = box->RunPython("import os; print(os.getpid())");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->stdout_data, waiters[0] + "\n");
  EXPECT_FALSE(r->out_of_memory);
  EXPECT_TRUE(WaitForWaiters(0)) << "the stale waiter was killed";
}

TEST_F(SeamTest, AWarmRunWhoseExitNeverComesEndsWithinItsDeadline) {
  auto armed = std::make_shared<std::atomic<bool>>(false);
  env_.tamper = [armed](Direction dir, protocol::Frame& f) {
    return *armed && dir == Direction::kToHost && EventOf(f) == "exit" ? Verdict::kDrop
                                                                       : Verdict::kForward;
  };
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ASSERT_TRUE(box->Prewarm().ok());
  *armed = true;
  auto start = Clock::now();
  auto r =
      box->RunPython("import time; print('x', flush=True); time.sleep(60)", WithTimeout(500ms));
  double took = Seconds(start);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_GT(took, 5.0) << "the kill's exit was awaited";
  EXPECT_LT(took, 15.0) << "and not forever";
  start = Clock::now();
  EXPECT_TRUE(box->Destroy().ok());
  box.reset();  // joins the abandoned waiter's thread: the connection is gone
  EXPECT_LT(Seconds(start), 5.0);
}

}  // namespace
}  // namespace codebox::testing
