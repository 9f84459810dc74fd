#include "net/egress_relay.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "base/io.h"
#include "base/unique_fd.h"
#include "testing/loopback_listener.h"
#include "testing/rebinding_resolver.h"

namespace codebox::net {
namespace {

using std::chrono::milliseconds;

// The upstream: accepts at most one connection on 127.0.0.1 within 10 s, keeps what it
// receives, and answers `reply` after the first bytes (then echoes the rest when echo).
class Upstream {
 public:
  explicit Upstream(std::string reply = "", bool echo = true) {
    auto l = testing::ListenOnLoopback();
    EXPECT_TRUE(l.ok());
    listener_ = std::move(*l);
    thread_ = std::thread([this, reply, echo] {
      pollfd p{listener_.fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 10'000) <= 0) return;
      base::UniqueFd conn(::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn.valid()) return;
      accepted_ = true;
      char buf[4096];
      bool replied = false;
      for (;;) {
        pollfd q{conn.get(), POLLIN, 0};
        if (::poll(&q, 1, 10'000) <= 0) return;
        ssize_t n = ::read(conn.get(), buf, sizeof buf);
        if (n <= 0) return;
        received_.append(buf, static_cast<size_t>(n));
        if (!replied && !reply.empty()) {
          (void)base::WriteAll(conn.get(), reply);
          replied = true;
          ::shutdown(conn.get(), SHUT_WR);
        } else if (echo && reply.empty()) {
          (void)base::WriteAll(conn.get(), std::string_view(buf, static_cast<size_t>(n)));
        }
      }
    });
  }
  ~Upstream() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return listener_.port; }
  bool accepted() const { return accepted_; }
  const std::string& received() const { return received_; }
  // Wakes the accept wait at once (the test knows no connection is coming).
  void Unblock() { ::shutdown(listener_.fd.get(), SHUT_RDWR); }

 private:
  testing::LoopbackListener listener_;
  std::thread thread_;
  std::atomic<bool> accepted_{false};
  std::string received_;
};

// The box's end of one connection to its proxy, and the host serving the other end.
class Connection {
 public:
  Connection(const EgressPolicy& policy, EgressLimits limits, EgressBudget& budget,
             Resolver resolve = NoResolver()) {
    auto pair = base::SocketPair();
    EXPECT_TRUE(pair.ok());
    box_ = std::move(pair->first);
    host_ = std::move(pair->second);
    thread_ = std::thread([this, &policy, limits, &budget, resolve] {
      record_ = ServeEgressConnection(host_.get(), policy, limits, budget, resolve);
      host_.reset();
    });
  }
  ~Connection() { Finish(); }
  static Resolver NoResolver() {
    return [](const std::string& host, uint16_t) -> StatusOr<std::vector<sockaddr_storage>> {
      return NotFound(host + ": no resolver in this test");
    };
  }
  void Send(std::string_view bytes) { ASSERT_TRUE(base::WriteAll(box_.get(), bytes).ok()); }
  void CloseWrite() { ::shutdown(box_.get(), SHUT_WR); }
  void Close() { box_.reset(); }
  // What one read gives (waiting at most 10 s).
  std::string ReadSome() {
    char buf[4096];
    pollfd p{box_.get(), POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) return "";
    ssize_t n = ::read(box_.get(), buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }
  // Everything the proxy sends until it closes (at most 10 s).
  std::string ReadAll() {
    std::string out;
    char buf[4096];
    for (;;) {
      pollfd p{box_.get(), POLLIN, 0};
      if (::poll(&p, 1, 10'000) <= 0) break;
      ssize_t n = ::read(box_.get(), buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  const EgressRecord& Finish() {
    if (thread_.joinable()) thread_.join();
    return record_;
  }

 private:
  base::UniqueFd box_;
  base::UniqueFd host_;
  std::thread thread_;
  EgressRecord record_;
};

EgressLimits Quick() {
  EgressLimits l;
  l.head_timeout = milliseconds(2'000);
  l.connect_timeout = milliseconds(2'000);
  l.idle_timeout = milliseconds(5'000);
  return l;
}

TEST(EgressRelayTest, ConnectToAnAddressAllowedByLiteralRelaysBothWays) {
  Upstream upstream;
  auto policy = *EgressPolicy::Allow({"127.0.0.1:" + std::to_string(upstream.port())});
  EgressBudget budget(1 << 20);
  Connection c(policy, Quick(), budget);
  c.Send("CONNECT 127.0.0.1:" + std::to_string(upstream.port()) + " HTTP/1.1\r\n\r\nping");
  c.CloseWrite();
  std::string got = c.ReadAll();
  EXPECT_EQ(got, "HTTP/1.1 200 Connection established\r\n\r\nping");
  const EgressRecord& r = c.Finish();
  EXPECT_TRUE(r.allowed) << r.reason;
  EXPECT_EQ(r.address, "127.0.0.1");
  EXPECT_EQ(r.bytes_up, 4u);
  EXPECT_EQ(r.bytes_down, 4u);
  EXPECT_EQ(budget.used(), 8u);
  upstream.Join();
  EXPECT_EQ(upstream.received(), "ping");
}

// A box that goes (its end closed both ways) while the upstream says nothing: the relay ends
// at once, not after the idle timeout (a box's teardown waits for its relays).
TEST(EgressRelayTest, TheBoxHangingUpEndsTheRelayWhileTheUpstreamIsIdle) {
  auto listener = testing::ListenOnLoopback();  // never accepts: connected, and silent
  ASSERT_TRUE(listener.ok());
  auto policy = *EgressPolicy::Allow({"127.0.0.1:" + std::to_string(listener->port)});
  EgressBudget budget(1 << 20);
  EgressLimits limits = Quick();
  limits.idle_timeout = milliseconds(60'000);
  Connection c(policy, limits, budget);
  c.Send("CONNECT 127.0.0.1:" + std::to_string(listener->port) + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(c.ReadSome(), "HTTP/1.1 200 Connection established\r\n\r\n");
  c.CloseWrite();
  std::this_thread::sleep_for(milliseconds(200));  // the relay is waiting on the upstream now
  const auto start = std::chrono::steady_clock::now();
  c.Close();
  const EgressRecord& r = c.Finish();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(r.allowed);
  EXPECT_NE(r.reason.find("the box closed the connection"), std::string::npos) << r.reason;
}

TEST(EgressRelayTest, PlainHttpGoesUpstreamInOriginForm) {
  Upstream upstream("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi", false);
  const std::string where = "127.0.0.1:" + std::to_string(upstream.port());
  auto policy = *EgressPolicy::Allow({where});
  EgressBudget budget(1 << 20);
  Connection c(policy, Quick(), budget);
  c.Send("GET http://" + where + "/data.csv HTTP/1.1\r\nProxy-Authorization: x\r\n\r\n");
  EXPECT_EQ(c.ReadAll(), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
  c.CloseWrite();
  EXPECT_TRUE(c.Finish().allowed);
  upstream.Join();
  EXPECT_EQ(upstream.received().rfind("GET /data.csv HTTP/1.1\r\n", 0), 0u) << upstream.received();
  EXPECT_EQ(upstream.received().find("Proxy-"), std::string::npos);
}

// A plain-HTTP request's head goes upstream: it is the box sending, so it counts against the
// budget and in bytes_up like a body (else many requests with big headers pass any budget).
TEST(EgressRelayTest, APlainRequestsHeadCountsAgainstTheBudgetAndInBytesUp) {
  Upstream upstream("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi", false);
  const std::string where = "127.0.0.1:" + std::to_string(upstream.port());
  auto policy = *EgressPolicy::Allow({where});
  const std::string head =
      "GET http://" + where + "/ HTTP/1.1\r\nX-Pad: " + std::string(4000, 'a') + "\r\n\r\n";
  {
    EgressBudget small(1000);  // less than the head
    Connection c(policy, Quick(), small);
    c.Send(head);
    EXPECT_EQ(c.ReadAll().rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u);
    EXPECT_NE(c.Finish().reason.find("budget"), std::string::npos);
    EXPECT_EQ(small.used(), 0u);
  }
  EgressBudget budget(1 << 20);
  Connection c(policy, Quick(), budget);
  c.Send(head);
  EXPECT_EQ(c.ReadAll(), "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
  c.CloseWrite();
  const EgressRecord& r = c.Finish();
  EXPECT_TRUE(r.allowed) << r.reason;
  upstream.Join();
  EXPECT_GT(upstream.received().size(), 4000u);
  EXPECT_EQ(r.bytes_up, upstream.received().size());
  EXPECT_EQ(budget.used(), r.bytes_up + r.bytes_down);
}

TEST(EgressRelayTest, AHostOffTheListIsRefusedWithoutAConnection) {
  Upstream upstream;
  auto policy = *EgressPolicy::Allow({"pypi.org"});
  EgressBudget budget(1 << 20);
  Connection c(policy, Quick(), budget);
  c.Send("CONNECT 127.0.0.1:" + std::to_string(upstream.port()) + " HTTP/1.1\r\n\r\n");
  std::string got = c.ReadAll();
  EXPECT_EQ(got.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("allowlist"), std::string::npos) << got;
  const EgressRecord& r = c.Finish();
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.host, "127.0.0.1");
  upstream.Unblock();
  upstream.Join();
  EXPECT_FALSE(upstream.accepted());
}

TEST(EgressRelayTest, AnAllowedNameThatResolvesInsideIsRefused) {
  Upstream upstream;
  auto policy = *EgressPolicy::Allow({"allowed.test:" + std::to_string(upstream.port())});
  EgressBudget budget(1 << 20);
  // DNS rebinding: the allowed name answers with the host's loopback (and a private address).
  Resolver rebinding = codebox::testing::RebindingResolver();
  Connection c(policy, Quick(), budget, rebinding);
  c.Send("CONNECT allowed.test:" + std::to_string(upstream.port()) + " HTTP/1.1\r\n\r\n");
  std::string got = c.ReadAll();
  EXPECT_EQ(got.rfind("HTTP/1.1 403", 0), 0u) << got;
  EXPECT_NE(got.find("loopback"), std::string::npos) << got;
  EXPECT_FALSE(c.Finish().allowed);
  upstream.Unblock();
  upstream.Join();
  EXPECT_FALSE(upstream.accepted()) << "the proxy connected to an internal address";
}

TEST(EgressRelayTest, TheBudgetEndsTheRelay) {
  Upstream upstream;
  auto policy = *EgressPolicy::Allow({"127.0.0.1:" + std::to_string(upstream.port())});
  EgressBudget budget(10);
  Connection c(policy, Quick(), budget);
  c.Send("CONNECT 127.0.0.1:" + std::to_string(upstream.port()) + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(c.ReadSome(), "HTTP/1.1 200 Connection established\r\n\r\n");
  c.Send(std::string(100, 'x'));  // through the relay, past the budget
  (void)c.ReadAll();
  const EgressRecord& r = c.Finish();
  EXPECT_NE(r.reason.find("budget"), std::string::npos) << r.reason;
  EXPECT_LE(budget.used(), 10u);
  upstream.Join();
  EXPECT_LE(upstream.received().size(), 10u);
}

TEST(EgressRelayTest, BytesSentWithTheHeadCountAgainstTheBudget) {
  Upstream upstream;
  auto policy = *EgressPolicy::Allow({"127.0.0.1:" + std::to_string(upstream.port())});
  EgressBudget budget(10);
  Connection c(policy, Quick(), budget);
  c.Send("CONNECT 127.0.0.1:" + std::to_string(upstream.port()) + " HTTP/1.1\r\n\r\n" +
         std::string(100, 'x'));
  std::string got = c.ReadAll();
  EXPECT_EQ(got.rfind("HTTP/1.1 403", 0), 0u) << got;
  EXPECT_NE(c.Finish().reason.find("budget"), std::string::npos);
  EXPECT_EQ(budget.used(), 0u);
  upstream.Unblock();
  upstream.Join();
  EXPECT_FALSE(upstream.accepted()) << "connected although the budget was used up";
}

TEST(EgressRelayTest, TheRateLimitSlowsTheRelay) {
  Upstream upstream;
  auto policy = *EgressPolicy::Allow({"127.0.0.1:" + std::to_string(upstream.port())});
  EgressBudget budget(1 << 20);
  EgressLimits limits = Quick();
  limits.rate_bytes_per_second = 2000;
  Connection c(policy, limits, budget);
  c.Send("CONNECT 127.0.0.1:" + std::to_string(upstream.port()) + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(c.ReadSome(), "HTTP/1.1 200 Connection established\r\n\r\n");
  const auto start = std::chrono::steady_clock::now();
  c.Send(std::string(1000, 'r'));  // 1000 up and 1000 echoed down: 2000 bytes at 2000 B/s
  c.CloseWrite();
  EXPECT_EQ(c.ReadAll().size(), 1000u);
  // A lower bound only: a loaded machine makes it slower, never faster.
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(900));
  EXPECT_TRUE(c.Finish().allowed);
}

TEST(EgressRelayTest, GarbageASlowHeadAndAFailedResolveAreAnswered) {
  EgressBudget budget(1 << 20);
  auto policy = *EgressPolicy::Allow({"nowhere.test"});
  {
    Connection c(policy, Quick(), budget);
    c.Send("\x16\x03\x01 not http\r\n\r\n");
    std::string got = c.ReadAll();
    EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
  }
  {
    EgressLimits limits = Quick();
    limits.head_timeout = milliseconds(200);
    Connection c(policy, limits, budget);
    c.Send("CONNECT nowhere.test:443 HTTP/1.1\r\n");  // never ends its head
    std::string got = c.ReadAll();
    EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
    EXPECT_NE(c.Finish().reason.find("head"), std::string::npos);
  }
  {
    Connection c(policy, Quick(), budget);
    c.Send("CONNECT nowhere.test:443 HTTP/1.1\r\n\r\n");
    std::string got = c.ReadAll();
    EXPECT_EQ(got.rfind("HTTP/1.1 502", 0), 0u) << got;
    EXPECT_NE(got.find("nowhere.test"), std::string::npos) << got;
  }
  EXPECT_EQ(budget.used(), 0u);
}

TEST(EgressRelayTest, TheHostsResolverIsJudgedToo) {
  // localhost comes from /etc/hosts (no network needed): an allowed name, a loopback address.
  auto policy = *EgressPolicy::Allow({"localhost"});
  EgressBudget budget(1 << 20);
  Connection c(policy, Quick(), budget, SystemResolver(milliseconds(5'000)));
  c.Send("CONNECT localhost:443 HTTP/1.1\r\n\r\n");
  std::string got = c.ReadAll();
  EXPECT_EQ(got.rfind("HTTP/1.1 403", 0), 0u) << got;
  EXPECT_NE(got.find("loopback"), std::string::npos) << got;
}

TEST(EgressBudgetTest, NeverPassesItsCap) {
  EgressBudget budget(100);
  EXPECT_TRUE(budget.Take(60));
  EXPECT_FALSE(budget.Take(41));
  EXPECT_TRUE(budget.Take(40));
  EXPECT_FALSE(budget.Take(1));
  EXPECT_FALSE(EgressBudget(10).Take(UINT64_MAX));
  EXPECT_EQ(budget.used(), 100u);
}

}  // namespace
}  // namespace codebox::net
