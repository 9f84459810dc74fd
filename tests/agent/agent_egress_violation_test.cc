// The real agent's egress port against a host that breaks the flow control (raw frames, not
// AgentClient, which never sends them): the agent answers an error on that stream, resets the
// program's connection, drops what still arrives for the stream, and goes on serving.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <optional>
#include <string>

#include "agent_harness.h"
#include "egress_test_util.h"
#include "protocol/frame.h"
#include "protocol/message.h"

namespace codebox::testing {
namespace {

using namespace std::chrono_literals;
using protocol::FrameType;
using protocol::Json;
using protocol::msg::kEgressWindow;

// The host's side of the protocol spoken frame by frame.
class RawHost {
 public:
  explicit RawHost(base::UniqueFd fd) : fd_(std::move(fd)) {}

  bool Hello() {
    if (!Send(FrameType::kHello, 0, R"({"protocol":1,"client":"raw-test"})")) return false;
    auto hello = Next(5s);
    return hello && hello->type == FrameType::kHello;
  }
  bool Send(FrameType type, uint32_t stream, std::string_view payload) {
    return SendAllBytes(fd_.get(), protocol::EncodeFrame(type, stream, payload)).ok();
  }
  bool Request(uint32_t stream, const Json& request) {
    return Send(FrameType::kControl, stream, request.dump());
  }
  std::optional<protocol::Frame> Next(std::chrono::milliseconds wait) {
    auto end = std::chrono::steady_clock::now() + wait;
    for (;;) {
      auto f = decoder_.Next();
      if (!f.ok()) return std::nullopt;
      if (f->has_value()) return std::move(**f);
      auto left =
          std::chrono::ceil<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      pollfd p{fd_.get(), POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return {};
      char buf[65536];
      ssize_t n = ::read(fd_.get(), buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      decoder_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  // The next control message on any stream (data frames are counted, not kept).
  std::optional<std::pair<uint32_t, Json>> NextEvent(std::chrono::milliseconds wait = 5s) {
    for (;;) {
      auto f = Next(wait);
      if (!f) return std::nullopt;
      if (f->type == FrameType::kData) {
        data_bytes_ += f->payload.size();
        continue;
      }
      auto j = protocol::ParseControl(f->payload);
      if (!j.ok()) return std::nullopt;
      return std::make_pair(f->stream, *j);
    }
  }
  uint64_t data_bytes() const { return data_bytes_; }

 private:
  base::UniqueFd fd_;
  protocol::FrameDecoder decoder_;
  uint64_t data_bytes_ = 0;
};

class AgentEgressViolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto agent = AgentProcess::Start({"--egress-port", "0"});
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(*agent);
    host_.emplace(agent_->TakeHostFd());
    ASSERT_TRUE(host_->Hello());
  }

  // egress_accept on `stream`, a program connected to it, and the `connected` event read.
  base::UniqueFd Connected(uint32_t stream) {
    EXPECT_TRUE(host_->Request(stream, Json{{"op", "egress_accept"}}));
    auto port = agent_->EgressPort(5s);
    if (!port.ok()) {
      ADD_FAILURE() << port.status().ToString();
      return {};
    }
    auto program = ConnectLoopback(*port);
    if (!program.ok()) {
      ADD_FAILURE() << program.status().ToString();
      return {};
    }
    auto event = host_->NextEvent();
    EXPECT_TRUE(event && event->first == stream && (*event).second["event"] == "connected");
    return std::move(*program);
  }

  // The next event is an error on `stream` with protocol_error and `text`.
  void ExpectError(uint32_t stream, const std::string& text) {
    auto event = host_->NextEvent();
    ASSERT_TRUE(event) << "no event";
    EXPECT_EQ(event->first, stream) << event->second.dump();
    EXPECT_EQ(event->second.value("event", ""), "error") << event->second.dump();
    EXPECT_EQ(event->second.value("code", ""), "protocol_error") << event->second.dump();
    EXPECT_NE(event->second.value("message", "").find(text), std::string::npos)
        << event->second.dump();
  }

  // The agent still serves requests, and sent nothing else (no second error) before.
  void ExpectStillServing(uint32_t stream) {
    ASSERT_TRUE(host_->Request(
        stream, Json{{"op", "mkdir"}, {"path", "/tmp"}, {"mode", 0755}, {"parents", true}}));
    auto event = host_->NextEvent();
    ASSERT_TRUE(event);
    EXPECT_EQ(event->first, stream) << event->second.dump();
    EXPECT_EQ(event->second.value("event", ""), "done") << event->second.dump();
  }

  std::unique_ptr<AgentProcess> agent_;
  std::optional<RawHost> host_;
};

TEST_F(AgentEgressViolationTest, HostDataPastTheWindowEndsTheStream) {
  base::UniqueFd program = Connected(1);
  ASSERT_TRUE(program.valid());
  // The program reads nothing, so the bytes pile up in the agent once the socket is full;
  // the host never waits for an ack.
  int small = 4096;
  ::setsockopt(program.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  const std::string chunk(protocol::kDataChunk, 'x');
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(host_->Send(FrameType::kData, 1, chunk));
  // Acks the agent sent for what the socket took may come first.
  std::optional<std::pair<uint32_t, Json>> event;
  do {
    event = host_->NextEvent();
    ASSERT_TRUE(event);
  } while (event->second.value("event", "") == "ack");
  EXPECT_EQ(event->first, 1u);
  EXPECT_EQ(event->second.value("code", ""), "protocol_error") << event->second.dump();
  EXPECT_NE(event->second.value("message", "").find("window"), std::string::npos)
      << event->second.dump();
  auto got = ReadToEof(program.get());
  EXPECT_FALSE(got.ok()) << "the program saw a clean end after " << got->size() << " bytes";
  // More data and acks for the dead stream are dropped, not answered.
  ASSERT_TRUE(host_->Send(FrameType::kData, 1, "late"));
  ASSERT_TRUE(host_->Request(1, Json{{"op", "ack"}, {"bytes", 1}}));
  ExpectStillServing(3);
}

TEST_F(AgentEgressViolationTest, AnAckForBytesNeverSentEndsTheStream) {
  base::UniqueFd program = Connected(1);
  ASSERT_TRUE(program.valid());
  ASSERT_TRUE(SendAllBytes(program.get(), std::string(100, 'p')).ok());
  while (host_->data_bytes() < 100) {
    ASSERT_FALSE(host_->NextEvent(500ms)) << "an event before the program's data";
    ASSERT_GT(host_->data_bytes(), 0u) << "the program's data did not arrive";
  }
  ASSERT_TRUE(host_->Request(1, Json{{"op", "ack"}, {"bytes", 200}}));
  ExpectError(1, "ack for 200 bytes");
  auto got = ReadToEof(program.get());
  EXPECT_FALSE(got.ok()) << "the program saw a clean end";
  ExpectStillServing(3);
}

TEST_F(AgentEgressViolationTest, AnAckOutsideAnEgressStreamIsRefused) {
  ASSERT_TRUE(host_->Request(7, Json{{"op", "ack"}, {"bytes", 1}}));
  ExpectError(7, "not an open egress stream");
  ExpectStillServing(9);
}

TEST_F(AgentEgressViolationTest, AnAckOutOfRangeIsRefused) {
  base::UniqueFd program = Connected(1);
  ASSERT_TRUE(program.valid());
  ASSERT_TRUE(host_->Request(1, Json{{"op", "ack"}, {"bytes", kEgressWindow + 1}}));
  ExpectError(1, "bytes");
  ExpectStillServing(3);
}

TEST_F(AgentEgressViolationTest, DataBeforeAConnectionEndsTheStream) {
  ASSERT_TRUE(host_->Request(1, Json{{"op", "egress_accept"}}));
  ASSERT_TRUE(host_->Send(FrameType::kData, 1, "too early"));
  ExpectError(1, "before its connection");
  ExpectStillServing(3);
  // No stream waits now: a program's connection waits in the backlog for the next one.
  auto port = agent_->EgressPort(5s);
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  auto program = ConnectLoopback(*port);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  EXPECT_FALSE(host_->NextEvent(200ms)) << "a connection without a waiting stream";
  ASSERT_TRUE(host_->Request(5, Json{{"op", "egress_accept"}}));
  auto event = host_->NextEvent();
  ASSERT_TRUE(event);
  EXPECT_EQ(event->first, 5u);
  EXPECT_EQ(event->second.value("event", ""), "connected") << event->second.dump();
}

TEST_F(AgentEgressViolationTest, DataAfterTheHostsEndEndsTheStream) {
  base::UniqueFd program = Connected(1);
  ASSERT_TRUE(program.valid());
  ASSERT_TRUE(host_->Send(FrameType::kData, 1, ""));
  ASSERT_TRUE(host_->Send(FrameType::kData, 1, "after the end"));
  ExpectError(1, "after its end");
  ExpectStillServing(3);
}

}  // namespace
}  // namespace codebox::testing
