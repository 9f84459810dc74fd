// Box lifecycle and deadlines through the BoxEnv seam: the real agent code in a child of the
// test process, no root, no image, no jail.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <thread>

#include "seam_fixture.h"

namespace codebox::testing {
namespace {

TEST_F(SeamTest, CreateExecDestroy) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(box->info().driver, "fake");
  EXPECT_TRUE(std::filesystem::is_directory(options_.workdir)) << "the workdir is made at create";
  auto r = box->Exec({"sh", "-c", "pwd; echo to-err >&2; printf %s \"$GREETING\"; exit 3"},
                     WithEnv("GREETING", "hi"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, options_.workdir + "\nhi");
  EXPECT_EQ(r->stderr_data, "to-err\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->signal, 0);
  EXPECT_FALSE(r->timed_out || r->out_of_memory || r->output_truncated);
  EXPECT_EQ(r->driver, "fake");
  auto stdin_echo = box->Exec({"cat"}, WithStdin("fed"));
  ASSERT_TRUE(stdin_echo.ok()) << stdin_echo.status().ToString();
  EXPECT_EQ(stdin_echo->stdout_data, "fed");

  EXPECT_TRUE(AgentAlive());
  ASSERT_TRUE(box->Destroy().ok());
  EXPECT_EQ(state().destroy_calls, 1);
  EXPECT_FALSE(AgentAlive()) << "Destroy ends the box";
}

TEST_F(SeamTest, ExecAfterDestroyIsAClearError) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  ASSERT_TRUE(box->Destroy().ok());
  auto r = box->Exec({"true"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("destroyed; create a new box"), std::string::npos)
      << r.status().ToString();
  Status copy = box->CopyIn(tmp_, "x");
  EXPECT_EQ(copy.code(), StatusCode::kInvalidArgument) << copy.ToString();
}

TEST_F(SeamTest, DestroyTwiceEndsTheBackendOnce) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  EXPECT_TRUE(box->Destroy().ok());
  EXPECT_TRUE(box->Destroy().ok());
  box.reset();  // the destructor destroys too
  EXPECT_EQ(state().destroy_calls, 1);
}

TEST_F(SeamTest, DestroyWhileAnExecRunsEndsIt) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  StatusOr<ExecResult> r = Internal("not run");
  std::thread exec([&] { r = box->Exec({"sleep", "30"}); });
  std::this_thread::sleep_for(300ms);
  auto start = Clock::now();
  EXPECT_TRUE(box->Destroy().ok());
  exec.join();
  EXPECT_LT(Seconds(start), 5);
  // The agent's shutdown kills the exec and may still report it; else the box says why.
  if (r.ok()) {
    EXPECT_EQ(r->signal, SIGKILL);
    EXPECT_FALSE(r->ok());
  } else {
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find("destroyed while this ran"), std::string::npos)
        << r.status().ToString();
  }
}

TEST_F(SeamTest, StartFailureIsReportedTerminalSafe) {
  env_.start_error = Unavailable("no driver: \x1b]0;owned\x07 here");
  auto box = box::CreateBox(options_, env_);
  ASSERT_FALSE(box.ok());
  EXPECT_EQ(box.status().code(), StatusCode::kUnavailable);
  const std::string& m = box.status().message();
  EXPECT_EQ(m.rfind("create box: no driver: ", 0), 0u) << m;
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
  EXPECT_EQ(m.find('\x07'), std::string::npos) << m;
}

TEST_F(SeamTest, InvalidOptionsNeverStartABackend) {
  options_.memory_mib = 0;
  auto box = box::CreateBox(options_, env_);
  ASSERT_FALSE(box.ok());
  EXPECT_EQ(box.status().code(), StatusCode::kInvalidArgument) << box.status().ToString();
  EXPECT_EQ(state().agent_pid, -1);
}

