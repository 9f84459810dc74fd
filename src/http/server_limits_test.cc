// What a hostile or slow client cannot do: send too much, trickle bytes, hold every
// connection (of a listener, of an address) or every handler thread, make the server buffer
// for a stream it does not read; and how Stop treats requests in flight.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <future>
#include <iostream>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "http/test_handler.h"

namespace codebox::http {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Get;
using testing::Post;
using testing::StartTestServer;
using testing::TestHandler;

// A connection to 127.0.0.1:`port` from the source address `from` (another address of the
// loopback net is another peer to the server), with a receive buffer of `rcvbuf` bytes when
// not 0.
base::UniqueFd ConnectTcpFrom(const char* from, uint16_t port, int rcvbuf = 0) {
  base::UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (rcvbuf > 0) setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in source{};
  source.sin_family = AF_INET;
  EXPECT_EQ(inet_pton(AF_INET, from, &source.sin_addr), 1);
  EXPECT_EQ(bind(fd.get(), reinterpret_cast<sockaddr*>(&source), sizeof(source)), 0) << from;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

base::UniqueFd ConnectTcp(uint16_t port) { return ConnectTcpFrom("127.0.0.1", port); }

base::UniqueFd ConnectUnix(const std::string& path) {
  base::UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

bool SendText(int fd, std::string_view text) {
  return send(fd, text.data(), text.size(), MSG_NOSIGNAL) == ssize_t(text.size());
}

// Reads one response (head and Content-Length body) off a raw connection; "" when the
// connection closes or `timeout` passes first.
std::string ReadResponse(int fd, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  std::string in;
  size_t want = std::string::npos;
  auto end = Clock::now() + timeout;
  while (Clock::now() < end && in.size() < want) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) continue;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return "";
    in.append(buf, n);
    size_t head = in.find("\r\n\r\n");
    if (want == std::string::npos && head != std::string::npos) {
      size_t at = in.find("Content-Length: ");
      want = head + 4 + (at < head ? std::stoul(in.substr(at + 16)) : 0);
    }
  }
  return in.size() >= want ? in : "";
}

// Waits (at most 5 s) until `done` holds.
template <class Pred>
bool WaitUntil(Pred done) {
  for (auto end = Clock::now() + std::chrono::seconds(5); Clock::now() < end;) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

const std::string kEchoRequest = "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n";
// A request's head begun: the connection is no longer idle.
const std::string kHeadBegun = "GET /echo HTTP/1.1\r\nHost: x\r\n";

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
  // Each has begun a request, so neither is idle: there is nothing to evict.
  ASSERT_TRUE(SendText(a.get(), kHeadBegun));
  ASSERT_TRUE(SendText(b.get(), kHeadBegun));
  EXPECT_TRUE(WaitUntil([&] {
    auto st = t->server->stats();
    return st.connections_open == 2 && st.connections_idle == 0;
  }));
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

// The flood: many more TCP connections than the budget that send nothing. They evict
// one another (oldest first), TCP clients are still served, and the unix socket, with a budget
// of its own, is served whatever TCP clients do: even a TCP budget full of connections that
// cannot be evicted refuses only TCP.
TEST(ServerLimitsTest, TcpFloodDoesNotStarveTheUnixSocket) {
  TestHandler handler;
  ServerOptions o;
  o.max_connections = 4;
  o.unix_max_connections = 4;
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  std::vector<base::UniqueFd> idle;
  for (int i = 0; i < 40; ++i) idle.push_back(ConnectTcp(t->tcp_address.port));
  EXPECT_TRUE(WaitUntil([&] { return t->server->stats().evicted_connections == 36; }));
  auto resp = t->UnixClient().Send(Get("/echo"));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 200);
  resp = t->TcpClient().Send(Get("/echo"));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 200);
  EXPECT_EQ(t->server->stats().rejected_connections, 0u);
  idle.clear();

