// ConfinedNetwork: what a program in the namespace can reach (the proxy, the forwards, nothing
// else), each connection judged by the policy. Needs root (a network namespace); skipped
// otherwise.
#include "net/confined_network.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "base/io.h"
#include "base/subprocess.h"
#include "base/unique_fd.h"
#include "testing/loopback_listener.h"

namespace codebox::net {
namespace {

// Accepts connections on the host's 127.0.0.1 until destroyed; echoes what each sends.
class EchoServer {
 public:
  EchoServer() {
    auto l = testing::ListenOnLoopback();
    EXPECT_TRUE(l.ok());
    listener_ = std::move(*l);
    thread_ = std::thread([this] {
      for (;;) {
        pollfd p{listener_.fd.get(), POLLIN, 0};
        if (::poll(&p, 1, 200) < 0 || stop_) return;
        if (p.revents == 0) continue;
        base::UniqueFd conn(::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!conn.valid()) continue;
        ++accepted_;
        char buf[4096];
        for (;;) {
          pollfd q{conn.get(), POLLIN, 0};
          if (::poll(&q, 1, 5'000) <= 0) break;
          ssize_t n = ::read(conn.get(), buf, sizeof buf);
          if (n <= 0) break;
          (void)base::WriteAll(conn.get(), std::string_view(buf, static_cast<size_t>(n)));
        }
      }
    });
  }
  ~EchoServer() {
    stop_ = true;
    thread_.join();
  }
  int port() const { return listener_.port; }
  int accepted() const { return accepted_; }

 private:
  testing::LoopbackListener listener_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
};

sockaddr_storage Loopback4(int port) {
  sockaddr_storage a{};
  auto& v4 = reinterpret_cast<sockaddr_in&>(a);
  v4.sin_family = AF_INET;
  v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  v4.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

// A TCP connection made from inside the namespace (a thread that entered it, then left), or
// the errno of the failed connect.
StatusOr<base::UniqueFd> ConnectInside(int ns_fd, const std::string& ip, int port) {
  StatusOr<base::UniqueFd> out = Internal("not run");
  std::thread([&] {
    if (::setns(ns_fd, CLONE_NEWNET) != 0) {
      out = base::ErrnoStatus("setns");
      return;
    }
    sockaddr_storage a{};
    auto& v4 = reinterpret_cast<sockaddr_in&>(a);
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, ip.c_str(), &v4.sin_addr);
    base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof v4) != 0) {
      out = base::ErrnoStatus("connect " + ip, errno);
      return;
    }
    out = std::move(fd);
  }).join();
  return out;
}

// Sends `data`, then reads until `want` bytes came or the peer ended (at most 5 s).
std::string Exchange(int fd, const std::string& data, size_t want) {
  (void)base::WriteAll(fd, data);
  std::string got;
  char buf[4096];
  while (got.size() < want) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5'000) <= 0) break;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

int ProxyPort(const ConfinedNetwork& network) {
  const std::string url = network.proxy_url();
  return std::stoi(url.substr(url.rfind(':') + 1));
}

class ConfinedNetworkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "a network namespace needs root";
  }
};

TEST_F(ConfinedNetworkTest, NothingButTheProxyIsReachable) {
  EchoServer echo;
  auto network = ConfinedNetwork::Start({});
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  const int ns = (*network)->namespace_fd();
  // The host's 127.0.0.1 is not the namespace's: nothing listens there.
  auto direct = ConnectInside(ns, "127.0.0.1", echo.port());
  EXPECT_FALSE(direct.ok());
  EXPECT_NE(direct.status().message().find("refused"), std::string::npos)
      << direct.status().ToString();
  // No route anywhere else.
  auto out = ConnectInside(ns, "192.0.2.1", 80);
  EXPECT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("unreachable"), std::string::npos)
      << out.status().ToString();
  EXPECT_EQ(echo.accepted(), 0);
  EXPECT_TRUE((*network)->Stop().empty());
}

