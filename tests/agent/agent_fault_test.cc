// Malformed input from either side: the receiver reports a clear error and stays up.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "agent_harness.h"
#include "base/io.h"
#include "protocol/frame.h"
#include "protocol/message.h"

namespace codebox::testing {
namespace {

using namespace std::chrono_literals;
using protocol::FrameType;
using protocol::Json;

// Raw frame I/O on the host end, for speaking to the agent without the client.
struct RawPeer {
  int fd;
  protocol::FrameDecoder decoder;

  void Send(FrameType type, uint32_t stream, std::string_view payload) {
    ASSERT_TRUE(base::WriteAll(fd, protocol::EncodeFrame(type, stream, payload)).ok());
  }
  void SendJson(FrameType type, uint32_t stream, const Json& j) { Send(type, stream, j.dump()); }
  // The next frame, or nullopt at EOF / after 5 s.
  std::optional<protocol::Frame> Next() {
    for (;;) {
      auto f = decoder.Next();
      if (!f.ok()) return std::nullopt;
      if (f->has_value()) return std::move(**f);
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return std::nullopt;
      char buf[65536];
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
};

class AgentFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto agent = AgentProcess::Start();
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(*agent);
    fd_ = agent_->TakeHostFd();
    peer_.fd = fd_.get();
    auto hello = peer_.Next();
    ASSERT_TRUE(hello.has_value());
    ASSERT_EQ(hello->type, FrameType::kHello);
    peer_.SendJson(FrameType::kHello, 0, Json{{"protocol", 1}, {"client", "test"}});
  }

  // After a fatal fault: an error event on stream 0 naming it, then EOF and exit status 2.
  void ExpectAgentClosedWith(const std::string& fault) {
    auto frame = peer_.Next();
    ASSERT_TRUE(frame.has_value());
    EXPECT_EQ(frame->stream, 0u);
    auto event = protocol::ParseControl(frame->payload);
    ASSERT_TRUE(event.ok());
    EXPECT_EQ((*event)["code"], "protocol_error");
    EXPECT_NE((*event)["message"].get<std::string>().find(fault), std::string::npos) << *event;
    EXPECT_FALSE(peer_.Next().has_value());
    int status = agent_->WaitExit(2000);
    ASSERT_NE(status, -1);
    EXPECT_TRUE(WIFEXITED(status)) << "agent crashed: " << status;
    EXPECT_EQ(WEXITSTATUS(status), 2);
    EXPECT_NE(agent_->StderrText().find(fault), std::string::npos) << agent_->StderrText();
  }