  // Now the TCP budget full of requests begun (not idle): further TCP connections are closed at
  // once, the unix socket is still served.
  EXPECT_TRUE(WaitUntil([&] { return t->server->stats().connections_open == 0; }));
  std::vector<base::UniqueFd> busy;
  for (int i = 0; i < 4; ++i) {
    busy.push_back(ConnectTcp(t->tcp_address.port));
    ASSERT_TRUE(SendText(busy.back().get(), kHeadBegun));
  }
  EXPECT_TRUE(WaitUntil([&] {
    auto st = t->server->stats();
    return st.connections_open == 4 && st.connections_idle == 0;
  }));
  uint64_t evicted = t->server->stats().evicted_connections;
  std::vector<base::UniqueFd> refused;
  for (int i = 0; i < 20; ++i) refused.push_back(ConnectTcp(t->tcp_address.port));
  for (auto& fd : refused) EXPECT_TRUE(ClosedWithin(fd.get(), std::chrono::seconds(2)));
  EXPECT_EQ(t->server->stats().rejected_connections, 20u);
  for (int i = 0; i < 3; ++i) {
    resp = t->UnixClient().Send(Get("/echo"));
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    EXPECT_EQ(resp->status, 200);
  }
  EXPECT_EQ(t->server->stats().evicted_connections, evicted);
  // The TCP requests begun are served when their heads end.
  for (auto& fd : busy) {
    ASSERT_TRUE(SendText(fd.get(), "\r\n"));
    EXPECT_EQ(ReadResponse(fd.get()).substr(0, 12), "HTTP/1.1 200");
  }
}

// The unix socket's own budget evicts its idle connections just as TCP's does.
TEST(ServerLimitsTest, UnixBudgetEvictsItsIdleConnections) {
  TestHandler handler;
  ServerOptions o;
  o.unix_max_connections = 2;
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  base::UniqueFd a = ConnectUnix(t->unix_address.path);
  base::UniqueFd b = ConnectUnix(t->unix_address.path);
  EXPECT_TRUE(WaitUntil([&] { return t->server->stats().connections_idle == 2; }));
  auto resp = t->UnixClient().Send(Get("/echo"));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 200);
  EXPECT_EQ(t->server->stats().evicted_connections, 1u);
  EXPECT_TRUE(ClosedWithin(a.get(), std::chrono::seconds(2))) << "the oldest idle one goes";
  ASSERT_TRUE(SendText(b.get(), kEchoRequest));
  EXPECT_EQ(ReadResponse(b.get()).substr(0, 12), "HTTP/1.1 200");
}

// One address (127.0.0.2) holds at most its share: its flood of idle connections evicts only
// its own, and past its share with none idle its new connections are closed at once, while
// another address (127.0.0.1) keeps its connections and is served.
TEST(ServerLimitsTest, FloodFromOneAddressDoesNotStopAnother) {
  TestHandler handler;
  ServerOptions o;
  o.max_connections = 6;
  o.max_connections_per_address = 3;
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  uint16_t port = t->tcp_address.port;
  // 127.0.0.1's two connections, kept alive between requests (idle).
  base::UniqueFd keep1 = ConnectTcpFrom("127.0.0.1", port);
  base::UniqueFd keep2 = ConnectTcpFrom("127.0.0.1", port);
  for (int fd : {keep1.get(), keep2.get()}) {
    ASSERT_TRUE(SendText(fd, kEchoRequest));
    ASSERT_EQ(ReadResponse(fd).substr(0, 12), "HTTP/1.1 200");
  }
  std::vector<base::UniqueFd> flood;
  for (int i = 0; i < 30; ++i) flood.push_back(ConnectTcpFrom("127.0.0.2", port));
  EXPECT_TRUE(WaitUntil([&] { return t->server->stats().evicted_connections == 27; }));
  EXPECT_EQ(t->server->stats().connections_open, 5u);
  for (int i = 0; i < 27; ++i) EXPECT_TRUE(ClosedWithin(flood[i].get(), std::chrono::seconds(2)));
  for (int fd : {keep1.get(), keep2.get()}) {
    ASSERT_TRUE(SendText(fd, kEchoRequest));
    EXPECT_EQ(ReadResponse(fd).substr(0, 12), "HTTP/1.1 200") << "127.0.0.1 kept its own";
  }

  // 127.0.0.2's three left begin requests: its share is full with none idle.
  EXPECT_TRUE(WaitUntil([&] { return t->server->stats().connections_idle == 5; }));
  for (int i = 27; i < 30; ++i) ASSERT_TRUE(SendText(flood[i].get(), kHeadBegun));
  EXPECT_TRUE(WaitUntil([&] { return t->server->stats().connections_idle == 2; }));
  std::vector<base::UniqueFd> refused;
  for (int i = 0; i < 10; ++i) refused.push_back(ConnectTcpFrom("127.0.0.2", port));
  for (auto& fd : refused) EXPECT_TRUE(ClosedWithin(fd.get(), std::chrono::seconds(2)));
  EXPECT_EQ(t->server->stats().rejected_connections, 10u);
  EXPECT_EQ(t->server->stats().evicted_connections, 27u);
  auto resp = t->TcpClient().Send(Get("/echo"));  // from 127.0.0.1, a sixth connection
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 200);
  ASSERT_TRUE(SendText(keep1.get(), kEchoRequest));
  EXPECT_EQ(ReadResponse(keep1.get()).substr(0, 12), "HTTP/1.1 200");
}