TEST_F(SeamTest, ExecTimeoutIsTimedOut) {
  auto box = Create();
  ASSERT_NE(box, nullptr);
  // A SIGKILL from a timeout is never an OOM kill, whatever the backend counts.
  env_.state->oom_kills = 0;
  auto start = Clock::now();
  std::thread bump([&] {
    std::this_thread::sleep_for(100ms);
    ++state().oom_kills;
  });
  auto r = box->Exec({"sleep", "30"}, WithTimeout(400ms));
  bump.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_FALSE(r->out_of_memory);
  EXPECT_FALSE(r->ok());
  EXPECT_LT(Seconds(start), 5);
  EXPECT_GE(r->duration, 400ms);
  // The box is still usable.
  auto after = box->Exec({"true"});
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->exit_code, 0);
}

TEST_F(SeamTest, BoxTimeoutEndsTheBox) {
  options_.box_timeout = 1s;
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto start = Clock::now();
  auto r = box->Exec({"sleep", "30"});  // exec_timeout 30 s: the box's lifetime caps it
  EXPECT_LT(Seconds(start), 5);
  if (r.ok()) {
    EXPECT_TRUE(r->timed_out);
  } else {
    EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  }
  // The watchdog ends the box; later calls say why.
  for (int i = 0; i < 100 && state().destroy_calls == 0; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_GE(state().destroy_calls, 1);
  auto after = box->Exec({"true"});
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(after.status().message().find("lifetime of 1.0"), std::string::npos)
      << after.status().ToString();
  for (int i = 0; i < 100 && AgentAlive(); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(AgentAlive());
}

// The agent never sees an exec request (and so never answers it); all else passes.
Verdict StallExecRequests(Direction dir, protocol::Frame& f) {
  return dir == Direction::kToAgent && RequestOf(f) == "exec" ? Verdict::kStall : Verdict::kForward;
}

TEST_F(SeamTest, StalledAgentGivesADeadlineErrorNotAHang) {
  env_.idle = 1s;
  env_.tamper = StallExecRequests;
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto start = Clock::now();
  auto r = box->Exec({"true"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_NE(r.status().message().find("exec true"), std::string::npos) << r.status().ToString();
  EXPECT_LT(Seconds(start), 6) << "an idle deadline of 1 s, and as long for the probe";
  start = Clock::now();
  EXPECT_TRUE(box->Destroy().ok());
  EXPECT_LT(Seconds(start), 5) << "Destroy of a stalled box waits only for its shutdown deadline";
}

TEST_F(SeamTest, StalledAgentIsEndedByTheBoxTimeout) {
  options_.box_timeout = 1500ms;
  env_.tamper = StallExecRequests;
  auto box = Create();
  ASSERT_NE(box, nullptr);
  auto start = Clock::now();
  auto r = box->Exec({"true"}, WithTimeout(kNoTimeout));
  ASSERT_FALSE(r.ok());
  EXPECT_LT(Seconds(start), 6) << "the box's lifetime, not the 60 s idle deadline";
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_NE(r.status().message().find("lifetime ended while this ran"), std::string::npos)
      << r.status().ToString();
}

TEST_F(SeamTest, AgentThatNeverSaysHelloFailsCreateInTime) {
  env_.handshake = 500ms;
  env_.tamper = [](Direction dir, protocol::Frame&) {
    return dir == Direction::kToHost ? Verdict::kStall : Verdict::kForward;
  };
  env_.state->set_diagnostics("jail log: agent wedged");
  auto start = Clock::now();
  auto box = box::CreateBox(options_, env_);
  ASSERT_FALSE(box.ok());
  EXPECT_LT(Seconds(start), 5);
  EXPECT_NE(box.status().message().find("create box: connect to agent"), std::string::npos)
      << box.status().ToString();
  EXPECT_NE(box.status().message().find("jail log: agent wedged"), std::string::npos)
      << box.status().ToString();
  EXPECT_EQ(state().destroy_calls, 1) << "a box that failed to start is destroyed";
}

}  // namespace
}  // namespace codebox::testing
