// Programs on a terminal in a real jail box (Box::Start with ExecOptions::tty): the agent makes
// the pseudo-terminal in the box's own devpts; what the program does with it (hold it open
// after it ended, flood it) cannot hold the result back or grow the host's memory.
#include <signal.h>

#include <chrono>
#include <regex>
#include <string>

#include "testing/box_test_util.h"
#include "tests/common/seen_output.h"

namespace codebox {
namespace {

using namespace std::chrono_literals;
using testing::SeenOutput;
using testing::TestBoxOptions;
using Clock = std::chrono::steady_clock;

TEST(BoxTtyTest, AProgramInAJailGetsATerminalOfItsBoxThatFollowsResizesAndCtrlC) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  SeenOutput seen;
  ExecOptions exec;
  exec.env["TERM"] = "xterm";
  exec.tty = TerminalSize{33, 101};
  exec.on_stdout = seen.Sink();
  // sh, not bash: bash ignores a SIGINT that reaches it while a child it waits for exits
  // normally (its "wait and cooperative exit"), so Ctrl-C between two sleeps would be lost.
  auto process = box->Start({"sh", "-c",
                             "tty; stty size; [ -t 0 ] && [ -t 2 ] && echo all-tty; "
                             "trap 'stty size' WINCH; echo ready; while :; do sleep 0.05; done"},
                            exec);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  ASSERT_TRUE(seen.WaitFor("ready"));
  ASSERT_TRUE((*process)->Resize({40, 120}).ok());
  ASSERT_TRUE(seen.WaitFor("40 120"));
  ASSERT_TRUE((*process)->WriteStdin("\x03").ok());
  auto r = (*process)->Wait();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->signal, SIGINT) << r->stdout_data;
  EXPECT_TRUE(std::regex_search(r->stdout_data,
                                std::regex("^/dev/pts/[0-9]+\r\n33 101\r\nall-tty\r\nready\r\n")))
      << r->stdout_data;
  EXPECT_EQ(r->stderr_data, "");
  EXPECT_EQ(r->driver, "jail");
}

// A background terminal is resized through a handle attached later (E2B's pty.resize comes
// on a request of its own); an attached handle of a program without one is refused.
TEST(BoxTtyTest, AnAttachedHandleResizesABackgroundTerminal) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  SeenOutput seen;
  ExecOptions exec;
  exec.tty = TerminalSize{24, 80};
  exec.background = true;
  exec.on_stdout = seen.Sink();
  auto process = box->Start(
      {"sh", "-c", "trap 'stty size' WINCH; echo ready; while :; do sleep 0.05; done"}, exec);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  ASSERT_TRUE(seen.WaitFor("ready"));
  ExecOptions quiet;
  quiet.keep_output = false;
  auto attached = box->Attach((*process)->pid(), quiet);
  ASSERT_TRUE(attached.ok()) << attached.status().ToString();
  ASSERT_TRUE((*attached)->Resize({30, 100}).ok());
  ASSERT_TRUE(seen.WaitFor("30 100"));
  (*attached)->Detach();
  auto plain = box->Start({"sleep", "30"}, ExecOptions{.background = true});
  ASSERT_TRUE(plain.ok());
  auto plain_attached = box->Attach((*plain)->pid(), quiet);
  ASSERT_TRUE(plain_attached.ok());
  EXPECT_EQ((*plain_attached)->Resize({30, 100}).code(), StatusCode::kInvalidArgument);
  (*plain_attached)->Detach();
  EXPECT_TRUE(box->KillProcess((*plain)->pid()).ok());
  EXPECT_TRUE(box->KillProcess((*process)->pid()).ok());
}

TEST(BoxTtyTest, AProgramCannotHoldItsResultBackByKeepingTheTerminalOpen) {
  CODEBOX_MAKE_BOX_OR_SKIP(box, TestBoxOptions());
  ExecOptions exec;
  exec.tty = TerminalSize{};
  exec.timeout = 60s;
  auto start = Clock::now();
  // A daemon that escaped the session keeps the terminal open (and writes to it) forever.
  auto r = box->Exec({"sh", "-c",
                      "t=$(tty); setsid sh -c 'while :; do echo still-here; sleep 0.01; done' "
                      "</dev/null >$t 2>&1 & sleep 0.2; echo bye"},
                     exec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LT(Clock::now() - start, 10s) << "the open terminal held the result back";
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_FALSE(r->timed_out);
  EXPECT_NE(r->stdout_data.find("bye\r\n"), std::string::npos) << r->stdout_data;
  // It did hold the terminal: its lines came while the program ran.
  EXPECT_NE(r->stdout_data.find("still-here\r\n"), std::string::npos) << r->stdout_data;
  auto next = box->Exec({"true"});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
}

TEST(BoxTtyTest, AFloodOnTheTerminalIsCutAtTheOutputLimit) {
  BoxOptions options = TestBoxOptions();
  options.output_limit_bytes = 64 << 10;
  CODEBOX_MAKE_BOX_OR_SKIP(box, options);
  ExecOptions exec;
  exec.tty = TerminalSize{};
  exec.timeout = 60s;
  auto r =
      box->Exec({"sh", "-c", "head -c 20000000 /dev/zero | tr '\\0' x; echo; echo done"}, exec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_TRUE(r->output_truncated);
  EXPECT_EQ(r->stdout_data.size(), 64u << 10);
}

}  // namespace
}  // namespace codebox
