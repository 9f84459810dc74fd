// Execs on a pseudo-terminal, end to end: the real codebox-agent (an ordinary child on a
// socketpair) and AgentClient; and a hostile agent that sends what a terminal cannot.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "agent_harness.h"
#include "hostile_agent.h"
#include "tests/common/seen_output.h"

namespace codebox::testing {
namespace {

using namespace std::chrono_literals;
using protocol::ExecRequest;
using protocol::RunningExec;
using protocol::msg::TerminalSize;

class AgentTtyTest : public ConnectedAgentTest {
 protected:
  // `sh -c script` on a 33x101 terminal, its output going to output_.
  ExecRequest Tty(const std::string& script) {
    ExecRequest r;
    r.exec.argv = {"/bin/sh", "-c", script};
    r.exec.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"TERM", "xterm"}};
    r.exec.cwd = "/tmp";
    r.exec.timeout = 20s;
    r.exec.tty = TerminalSize{33, 101};
    r.exec.stdin_stream = true;
    r.on_stdout = output_.Sink();
    return r;
  }

  std::unique_ptr<RunningExec> Start(const ExecRequest& request) {
    auto running = client_->StartExec(request);
    EXPECT_TRUE(running.ok()) << running.status().ToString();
    return running.ok() ? std::move(*running) : nullptr;
  }

  SeenOutput output_;
};

TEST_F(AgentTtyTest, AllOutputComesAsStdoutInTheOrderItWasWritten) {
  auto r = client_->Exec(
      Tty("echo out1; echo err1 >&2; echo out2; echo err2 >&2; "
          "[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo tty; stty size; echo $TERM; exit 3"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "out1\r\nerr1\r\nout2\r\nerr2\r\ntty\r\n33 101\r\nxterm\r\n");
  EXPECT_EQ(r->stderr_data, "");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_TRUE(client_->connection_status().ok());
}

TEST_F(AgentTtyTest, AResizeReachesTheProgramAsSigwinchWithTheNewSize) {
  auto running =
      Start(Tty("trap 'stty size; exit 0' WINCH; echo ready; "
                "i=0; while [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done; exit 9"));
  ASSERT_TRUE(running);
  ASSERT_TRUE(output_.WaitFor("ready")) << output_.text();
  ASSERT_TRUE(running->Resize({40, 120}).ok());
  auto r = running->Wait();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->stdout_data;
  EXPECT_NE(r->stdout_data.find("40 120\r\n"), std::string::npos) << r->stdout_data;
  // The exec is over: nobody is left to resize for.
  EXPECT_EQ(running->Resize({10, 10}).code(), StatusCode::kNotFound);
}

TEST_F(AgentTtyTest, CtrlCInterruptsTheForegroundProgramAndCtrlDEndsInput) {
  auto sleeper = Start(Tty("echo ready; sleep 100; echo survived"));
  ASSERT_TRUE(sleeper);
  ASSERT_TRUE(output_.WaitFor("ready")) << output_.text();
  std::this_thread::sleep_for(100ms);  // sh has started sleep
  ASSERT_TRUE(sleeper->WriteStdin("\x03").ok());
  auto r = sleeper->Wait();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->signal, SIGINT) << r->stdout_data;
  EXPECT_EQ(r->stdout_data.find("survived"), std::string::npos);

  // Closing stdin types the terminal's end of file: cat ends as it would at Ctrl-D.
  auto cat = Start(Tty("exec cat"));
  ASSERT_TRUE(cat);
  ASSERT_TRUE(cat->WriteStdin("hello\n").ok());
  ASSERT_TRUE(cat->CloseStdin().ok());
  auto done = cat->Wait();
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->exit_code, 0) << "signal " << done->signal << ": " << done->stdout_data;
  EXPECT_FALSE(done->timed_out);
  EXPECT_EQ(done->stdout_data, "hello\r\nhello\r\n") << "the terminal's echo, then cat's";
}

TEST_F(AgentTtyTest, TimeoutsKillATtyExecAsTheyKillAPipeExec) {
  ExecRequest request = Tty("echo started; sleep 100");
  request.exec.timeout = 300ms;
  auto r = client_->Exec(request);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_EQ(r->stdout_data, "started\r\n");
}

TEST_F(AgentTtyTest, ResizeIsRefusedForAPipeExecAndForSizesOutOfRange) {
  ExecRequest pipes = Tty("sleep 5");
  pipes.exec.tty.reset();
  auto running = Start(pipes);
  ASSERT_TRUE(running);
  EXPECT_EQ(running->Resize({24, 80}).code(), StatusCode::kInvalidArgument);
  running->Kill();
  auto tty = Start(Tty("sleep 5"));
  ASSERT_TRUE(tty);
  EXPECT_EQ(tty->Resize({0, 80}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tty->Resize({24, 10001}).code(), StatusCode::kInvalidArgument);
  ExecRequest huge = Tty("true");
  huge.exec.tty = TerminalSize{10001, 80};
  EXPECT_EQ(client_->StartExec(huge).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(AgentTtyTest, TheTerminalOfAnExecAsAUserIsTheUsers) {
  if (::geteuid() != 0) GTEST_SKIP() << "becoming another user takes root";
  ExecRequest request = Tty("id -u; stat -c %u:%g $(tty)");
  request.exec.user = protocol::msg::User{1000, 1000};
  auto r = client_->Exec(request);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "1000\r\n1000:1000\r\n");
  EXPECT_EQ(r->exit_code, 0);
}

// A hostile agent: a terminal has one output, so stderr on a tty exec is made up.
TEST(HostileAgentTtyTest, StderrOnATtyExecIsAProtocolViolation) {
  HostileAgent agent([](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    if (!req.contains("tty")) return;  // the test fails below: no violation
    a.Send(FrameType::kStdout, stream, "fine");
    a.Send(FrameType::kStderr, stream, "forged");
    a.Event(stream, ExitEvent(0));
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  ExecRequest request = True();
  request.exec.tty = TerminalSize{24, 80};
  auto r = client->Exec(request);
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError) << r.status().ToString();
  ExpectViolation(WaitDead(*client), "stderr on tty exec stream 1");
}

}  // namespace
}  // namespace codebox::testing
