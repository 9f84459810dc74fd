// What a hostile or slow client cannot do: send too much, trickle bytes, hold every
// connection or every handler thread; and how Stop treats requests in flight.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <future>
#include <thread>

#include "base/unique_fd.h"
#include "http/test_handler.h"

namespace codebox::http {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Get;
using testing::Post;
using testing::StartTestServer;
using testing::TestHandler;

base::UniqueFd ConnectTcp(uint16_t port) {
  base::UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

// Whether the peer closed `fd` (EOF or reset) within `timeout`.
bool ClosedWithin(int fd, std::chrono::milliseconds timeout) {
  auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
    if (poll(&p, 1, std::max(left, 1)) > 0) {
      char buf[4096];
      ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n <= 0) return n == 0 || errno != EAGAIN;
    }
  }
  return false;
}

TEST(ServerLimitsTest, BodyOverTheLimitIs413) {
  TestHandler handler;
  ServerOptions o;
  o.max_body_bytes = 1000;
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  auto ok = t->UnixClient().Send(Post("/echo", std::string(1000, 'a')));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200);
  for (const Client& c : {t->UnixClient(), t->TcpClient()}) {
    // Larger than the socket buffers: the answer comes before the body is all sent.
    auto resp = c.Send(Post("/echo", std::string(16 << 20, 'a')));
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    EXPECT_EQ(resp->status, 413);
    EXPECT_NE(resp->body.find("\"payload_too_large\""), std::string::npos) << resp->body;
    EXPECT_FALSE(resp->headers["x-request-id"].empty());
  }
  EXPECT_EQ(handler.handled, 1);
}

TEST(ServerLimitsTest, HeadersOverTheLimitAre431) {
  TestHandler handler;
  ServerOptions o;
  o.max_header_bytes = 2048;
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  ClientRequest r = Get("/echo");
  r.headers.push_back({"X-Big", std::string(4000, 'h')});
  auto resp = t->TcpClient().Send(r);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 431);
  EXPECT_NE(resp->body.find("\"header_too_large\""), std::string::npos) << resp->body;
  EXPECT_EQ(StatusFromErrorResponse(*resp).code(), StatusCode::kLimitExceeded);
  EXPECT_EQ(handler.handled, 0);
}

TEST(ServerLimitsTest, MalformedRequestIs400) {
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  base::UniqueFd fd = ConnectTcp(t->tcp_address.port);
  std::string junk = "GET /echo HTTP/1.1\r\nHost x\r\n\r\n";
  ASSERT_EQ(send(fd.get(), junk.data(), junk.size(), MSG_NOSIGNAL), ssize_t(junk.size()));
  char buf[2048] = {};
  ssize_t n = recv(fd.get(), buf, sizeof buf - 1, 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, 12), "HTTP/1.1 400");
  EXPECT_EQ(handler.handled, 0);
}

TEST(ServerLimitsTest, SlowLorisAndIdleClientsAreCutOff) {
  TestHandler handler;
  ServerOptions o;
  o.read_timeout = std::chrono::milliseconds(300);
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  // Headers a byte every 50 ms: the whole request would take over 2 s.
  base::UniqueFd slow = ConnectTcp(t->tcp_address.port);
  std::string request = "GET /echo HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaa\r\n\r\n";
  auto start = Clock::now();
  bool closed = false;
  for (size_t i = 0; i < request.size() && !closed; ++i) {
    if (send(slow.get(), &request[i], 1, MSG_NOSIGNAL) != 1) break;
    closed = ClosedWithin(slow.get(), std::chrono::milliseconds(50));
  }
  auto elapsed = Clock::now() - start;
  EXPECT_TRUE(closed) << "the slow client was not cut off";
  EXPECT_GE(elapsed, std::chrono::milliseconds(250));
  EXPECT_LT(elapsed, std::chrono::milliseconds(1500));
  EXPECT_EQ(handler.handled, 0);

  base::UniqueFd idle = ConnectTcp(t->tcp_address.port);
  EXPECT_TRUE(ClosedWithin(idle.get(), std::chrono::seconds(2)));
}