TEST_F(ConfinedNetworkTest, TheProxyJudgesEveryConnectionByThePolicy) {
  EchoServer echo;
  const std::string connect =
      "CONNECT 127.0.0.1:" + std::to_string(echo.port()) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  {
    auto network = ConfinedNetwork::Start({});  // public addresses only
    ASSERT_TRUE(network.ok()) << network.status().ToString();
    auto fd = ConnectInside((*network)->namespace_fd(), "127.0.0.1", ProxyPort(**network));
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    std::string answer = Exchange(fd->get(), connect, 1 << 20);
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 403")) << answer;
    fd->reset();
    auto records = (*network)->Stop();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_FALSE(records[0].allowed);
    EXPECT_NE(records[0].reason.find("loopback"), std::string::npos) << records[0].reason;
    EXPECT_EQ(echo.accepted(), 0);
  }
  {
    auto range = ParseAddressRange("127.0.0.0/8");
    ASSERT_TRUE(range.ok());
    auto network = ConfinedNetwork::Start({.policy = EgressPolicy::Open({*range})});
    ASSERT_TRUE(network.ok()) << network.status().ToString();
    auto fd = ConnectInside((*network)->namespace_fd(), "127.0.0.1", ProxyPort(**network));
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    const std::string established = "HTTP/1.1 200 Connection established\r\n\r\n";
    EXPECT_EQ(Exchange(fd->get(), connect, established.size()), established);
    EXPECT_EQ(Exchange(fd->get(), "ping", 4), "ping");
    fd->reset();
    auto records = (*network)->Stop();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_TRUE(records[0].allowed) << records[0].reason;
    EXPECT_EQ(records[0].bytes_down, 4u);
    EXPECT_EQ(echo.accepted(), 1);
  }
}

TEST_F(ConfinedNetworkTest, AForwardReachesTheHostsAddressOnlyWhenThePolicyAllowsIt) {
  EchoServer echo;
  {
    auto network = ConfinedNetwork::Start({.forwards = {Loopback4(echo.port())}});
    ASSERT_TRUE(network.ok()) << network.status().ToString();
    auto fd = ConnectInside((*network)->namespace_fd(), "127.0.0.1", echo.port());
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    EXPECT_EQ(Exchange(fd->get(), "ping", 4), "") << "closed without a byte";
    fd->reset();
    auto records = (*network)->Stop();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_FALSE(records[0].allowed);
    EXPECT_EQ(echo.accepted(), 0);
  }
  {
    auto range = ParseAddressRange("127.0.0.1");
    ASSERT_TRUE(range.ok());
    auto network = ConfinedNetwork::Start(
        {.policy = EgressPolicy::Open({*range}), .forwards = {Loopback4(echo.port())}});
    ASSERT_TRUE(network.ok()) << network.status().ToString();
    auto fd = ConnectInside((*network)->namespace_fd(), "127.0.0.1", echo.port());
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    EXPECT_EQ(Exchange(fd->get(), "ping", 4), "ping");
    fd->reset();
    auto records = (*network)->Stop();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_TRUE(records[0].allowed) << records[0].reason;
    EXPECT_EQ(echo.accepted(), 1);
  }
}

TEST_F(ConfinedNetworkTest, StopEndsConnectionsStillOpen) {
  EchoServer echo;
  auto range = ParseAddressRange("127.0.0.0/8");
  ASSERT_TRUE(range.ok());
  auto network = ConfinedNetwork::Start(
      {.policy = EgressPolicy::Open({*range}), .forwards = {Loopback4(echo.port())}});
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  auto fd = ConnectInside((*network)->namespace_fd(), "127.0.0.1", echo.port());
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_EQ(Exchange(fd->get(), "ping", 4), "ping");
  const auto t0 = std::chrono::steady_clock::now();
  auto records = (*network)->Stop();  // the connection is still open
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(records.size(), 1u);
}

TEST_F(ConfinedNetworkTest, AProgramStartedInTheNamespaceIsInIt) {
  auto network = ConfinedNetwork::Start({});
  ASSERT_TRUE(network.ok()) << network.status().ToString();
  struct stat st {};
  ASSERT_EQ(::fstat((*network)->namespace_fd(), &st), 0);
  base::Command command({"readlink", "/proc/self/ns/net"});
  command.net_namespace_fd = (*network)->namespace_fd();
  auto r = base::RunChecked(command);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out, "net:[" + std::to_string(st.st_ino) + "]\n");
  // And the proxy's variables point into it.
  auto env = (*network)->ProxyEnvironment();
  EXPECT_NE(std::find(env.begin(), env.end(), "HTTPS_PROXY=" + (*network)->proxy_url()), env.end());
}

}  // namespace
}  // namespace codebox::net
