// EgressStream against a hostile agent (a scripted fake on a socketpair): what box code that
// took over the in-box agent could send on an egress stream. Breaking the flow control or the
// stream's order ends the agent connection with kProtocolError; the stream reports it.
#include <gtest/gtest.h>
#include <poll.h>

#include <memory>
#include <string>

#include "agent_client/agent_client.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "tests/agent/hostile_agent.h"

namespace codebox::testing {
namespace {

using protocol::EgressStream;
using protocol::msg::kEgressWindow;

const Json kConnected = Json{{"event", "connected"}};

// Waits (bounded) until the stream has ended; returns its last state.
EgressStream::State WaitEnded(EgressStream& stream) {
  EgressStream::State state;
  for (int i = 0; i < 200; ++i) {
    pollfd p{stream.wake_fd(), POLLIN, 0};
    ::poll(&p, 1, 25);
    EgressStream::State now = stream.Take();
    state.data += now.data;
    state.connected = now.connected;
    state.box_eof = now.box_eof;
    state.ended = now.ended;
    state.status = now.status;
    if (state.ended) break;
  }
  return state;
}

// Runs `script` as the agent after it read the egress_accept; returns the stream's end.
EgressStream::State AgainstScript(const std::function<void(HostileAgent&, uint32_t)>& script,
                                  Status* connection = nullptr) {
  HostileAgent agent([&](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    if (req.value("op", "") != "egress_accept") ADD_FAILURE() << req.dump();
    script(a, stream);
  });
  auto client = agent.Connect();
  if (!client) return {};
  auto stream = client->AcceptEgress();
  if (!stream.ok()) {
    ADD_FAILURE() << stream.status().ToString();
    return {};
  }
  EgressStream::State state = WaitEnded(**stream);
  if (connection != nullptr) *connection = WaitDead(*client);
  return state;
}

TEST(HostileEgressTest, DataPastTheWindowEndsTheConnection) {
  Status connection;
  EgressStream::State state = AgainstScript(
      [](HostileAgent& a, uint32_t stream) {
        a.Event(stream, kConnected);
        const std::string chunk(protocol::kDataChunk, 'd');
        for (uint64_t sent = 0; sent <= kEgressWindow; sent += chunk.size()) {
          if (!a.Send(FrameType::kData, stream, chunk)) return;
        }
      },
      &connection);
  ASSERT_TRUE(state.ended);
  ExpectViolation(state.status, "data past the window");
  ExpectViolation(connection, "on egress stream 1");
  EXPECT_LE(state.data.size(), kEgressWindow) << "the host kept more than the window";
}

TEST(HostileEgressTest, ASecondConnectedEndsTheConnection) {
  EgressStream::State state = AgainstScript([](HostileAgent& a, uint32_t stream) {
    a.Event(stream, kConnected);
    a.Event(stream, kConnected);
  });
  ASSERT_TRUE(state.ended);
  ExpectViolation(state.status, "second connected on egress stream 1");
}

TEST(HostileEgressTest, AnAckForBytesNeverSentEndsTheConnection) {
  EgressStream::State state = AgainstScript([](HostileAgent& a, uint32_t stream) {
    a.Event(stream, kConnected);
    a.Event(stream, Json{{"event", "ack"}, {"bytes", 10}});
  });
  ASSERT_TRUE(state.ended);
  ExpectViolation(state.status, "ack for 10 bytes");
}

TEST(HostileEgressTest, DataBeforeConnectedEndsTheConnection) {
  EgressStream::State state = AgainstScript(
      [](HostileAgent& a, uint32_t stream) { a.Send(FrameType::kData, stream, "unasked"); });
  ASSERT_TRUE(state.ended);
  ExpectViolation(state.status, "data before connected on egress stream 1");
}

TEST(HostileEgressTest, DataAfterTheBoxsEndEndsTheConnection) {
  EgressStream::State state = AgainstScript([](HostileAgent& a, uint32_t stream) {
    a.Event(stream, kConnected);
    a.Send(FrameType::kData, stream, "");
    a.Send(FrameType::kData, stream, "more");
  });
  ASSERT_TRUE(state.ended);
  ExpectViolation(state.status, "data after the end of its data on egress stream 1");
}

TEST(HostileEgressTest, FramesOfOtherRequestsEndTheConnection) {
  EgressStream::State state = AgainstScript([](HostileAgent& a, uint32_t stream) {
    a.Event(stream, kConnected);
    a.Send(FrameType::kStdout, stream, "exec output");
  });
  ASSERT_TRUE(state.ended);
  ExpectViolation(state.status, "stdout on egress_accept stream 1");
  EgressStream::State exit =
      AgainstScript([](HostileAgent& a, uint32_t stream) { a.Event(stream, ExitEvent(0)); });
  ASSERT_TRUE(exit.ended);
  ExpectViolation(exit.status, "exit on egress_accept stream 1");
}

// Acks within what was sent give the credit back; the agent's data arrives as sent.
TEST(HostileEgressTest, HonestAcksReturnTheCredit) {
  HostileAgent agent([](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    a.Event(stream, kConnected);
    a.Send(FrameType::kData, stream, "from the box");
    auto data = a.NextFrame();  // the host's bytes
    if (!data || data->type != FrameType::kData) return;
    auto ack = a.NextFrame();  // the host's ack: the agent answers only after it
    if (!ack || ack->type != FrameType::kControl) return;
    a.Event(stream, Json{{"event", "ack"}, {"bytes", data->payload.size()}});
  });
  auto client = agent.Connect();
  ASSERT_TRUE(client);
  auto stream = client->AcceptEgress();
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EgressStream::State state;
  for (int i = 0; i < 200 && state.data.empty(); ++i) {
    pollfd p{(*stream)->wake_fd(), POLLIN, 0};
    ::poll(&p, 1, 25);
    state = (*stream)->Take();
  }
  EXPECT_EQ(state.data, "from the box");
  ASSERT_EQ(state.send_credit, kEgressWindow);
  ASSERT_TRUE((*stream)->Send("hello").ok());
  EXPECT_EQ((*stream)->Take().send_credit, kEgressWindow - 5);
  EXPECT_TRUE((*stream)->Ack(12).ok());
  EXPECT_EQ((*stream)->Ack(1).code(), StatusCode::kInvalidArgument) << "acked twice";
  uint64_t credit = 0;
  for (int i = 0; i < 200 && credit != kEgressWindow; ++i) {
    pollfd p{(*stream)->wake_fd(), POLLIN, 0};
    ::poll(&p, 1, 25);
    credit = (*stream)->Take().send_credit;
  }
  EXPECT_EQ(credit, kEgressWindow);
  EXPECT_TRUE(client->connection_status().ok());
}

// The agent going away ends every open stream, and wakes its poller.
TEST(HostileEgressTest, TheConnectionsEndEndsTheStream) {
  auto agent = std::make_unique<HostileAgent>([](HostileAgent& a) {
    auto [stream, req] = a.NextRequest();
    a.Event(stream, kConnected);
  });
  auto client = agent->Connect();
  ASSERT_TRUE(client);
  auto stream = client->AcceptEgress();
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  agent.reset();  // hangs up
  EgressStream::State state = WaitEnded(**stream);
  ASSERT_TRUE(state.ended);
  EXPECT_EQ(state.status.code(), StatusCode::kBoxCrashed) << state.status.ToString();
  EXPECT_FALSE((*stream)->Send("x").ok());
  EXPECT_EQ(state.send_credit, 0u);
}

}  // namespace
}  // namespace codebox::testing
