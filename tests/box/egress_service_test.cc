// EgressService with the real agent as an ordinary child (tests/agent/agent_harness.h, the
// agent's egress port ephemeral): no root, image or jail. The programs "in the box" are this
// test's TCP connections to the agent's port; the upstreams are loopback servers of the test.
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "box/egress.h"
#include "tests/agent/agent_harness.h"
#include "tests/agent/egress_test_util.h"
#include "tests/box/egress_test_server.h"

namespace codebox::box {
namespace {

using namespace std::chrono_literals;
using testing::HttpTestServer;

HttpTestServer::Handler Hello() {
  return [](const std::string& path) -> std::optional<std::string> {
    if (path == "/hello") return std::string("hello\n");
    return std::nullopt;
  };
}

class EgressServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto agent = testing::AgentProcess::Start({"--egress-port", "0"});
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(*agent);
    auto client = agent_->Connect();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }
  void TearDown() override {
    service_.reset();  // before the client, as LocalBox does
    client_.reset();
  }

  void StartService(std::vector<std::string> allow, uint64_t budget = 1 << 30) {
    auto policy = net::EgressPolicy::Allow(allow);
    ASSERT_TRUE(policy.ok()) << policy.status().ToString();
    net::EgressLimits limits;
    limits.head_timeout = 2s;
    auto service =
        EgressService::Start(*client_, std::move(*policy), limits, budget, net::SystemResolver(2s));
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    service_ = std::move(*service);
    auto port = agent_->EgressPort(5s);
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
  }

  base::UniqueFd Connect() {
    auto fd = testing::ConnectLoopback(port_);
    if (!fd.ok()) ADD_FAILURE() << fd.status().ToString();
    return fd.ok() ? std::move(*fd) : base::UniqueFd();
  }

  // One plain-HTTP request through the proxy; the whole answer.
  std::string Get(const std::string& where, const std::string& path) {
    base::UniqueFd fd = Connect();
    if (!fd.valid()) return "";
    EXPECT_TRUE(testing::SendAllBytes(fd.get(), "GET http://" + where + path +
                                                    " HTTP/1.1\r\nHost: " + where + "\r\n\r\n")
                    .ok());
    auto answer = testing::ReadToEof(fd.get());
    return answer.ok() ? *answer : answer.status().ToString();
  }

  // Whether `fd` gets bytes within `wait`.
  static std::string ReadWithin(int fd, std::chrono::milliseconds wait) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return "";
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

  std::unique_ptr<testing::AgentProcess> agent_;
  std::unique_ptr<protocol::AgentClient> client_;
  std::unique_ptr<EgressService> service_;
  uint16_t port_ = 0;
};