// A new connection has first_byte_timeout for its first byte; one kept alive after a request
// waits read_timeout for its next.
TEST(ServerLimitsTest, ConnectionThatSendsNothingIsClosedAfterFirstByteTimeout) {
  TestHandler handler;
  ServerOptions o;
  o.first_byte_timeout = std::chrono::milliseconds(300);
  o.read_timeout = std::chrono::milliseconds(1200);
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  auto start = Clock::now();
  base::UniqueFd tcp = ConnectTcp(t->tcp_address.port);
  base::UniqueFd unix_fd = ConnectUnix(t->unix_address.path);
  EXPECT_TRUE(ClosedWithin(tcp.get(), std::chrono::seconds(3)));
  EXPECT_TRUE(ClosedWithin(unix_fd.get(), std::chrono::seconds(3)));
  auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, std::chrono::milliseconds(250));
  EXPECT_LT(elapsed, std::chrono::milliseconds(2000));

  base::UniqueFd kept = ConnectTcp(t->tcp_address.port);
  ASSERT_TRUE(SendText(kept.get(), kEchoRequest));
  ASSERT_EQ(ReadResponse(kept.get()).substr(0, 12), "HTTP/1.1 200");
  start = Clock::now();
  EXPECT_FALSE(ClosedWithin(kept.get(), std::chrono::milliseconds(700)));
  EXPECT_TRUE(ClosedWithin(kept.get(), std::chrono::seconds(3)));
  elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, std::chrono::milliseconds(1100));
  EXPECT_EQ(t->server->stats().evicted_connections, 0u);
}

// Slowloris: a head a byte every 200 ms is cut header_timeout after its first byte, long
// before read_timeout; a body may take longer than header_timeout (read_timeout covers it).
TEST(ServerLimitsTest, SlowLorisHeadIsCutAfterHeaderTimeout) {
  TestHandler handler;
  ServerOptions o;
  o.header_timeout = std::chrono::seconds(1);
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  base::UniqueFd slow = ConnectTcp(t->tcp_address.port);
  std::string request = "GET /echo HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaa\r\n\r\n";
  auto start = Clock::now();
  bool closed = false;
  for (size_t i = 0; i < request.size() && !closed; ++i) {
    if (send(slow.get(), &request[i], 1, MSG_NOSIGNAL) != 1) break;
    closed = ClosedWithin(slow.get(), std::chrono::milliseconds(200));
  }
  auto elapsed = Clock::now() - start;
  EXPECT_TRUE(closed) << "the slow client was not cut off";
  EXPECT_GE(elapsed, std::chrono::milliseconds(950));
  EXPECT_LT(elapsed, std::chrono::milliseconds(2500));
  EXPECT_EQ(handler.handled, 0);

  base::UniqueFd upload = ConnectTcp(t->tcp_address.port);
  ASSERT_TRUE(
      SendText(upload.get(), "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\n"));
  for (char c : std::string("12345678")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_TRUE(SendText(upload.get(), std::string(1, c)));
  }
  std::string answer = ReadResponse(upload.get());
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 200");
  EXPECT_NE(answer.find("body: 12345678"), std::string::npos) << answer;
}

// Connections kept alive between requests are idle: a full budget evicts the oldest of them
// to admit a new one.
TEST(ServerLimitsTest, IdleKeepAliveConnectionsAreEvictedToAdmitNewOnes) {
  TestHandler handler;
  ServerOptions o;
  o.max_connections = 2;
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  // a, then b, served and idle again (the server marks one idle just after its answer).
  base::UniqueFd a = ConnectTcp(t->tcp_address.port);
  ASSERT_TRUE(SendText(a.get(), kEchoRequest));
  ASSERT_EQ(ReadResponse(a.get()).substr(0, 12), "HTTP/1.1 200");
  EXPECT_TRUE(WaitUntil([&] { return t->server->stats().connections_idle == 1; }));
  base::UniqueFd b = ConnectTcp(t->tcp_address.port);
  ASSERT_TRUE(SendText(b.get(), kEchoRequest));
  ASSERT_EQ(ReadResponse(b.get()).substr(0, 12), "HTTP/1.1 200");
  EXPECT_TRUE(WaitUntil([&] { return t->server->stats().connections_idle == 2; }));
  auto resp = t->TcpClient().Send(Get("/echo"));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 200);
  EXPECT_EQ(t->server->stats().evicted_connections, 1u);
  EXPECT_EQ(t->server->stats().rejected_connections, 0u);
  EXPECT_TRUE(ClosedWithin(a.get(), std::chrono::seconds(2))) << "the oldest idle one goes";
  ASSERT_TRUE(SendText(b.get(), kEchoRequest));
  EXPECT_EQ(ReadResponse(b.get()).substr(0, 12), "HTTP/1.1 200");
}