  std::unique_ptr<AgentProcess> agent_;
  base::UniqueFd fd_;
  RawPeer peer_;
};

TEST_F(AgentFaultTest, GarbageClosesConnectionCleanly) {
  ASSERT_TRUE(base::WriteAll(fd_.get(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  ExpectAgentClosedWith("malformed frame from host");
}

TEST_F(AgentFaultTest, OversizedFrameIsRejectedBeforeBuffering) {
  std::string header = protocol::EncodeFrame(FrameType::kData, 1, "");
  header[0] = 0;
  header[1] = 0;
  header[2] = 0;
  header[3] = 0x10;  // 256 MiB announced; nothing more is sent
  ASSERT_TRUE(base::WriteAll(fd_.get(), header).ok());
  ExpectAgentClosedWith("exceeds the limit");
}

TEST_F(AgentFaultTest, ControlThatIsNotJson) {
  peer_.Send(FrameType::kControl, 1, "{not json");
  ExpectAgentClosedWith("bad JSON");
}

TEST_F(AgentFaultTest, UnknownOpAndBadRequestsKeepServing) {
  peer_.SendJson(FrameType::kControl, 1, Json{{"op", "frobnicate"}});
  peer_.SendJson(FrameType::kControl, 3, Json{{"op", "exec"}, {"argv", 5}});
  peer_.SendJson(FrameType::kControl, 5, Json{{"op", "kill"}, {"target", 99}});
  for (uint32_t stream : {1u, 3u, 5u}) {
    auto frame = peer_.Next();
    ASSERT_TRUE(frame.has_value());
    EXPECT_EQ(frame->stream, stream);
    auto event = protocol::ParseControl(frame->payload);
    ASSERT_TRUE(event.ok());
    EXPECT_EQ((*event)["event"], "error") << *event;
  }
  // Still serving.
  peer_.SendJson(FrameType::kControl, 7,
                 Json{{"op", "exec"}, {"argv", {"/bin/echo", "alive"}}, {"env", Json::object()}});
  auto started = peer_.Next();
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ((*protocol::ParseControl(started->payload))["event"], "started");
  auto out = peer_.Next();
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->type, FrameType::kStdout);
  EXPECT_EQ(out->payload, "alive\n");
}

TEST_F(AgentFaultTest, KillOpSignalsTheExec) {
  peer_.SendJson(FrameType::kControl, 1,
                 Json{{"op", "exec"}, {"argv", {"/bin/sleep", "100"}}, {"env", Json::object()}});
  peer_.SendJson(FrameType::kControl, 3, Json{{"op", "kill"}, {"target", 1}, {"signal", 15}});
  std::map<uint32_t, Json> events;
  for (int i = 0; i < 3; ++i) {
    auto frame = peer_.Next();
    ASSERT_TRUE(frame.has_value());
    Json event = *protocol::ParseControl(frame->payload);
    if (event["event"] == "started") continue;  // the exec's first word: its pid
    events[frame->stream] = event;
  }
  EXPECT_EQ(events[3]["event"], "done");
  EXPECT_EQ(events[1]["event"], "exit");
  EXPECT_EQ(events[1]["signal"], 15);
  EXPECT_EQ(events[1]["timed_out"], false);
}

TEST_F(AgentFaultTest, HangUpKillsEverythingAndExits) {
  peer_.SendJson(FrameType::kControl, 1,
                 Json{{"op", "exec"},
                      {"argv", {"/bin/sh", "-c", "setsid sleep 100 & sleep 100"}},
                      {"env", Json{{"PATH", "/usr/bin:/bin"}}}});
  while (agent_->CountDescendants() < 2) std::this_thread::sleep_for(5ms);
  fd_.reset();
  int status = agent_->WaitExit(2000);
  ASSERT_NE(status, -1);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << agent_->StderrText();
}

TEST(AgentGarbageThroughClientTest, ClientReportsTheAgentsProtocolError) {
  auto agent = AgentProcess::Start();
  ASSERT_TRUE(agent.ok());
  base::UniqueFd fd = (*agent)->TakeHostFd();
  base::UniqueFd raw(::dup(fd.get()));
  auto client = protocol::AgentClient::Connect(std::move(fd), 5s);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  // Bytes that are not a frame, written beside the client on the same connection.
  ASSERT_TRUE(base::WriteAll(raw.get(), std::string(12, '\xff')).ok());
  for (int i = 0; i < 400 && (*client)->connection_status().ok(); ++i) std::this_thread::sleep_for(5ms);
  Status why = (*client)->connection_status();
  EXPECT_EQ(why.code(), StatusCode::kProtocolError) << why.ToString();
  EXPECT_NE(why.message().find("malformed frame from host"), std::string::npos) << why.ToString();
  protocol::ExecRequest req;
  req.exec.argv = {"true"};
  auto r = (*client)->Exec(req);
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError);
  int status = (*agent)->WaitExit(2000);
  EXPECT_TRUE(status != -1 && WIFEXITED(status)) << status;
}

// A fake agent: answers the hello, then sends `after_hello` once the client's next frame
// arrives (or right away if `immediately`).
class FakeAgent {
 public:
  FakeAgent(std::string after_hello, bool send_hello = true) {
    auto pair = base::SocketPair();
    client_fd_ = std::move(pair->first);
    fd_ = std::move(pair->second);
    thread_ = std::thread([this, after_hello, send_hello] {
      RawPeer peer{fd_.get(), protocol::FrameDecoder()};
      if (!peer.Next()) return;  // the client's hello
      if (!send_hello) {
        peer.Next();  // wait for the client to give up
        return;
      }
      (void)base::WriteAll(fd_.get(), protocol::EncodeFrame(FrameType::kHello, 0,
                                                            R"({"protocol":1,"agent":"fake"})"));
      if (!peer.Next()) return;
      (void)base::WriteAll(fd_.get(), after_hello);
      ::shutdown(fd_.get(), SHUT_WR);
      while (peer.Next()) {
      }
    });
  }
  ~FakeAgent() {
    ::shutdown(fd_.get(), SHUT_RDWR);
    thread_.join();
  }
  base::UniqueFd TakeClientFd() { return std::move(client_fd_); }

 private:
  base::UniqueFd client_fd_, fd_;
  std::thread thread_;
};

StatusOr<ExecResult> ExecThrough(FakeAgent& fake) {
  auto client = protocol::AgentClient::Connect(fake.TakeClientFd(), 2s);
  if (!client.ok()) return client.status();
  protocol::ExecRequest req;
  req.exec.argv = {"true"};
  return (*client)->Exec(req);
}

TEST(AgentClientFaultTest, GarbageFromAgentIsProtocolError) {
  FakeAgent fake("\x01\x02garbage that is not a frame at all........");
  auto r = ExecThrough(fake);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError) << r.status().ToString();
  EXPECT_NE(r.status().message().find("malformed frame"), std::string::npos);
}

TEST(AgentClientFaultTest, OversizedFrameFromAgentIsProtocolError) {
  std::string header = protocol::EncodeFrame(FrameType::kStdout, 1, "");
  header[3] = 0x7f;  // ~2 GiB announced
  FakeAgent fake(header);
  auto r = ExecThrough(fake);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(r.status().message().find("exceeds the limit"), std::string::npos) << r.status().ToString();
}

TEST(AgentClientFaultTest, BadJsonFromAgentIsProtocolError) {
  FakeAgent fake(protocol::EncodeFrame(FrameType::kControl, 1, "[1,2"));
  auto r = ExecThrough(fake);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError) << r.status().ToString();
}

TEST(AgentClientFaultTest, AgentDyingMidExecIsBoxCrashed) {
  FakeAgent fake(protocol::EncodeFrame(FrameType::kStdout, 1, "partial"));
  auto r = ExecThrough(fake);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kBoxCrashed);
  EXPECT_NE(r.status().message().find("agent connection closed"), std::string::npos);
}

TEST(AgentClientFaultTest, SilentAgentFailsHandshakeInTime) {
  FakeAgent fake("", /*send_hello=*/false);
  auto start = std::chrono::steady_clock::now();
  auto client = protocol::AgentClient::Connect(fake.TakeClientFd(), 200ms);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kStartFailed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

}  // namespace
}  // namespace codebox::testing