TEST_F(EgressServiceTest, AnAllowanceWidensThePolicyOnlyWhileItLives) {
  HttpTestServer index(Hello());
  ASSERT_TRUE(index.ok());
  StartService({});
  EXPECT_NE(Get(index.where(), "/hello").find("403 Forbidden"), std::string::npos);
  base::UniqueFd tunnel;
  {
    auto pattern = net::ParseHostPattern(index.where());
    ASSERT_TRUE(pattern.ok());
    auto allowance = service_->AllowForAWhile({*pattern});
    std::string got = Get(index.where(), "/hello");
    EXPECT_NE(got.find("200 OK"), std::string::npos) << got;
    EXPECT_NE(got.find("hello\n"), std::string::npos) << got;
    // A tunnel opened now outlives the allowance.
    tunnel = Connect();
    ASSERT_TRUE(
        testing::SendAllBytes(tunnel.get(), "CONNECT " + index.where() + " HTTP/1.1\r\n\r\n").ok());
    EXPECT_EQ(ReadWithin(tunnel.get(), 5s), "HTTP/1.1 200 Connection established\r\n\r\n");
  }
  EXPECT_NE(Get(index.where(), "/hello").find("403 Forbidden"), std::string::npos);
  ASSERT_TRUE(testing::SendAllBytes(tunnel.get(), "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  auto rest = testing::ReadToEof(tunnel.get());
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_NE(rest->find("hello\n"), std::string::npos) << *rest;
  tunnel.reset();  // the relay ends when both sides did

  // A record lands as its relay returns, which may be just after the program read the end.
  std::vector<EgressRecord> log;
  for (int i = 0; i < 100 && (log = service_->Log()).size() < 4; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(log.size(), 4u);
  EXPECT_FALSE(log[0].allowed);
  EXPECT_TRUE(log[1].allowed);
  EXPECT_FALSE(log[2].allowed);  // the second refusal ends before the tunnel does
  EXPECT_TRUE(log[3].allowed);
}

// The service keeps kMaxConnections streams: one more connection waits in the agent's backlog
// until one of them ends, then is served.
TEST_F(EgressServiceTest, AtMostMaxConnectionsAreServedAtOnce) {
  auto silent = testing::ListenOnLoopback();  // never accepts: connected, and silent
  ASSERT_TRUE(silent.ok());
  ::listen(silent->fd.get(), 64);
  const std::string where = "127.0.0.1:" + std::to_string(silent->port);
  StartService({where});
  const std::string connect = "CONNECT " + where + " HTTP/1.1\r\n\r\n";
  std::vector<base::UniqueFd> open;
  for (int i = 0; i < EgressService::kMaxConnections - 1; ++i) {
    open.push_back(Connect());
    ASSERT_TRUE(testing::SendAllBytes(open.back().get(), connect).ok());
    EXPECT_EQ(ReadWithin(open.back().get(), 5s), "HTTP/1.1 200 Connection established\r\n\r\n")
        << "connection " << i;
  }
  base::UniqueFd quiet = Connect();  // the 16th: no request yet
  std::this_thread::sleep_for(100ms);
  base::UniqueFd waiting = Connect();
  ASSERT_TRUE(testing::SendAllBytes(waiting.get(), connect).ok());
  EXPECT_EQ(ReadWithin(waiting.get(), 500ms), "");
  quiet.reset();  // it ends: its stream is replaced, and the waiting one is served
  EXPECT_EQ(ReadWithin(waiting.get(), 5s), "HTTP/1.1 200 Connection established\r\n\r\n");
}

// The upstream half-closes first (a greeting, then end of file); the program then sends its
// part and closes. What it sent reaches the upstream, also when the agent's `done` comes in the
// same breath as the last bytes.
TEST_F(EgressServiceTest, BytesSentAfterTheUpstreamsEndStillArrive) {
  auto listener = testing::ListenOnLoopback();
  ASSERT_TRUE(listener.ok());
  const std::string where = "127.0.0.1:" + std::to_string(listener->port);
  StartService({where});
  for (int round = 0; round < 5; ++round) {
    std::string received;
    std::thread upstream([&] {
      pollfd p{listener->fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 10'000) <= 0) return;
      base::UniqueFd conn(::accept4(listener->fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn.valid()) return;
      (void)testing::SendAllBytes(conn.get(), "greeting");
      ::shutdown(conn.get(), SHUT_WR);
      timeval tv{10, 0};
      ::setsockopt(conn.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      auto all = testing::ReadToEof(conn.get());
      if (all.ok()) received = *all;
    });
    base::UniqueFd program = Connect();
    ASSERT_TRUE(
        testing::SendAllBytes(program.get(), "CONNECT " + where + " HTTP/1.1\r\n\r\n").ok());
    auto got = testing::ReadToEof(program.get());
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, "HTTP/1.1 200 Connection established\r\n\r\ngreeting");
    ASSERT_TRUE(testing::SendAllBytes(program.get(), "the program's part").ok());
    program.reset();
    upstream.join();
    EXPECT_EQ(received, "the program's part") << "round " << round;
  }
}

TEST_F(EgressServiceTest, TheLogKeepsTheNewestRecords) {
  StartService({});
  const size_t total = EgressService::kMaxLogRecords + 10;
  std::vector<std::thread> threads;
  std::atomic<size_t> next{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (size_t i; (i = next++) < total;) {
        (void)Get("host-" + std::to_string(i) + ".test", "/");
      }
    });
  }
  for (auto& t : threads) t.join();
  // Each record lands as its relay returns, which may be just after the box read the answer.
  std::vector<EgressRecord> log;
  for (int i = 0; i < 100 && (log = service_->Log()).size() < EgressService::kMaxLogRecords; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  std::this_thread::sleep_for(300ms);  // the last relays' records, past the cap
  log = service_->Log();
  ASSERT_EQ(log.size(), EgressService::kMaxLogRecords);
  for (const EgressRecord& r : log) EXPECT_FALSE(r.allowed);
}

// Ending the service ends every connection, also one whose upstream never says a word.
TEST_F(EgressServiceTest, EndingTheServiceEndsItsConnectionsAtOnce) {
  auto silent = testing::ListenOnLoopback();
  ASSERT_TRUE(silent.ok());
  const std::string where = "127.0.0.1:" + std::to_string(silent->port);
  StartService({where});
  base::UniqueFd tunnel = Connect();
  ASSERT_TRUE(testing::SendAllBytes(tunnel.get(), "CONNECT " + where + " HTTP/1.1\r\n\r\n").ok());
  EXPECT_EQ(ReadWithin(tunnel.get(), 5s), "HTTP/1.1 200 Connection established\r\n\r\n");
  base::UniqueFd idle = Connect();  // no request yet: its relay waits for the head
  std::this_thread::sleep_for(100ms);
  const auto start = std::chrono::steady_clock::now();
  service_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  // Both programs see their connection end (a reset or an end of file), not hang.
  for (int fd : {tunnel.get(), idle.get()}) {
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 2000), 1);
    auto rest = testing::ReadToEof(fd);
    EXPECT_TRUE(!rest.ok() || rest->empty());
  }
}

}  // namespace
}  // namespace codebox::box