TEST(ServerLimitsTest, ConnectionsPastTheLimitAreClosed) {
  TestHandler handler;
  ServerOptions o;
  o.max_connections = 2;
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  base::UniqueFd a = ConnectTcp(t->tcp_address.port);
  base::UniqueFd b = ConnectTcp(t->tcp_address.port);
  for (int i = 0; i < 200 && t->server->stats().connections_open < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(t->server->stats().connections_open, 2u);
  base::UniqueFd c = ConnectTcp(t->tcp_address.port);
  EXPECT_TRUE(ClosedWithin(c.get(), std::chrono::seconds(2)));
  EXPECT_EQ(t->server->stats().rejected_connections, 1u);
  a.reset();
  b.reset();
  for (int i = 0; i < 200 && t->server->stats().connections_open > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto resp = t->TcpClient().Send(Get("/echo"));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 200);
}

TEST(ServerLimitsTest, RequestsPastMaxInFlightGet503) {
  TestHandler handler;
  ServerOptions o;
  o.max_in_flight = 1;
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  auto blocked =
      std::async(std::launch::async, [&] { return t->UnixClient().Send(Get("/block")); });
  ASSERT_TRUE(handler.started.WaitFor(std::chrono::seconds(5)));
  EXPECT_EQ(t->server->stats().requests_in_flight, 1u);
  auto resp = t->UnixClient().Send(Get("/echo"));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 503);
  EXPECT_EQ(resp->headers["retry-after"], "1");
  EXPECT_EQ(StatusFromErrorResponse(*resp).code(), StatusCode::kUnavailable);
  handler.release.Set();
  auto first = blocked.get();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(first->body, "done");
}

// Bodies in memory at once are capped: a second upload while the first one's handler holds its
// body gets 503; once that handler returns the budget is back.
TEST(ServerLimitsTest, BodiesHeldAtOncePastTheBudgetGet503) {
  TestHandler handler;
  ServerOptions o;
  o.max_body_bytes = 2000;
  o.max_buffered_body_bytes = 3000;
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  auto blocked = std::async(std::launch::async, [&] {
    return t->UnixClient().Send(Post("/block", std::string(2000, 'a')));
  });
  ASSERT_TRUE(handler.started.WaitFor(std::chrono::seconds(5)));
  auto resp = t->TcpClient().Send(Post("/echo", std::string(2000, 'b')));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 503);
  EXPECT_EQ(resp->headers["retry-after"], "1");
  auto small = t->TcpClient().Send(Post("/echo", std::string(500, 'c')));
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->status, 200) << "a body within what is left is taken";
  handler.release.Set();
  ASSERT_TRUE(blocked.get().ok());
  // The budget comes back when the handler has returned, which may be just after its answer
  // reached the client: a full-size body is taken again within a moment.
  int status = 0;
  for (auto end = Clock::now() + std::chrono::seconds(2); Clock::now() < end && status != 200;) {
    auto again = t->UnixClient().Send(Post("/echo", std::string(2000, 'd')));
    ASSERT_TRUE(again.ok());
    status = again->status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status, 200) << "the budget is given back after each request";
  for (int i = 0; i < 5; ++i) {  // one request's reservation may linger; two fit
    auto again = t->UnixClient().Send(Post("/echo", std::string(1000, 'e')));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->status, 200);
  }
}

TEST(ServerLimitsTest, StopDrainsARequestInFlight) {
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  auto blocked = std::async(std::launch::async, [&] { return t->TcpClient().Send(Get("/block")); });
  ASSERT_TRUE(handler.started.WaitFor(std::chrono::seconds(5)));
  auto stopped = std::async(std::launch::async, [&] { t->server->Stop(std::chrono::seconds(5)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Stop no longer accepts while it waits.
  auto refused = t->UnixClient().Send(Get("/echo"));
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().ToString();
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  handler.release.Set();
  auto first = blocked.get();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->body, "done");
  EXPECT_EQ(stopped.wait_for(std::chrono::seconds(5)), std::future_status::ready);
}

TEST(ServerLimitsTest, StopEndsAStreamPastTheDrainTime) {
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  auto streaming = std::async(std::launch::async, [&] {
    return t->UnixClient().SendForEvents(Get("/until-gone"),
                                         [](auto, auto) { return Status::Ok(); });
  });
  ASSERT_TRUE(handler.started.WaitFor(std::chrono::seconds(5)));
  auto start = Clock::now();
  t->server->Stop(std::chrono::milliseconds(100));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  EXPECT_TRUE(handler.gone_seen.IsSet());
  EXPECT_FALSE(streaming.get().ok());  // the stream ended without its last chunk
}

TEST(ServerLimitsTest, StaleSocketIsReplacedLiveOneAndFilesAreNot) {
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  ServerOptions o;
  o.listen = {t->unix_address};
  Server second(o, &handler);
  Status st = second.Start();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();

  std::string stale = t->dir + "/stale.sock";
  {
    base::UniqueFd fd(socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, stale.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }  // bound, never listened, closed: connect() is refused
  o.listen = {*ParseAddress("unix:" + stale)};
  Server third(o, &handler);
  st = third.Start();
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto resp = Client(third.bound()[0]).Send(Get("/echo"));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  third.Stop(std::chrono::seconds(1));

  std::string file = t->dir + "/file";
  std::ofstream(file) << "keep me";
  o.listen = {*ParseAddress("unix:" + file)};
  Server fourth(o, &handler);
  st = fourth.Start();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  std::ifstream in(file);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "keep me");
}

}  // namespace
}  // namespace codebox::http