// A connection whose handler runs, or whose request has begun, is never evicted: with the
// budget full of them a new connection is refused instead.
TEST(ServerLimitsTest, ConnectionWithARequestInFlightIsNeverEvicted) {
  TestHandler handler;
  ServerOptions o;
  o.max_connections = 2;
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  base::UniqueFd handling = ConnectTcp(t->tcp_address.port);
  ASSERT_TRUE(SendText(handling.get(), "GET /block HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(handler.started.WaitFor(std::chrono::seconds(5)));
  base::UniqueFd reading = ConnectTcp(t->tcp_address.port);
  ASSERT_TRUE(SendText(reading.get(), kHeadBegun));
  EXPECT_TRUE(WaitUntil([&] {
    auto st = t->server->stats();
    return st.connections_open == 2 && st.connections_idle == 0;
  }));
  for (int i = 0; i < 5; ++i) {
    base::UniqueFd c = ConnectTcp(t->tcp_address.port);
    EXPECT_TRUE(ClosedWithin(c.get(), std::chrono::seconds(2)));
  }
  EXPECT_EQ(t->server->stats().rejected_connections, 5u);
  EXPECT_EQ(t->server->stats().evicted_connections, 0u);
  ASSERT_TRUE(SendText(reading.get(), "\r\n"));
  EXPECT_EQ(ReadResponse(reading.get()).substr(0, 12), "HTTP/1.1 200");
  handler.release.Set();
  std::string done = ReadResponse(handling.get());
  EXPECT_EQ(done.substr(0, 12), "HTTP/1.1 200");
  EXPECT_NE(done.find("done"), std::string::npos);
}

// An event-stream client that never reads: SendEvent blocks while the socket buffers are full
// and fails after write_timeout, so the server holds one event, not the stream.
TEST(ServerLimitsTest, EventStreamReaderThatNeverReadsIsNotBuffered) {
  TestHandler handler;
  ServerOptions o;
  o.write_timeout = std::chrono::milliseconds(300);
  auto t = StartTestServer(&handler, o);
  ASSERT_TRUE(t);
  base::UniqueFd fd = ConnectTcpFrom("127.0.0.1", t->tcp_address.port, 4096);
  ASSERT_TRUE(
      SendText(fd.get(), "GET /flood HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"));
  ASSERT_TRUE(handler.started.WaitFor(std::chrono::seconds(5)));
  ASSERT_TRUE(handler.gone_seen.WaitFor(std::chrono::seconds(10)));
  int sent = handler.events_sent.load();
  // What the kernel's socket buffers took; without back-pressure it would be all 4096 (256 MiB).
  EXPECT_LT(sent, 256) << sent << " events of 64 KiB were taken";
  std::cout << "[          ] a reader that never reads took " << sent << " events of 64 KiB\n";
  EXPECT_TRUE(ClosedWithin(fd.get(), std::chrono::seconds(2)));
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
  // reached the client (on a busy machine, after the next request or two arrived): each body is
  // taken again within a moment, however many requests came before it.
  auto taken_within_a_moment = [&](size_t bytes) {
    int status = 0;
    for (auto end = Clock::now() + std::chrono::seconds(2); Clock::now() < end && status != 200;) {
      auto again = t->UnixClient().Send(Post("/echo", std::string(bytes, 'd')));
      if (!again.ok()) return -1;
      status = again->status;
      if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return status;
  };
  EXPECT_EQ(taken_within_a_moment(2000), 200) << "the budget is given back after each request";
  for (int i = 0; i < 10; ++i) {  // none of it leaks, request after request
    EXPECT_EQ(taken_within_a_moment(i % 2 == 0 ? 1000 : 2000), 200) << "request " << i;
  }
  EXPECT_EQ(taken_within_a_moment(2000), 200) << "after ten more, a full-size body still fits";
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
