// The agent's egress port with the host's EgressStream, end to end: the real agent runs as an
// ordinary child on a socketpair with an ephemeral egress port, and the test plays both the
// program in the box (a TCP client of that port) and the host's bridge.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "agent_harness.h"
#include "egress_test_util.h"

namespace codebox::testing {
namespace {

using namespace std::chrono_literals;
using protocol::AgentClient;
using protocol::EgressStream;
using protocol::msg::kEgressWindow;

class AgentEgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto agent = AgentProcess::Start({"--egress-port", "0"});
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(*agent);
    auto client = agent_->Connect();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }

  // Opens an accept stream; the first one also learns the agent's port.
  std::unique_ptr<EgressStream> Accept() {
    auto stream = client_->AcceptEgress();
    if (!stream.ok()) {
      ADD_FAILURE() << stream.status().ToString();
      return nullptr;
    }
    if (port_ == 0) {
      auto port = agent_->EgressPort(5s);
      if (!port.ok()) ADD_FAILURE() << port.status().ToString();
      port_ = port.ok() ? *port : 0;
    }
    return std::move(*stream);
  }

  base::UniqueFd Connect() {
    auto fd = ConnectLoopback(port_);
    if (!fd.ok()) ADD_FAILURE() << fd.status().ToString();
    return fd.ok() ? std::move(*fd) : base::UniqueFd();
  }

  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<AgentClient> client_;
  uint16_t port_ = 0;
};

TEST_F(AgentEgressTest, ARequestAndItsAnswerCrossTheStream) {
  auto stream = Accept();
  ASSERT_TRUE(stream);
  EXPECT_TRUE(stream->Take().send_credit == 0) << "no credit before a connection";
  base::UniqueFd program = Connect();
  ASSERT_TRUE(program.valid());
  HostEnd host{*stream};
  ASSERT_TRUE(host.Until([&] { return host.connected; })) << host.status.ToString();

  const std::string request = "CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n";
  ASSERT_TRUE(SendAllBytes(program.get(), request).ok());
  ASSERT_TRUE(host.Until([&] { return host.received.size() == request.size(); }));
  EXPECT_EQ(host.received, request);

  const std::string answer = "HTTP/1.1 200 Connection established\r\n\r\n";
  ASSERT_TRUE(host.Until([&] { return host.sent == answer.size(); }, answer));
  char buf[256];
  ssize_t n = ::recv(program.get(), buf, answer.size(), MSG_WAITALL);
  ASSERT_EQ(n, static_cast<ssize_t>(answer.size()));
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), answer);
}

}  // namespace
}  // namespace codebox::testing
