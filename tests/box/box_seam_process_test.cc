// Box::Start and terminals through the BoxEnv seam: a started process gets exactly what Exec
// gives (the box's environment and cwd, its exec timeout capped by the box's lifetime, the
// output limit, ExecResult::driver), and a terminal when asked. No root, image or jail.
#include <thread>

#include "seam_fixture.h"
#include "tests/common/seen_output.h"

namespace codebox::testing {
namespace {

TEST_F(SeamTest, AStartedProcessGetsWhatExecGivesAndTalksWhileItRuns) {
  options_.env["FROM_BOX"] = "box";
  auto box = Create();
  ASSERT_NE(box, nullptr);
  SeenOutput seen;
  ExecOptions exec = WithEnv("FROM_EXEC", "exec");
  exec.stdin_data = "first\n";
  exec.on_stdout = seen.Sink();
  const std::string script = "pwd; echo $FROM_BOX $FROM_EXEC; while read l; do echo got $l; done";
  auto process = box->Start({"sh", "-c", script}, exec);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  ASSERT_TRUE(seen.WaitFor("got first\n"));
  // Stdin stays open after stdin_data: the program answers each line as it comes.
  ASSERT_TRUE((*process)->WriteStdin("second\n").ok());
  ASSERT_TRUE(seen.WaitFor("got second\n"));
  EXPECT_EQ((*process)->Resize({30, 90}).code(), StatusCode::kInvalidArgument)
      << "no terminal to resize";
  ASSERT_TRUE((*process)->CloseStdin().ok());
  auto r = (*process)->Wait();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, options_.workdir + "\nbox exec\ngot first\ngot second\n");
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->driver, "fake");
}

TEST_F(SeamTest, AProcessOnATerminalIsResizedAndInterruptedByTheBytesTyped) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  SeenOutput seen;
  ExecOptions exec = WithEnv("TERM", "xterm-256color");
  exec.tty = TerminalSize{33, 101};
  exec.on_stdout = seen.Sink();
  // Short sleeps: sh runs its trap between them.
  auto process = box->Start({"sh", "-c",
                             "stty size; echo $TERM; trap 'stty size' WINCH; echo ready; "
                             "while :; do sleep 0.05; done"},
                            exec);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  ASSERT_TRUE(seen.WaitFor("ready"));
  ASSERT_TRUE((*process)->Resize({40, 120}).ok());
  ASSERT_TRUE(seen.WaitFor("40 120"));
  ASSERT_TRUE((*process)->WriteStdin("\x03").ok());  // Ctrl-C
  auto r = (*process)->Wait();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->signal, SIGINT) << r->stdout_data;
  EXPECT_EQ(r->stdout_data.rfind("33 101\r\nxterm-256color\r\n", 0), 0u) << r->stdout_data;
  EXPECT_EQ(r->stderr_data, "");
  EXPECT_EQ(r->driver, "fake");
}

TEST_F(SeamTest, ExecOnATerminalEndsItsInputAtOnce) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ExecOptions exec = WithTimeout(10s);
  exec.tty = TerminalSize{};
  // Without stdin data the terminal's input ends at once, as /dev/null's would.
  auto r = box->Exec({"sh", "-c", "cat; echo cat-done; echo to-err >&2"}, exec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->stdout_data, "cat-done\r\nto-err\r\n");
  exec.stdin_data = "typed\n";
  auto fed = box->Exec({"cat"}, exec);
  ASSERT_TRUE(fed.ok()) << fed.status().ToString();
  EXPECT_EQ(fed->stdout_data, "typed\r\ntyped\r\n");
  exec.tty = TerminalSize{0, 80};
  EXPECT_EQ(box->Exec({"true"}, exec).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SeamTest, AStartedProcessIsBoundByTheExecTimeoutAndTheBoxsLifetime) {
  options_.box_timeout = 1s;
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto start = Clock::now();
  ExecOptions exec;
  exec.tty = TerminalSize{};
  auto process = box->Start({"sleep", "30"}, exec);  // exec_timeout 30 s; the box has 1 s
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  auto r = (*process)->Wait();
  EXPECT_LT(Seconds(start), 5);
  if (r.ok()) {
    EXPECT_TRUE(r->timed_out);
  } else {
    EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  }
}

TEST_F(SeamTest, AStartedProcessIsSignalledAndThenNotFound) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  SeenOutput seen;
  ExecOptions exec;
  exec.on_stdout = seen.Sink();
  auto process = box->Start({"sh", "-c", "echo ready; exec sleep 30"}, exec);
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  ASSERT_TRUE(seen.WaitFor("ready"));
  ASSERT_TRUE((*process)->Signal(SIGTERM).ok());
  auto r = (*process)->Wait();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->signal, SIGTERM);
  EXPECT_EQ((*process)->Signal(SIGTERM).code(), StatusCode::kNotFound);
}

TEST_F(SeamTest, DroppingAStartedProcessKillsIt) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  const std::string marker = tmp_ + "/still-running";
  auto process = box->Start({"sh", "-c", "sleep 1; touch " + marker}, {});
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  process->reset();
  std::this_thread::sleep_for(1500ms);
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the program outlived its Process";
  ASSERT_TRUE(box->Destroy().ok());
  EXPECT_EQ(box->Start({"true"}, {}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace codebox::testing
