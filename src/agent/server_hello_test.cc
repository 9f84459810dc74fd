// The hello as a vm guest's agent plays it: the host's `guest` applied before any request, a
// second hello on `resend_hello`, a failed setup answered by an error instead, and await_hello
// (a template's host) taking the agent back to waiting for a hello.
#include <signal.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "agent/server.h"
#include "base/io.h"
#include "protocol/frame.h"
#include "protocol/message.h"
#include "protocol/messages.h"

namespace codebox::agent {
namespace {

namespace m = protocol::msg;
using protocol::FrameType;

// A Server in a child process (it blocks signals and reaps children), with a guest-setup
// handler that writes what it was given to `report` and fails when the entropy starts with 0.
class GuestHelloTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2], report[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      // As PID 1 of a guest, the agent is the parent of every orphan (a warm-up's daemon).
      ::prctl(PR_SET_CHILD_SUBREAPER, 1);
      ::close(sv[0]);
      ::close(report[0]);
      int out = report[1];
      Server server{base::UniqueFd(sv[1]), /*is_init=*/false};
      server.set_guest_setup_handler([out](const m::GuestSetup& g) {
        std::string line = "setup " + std::to_string(g.max_processes) + "\n";
        (void)!::write(out, line.data(), line.size());
        return g.entropy[0] == '\0' ? Internal("no entropy") : Status::Ok();
      });
      ::_exit(server.Run());
    }
    ::close(sv[1]);
    ::close(report[1]);
    host_.reset(sv[0]);
    report_.reset(report[0]);
  }
  void TearDown() override {
    host_.reset();
    int status;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }

  void Send(FrameType type, uint32_t stream, const std::string& payload) {
    ASSERT_TRUE(base::WriteAll(host_.get(), protocol::EncodeFrame(type, stream, payload)).ok());
  }
  void SendHello(std::optional<m::GuestSetup> guest) {
    m::Hello hello;
    hello.protocol = protocol::kProtocolVersion;
    hello.client = "test";
    hello.guest = std::move(guest);
    Send(FrameType::kHello, 0, m::EncodeHello(hello));
  }
  // The next frame from the agent (within 10 s), or nullopt when the connection ends.
  std::optional<protocol::Frame> Next() {
    for (;;) {
      auto frame = decoder_.Next();
      if (frame.ok() && frame->has_value()) return std::move(**frame);
      if (!frame.ok()) return std::nullopt;
      char buf[4096];
      struct pollfd p = {host_.get(), POLLIN, 0};
      if (::poll(&p, 1, 10'000) <= 0) return std::nullopt;
      ssize_t n = ::read(host_.get(), buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      decoder_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  std::string Reported() {
    char buf[256];
    ssize_t n = ::read(report_.get(), buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }
  static m::GuestSetup Guest(char first_byte, bool resend) {
    m::GuestSetup g;
    g.entropy = std::string(m::kGuestEntropyBytes, first_byte);
    g.time_unix_ns = 1;
    g.resend_hello = resend;
    g.max_processes = 7;
    return g;
  }

  pid_t pid_ = -1;
  base::UniqueFd host_, report_;
  protocol::FrameDecoder decoder_;
};

TEST_F(GuestHelloTest, ASetupIsAppliedFirstAndAClonesHostGetsASecondHello) {
  auto first = Next();
  ASSERT_TRUE(first && first->type == FrameType::kHello);
  SendHello(Guest('x', /*resend=*/true));
  auto second = Next();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->type, FrameType::kHello) << "resend_hello answers with a hello";
  EXPECT_EQ(Reported(), "setup 7\n");
}

TEST_F(GuestHelloTest, AFailedSetupIsAnErrorNotAHello) {
  ASSERT_TRUE(Next().has_value());
  SendHello(Guest('\0', /*resend=*/true));
  auto answer = Next();
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->type, FrameType::kControl);
  auto event = m::DecodeEventPayload(answer->payload);
  ASSERT_TRUE(event.ok() && std::holds_alternative<m::Error>(*event));
  EXPECT_NE(std::get<m::Error>(*event).message.find("no entropy"), std::string::npos);
}

TEST_F(GuestHelloTest, AwaitHelloEndsWhatTheWarmUpLeftAndTakesTheAgentBackToItsHandshake) {
  ASSERT_TRUE(Next().has_value());
  SendHello(std::nullopt);  // the template's host: no setup
  // A warm-up that leaves a daemon behind, as an image's python3 could.
  m::Exec exec;
  exec.argv = {"/bin/sh", "-c", "sleep 300 </dev/null >/dev/null 2>&1 & echo $!"};
  exec.env = {{"PATH", "/usr/bin:/bin"}};
  Send(FrameType::kControl, 1, m::EncodeRequest(exec));
  std::string daemon;
  for (;;) {
    auto frame = Next();
    ASSERT_TRUE(frame.has_value());
    if (frame->type == FrameType::kStdout) daemon += frame->payload;
    if (frame->type != FrameType::kControl) continue;
    auto event = m::DecodeEventPayload(frame->payload);
    ASSERT_TRUE(event.ok());
    if (std::holds_alternative<m::Exit>(*event)) break;  // after `started`, its exit
  }
  const pid_t daemon_pid = static_cast<pid_t>(std::stol(daemon));
  ASSERT_EQ(::kill(daemon_pid, 0), 0) << "the daemon runs";
  Send(FrameType::kControl, 3, m::EncodeRequest(m::AwaitHello{}));
  auto done = Next();
  ASSERT_TRUE(done.has_value());
  auto event = m::DecodeEventPayload(done->payload);
  ASSERT_TRUE(event.ok() && std::holds_alternative<m::Done>(*event));
  EXPECT_NE(::kill(daemon_pid, 0), 0) << "a template is saved with the warm-up's daemon gone";
  // The next host's hello, as a clone's host sends it.
  SendHello(Guest('y', /*resend=*/true));
  auto hello = Next();
  ASSERT_TRUE(hello.has_value());
  EXPECT_EQ(hello->type, FrameType::kHello);
  EXPECT_EQ(Reported(), "setup 7\n");
}

}  // namespace
}  // namespace codebox::agent
