// Client errors: nothing listening, deadlines, oversized answers; query encoding.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/text.h"
#include "base/unique_fd.h"
#include "http/test_handler.h"

namespace codebox::http {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Get;
using testing::StartTestServer;
using testing::TestHandler;

TEST(ClientTest, NothingListeningIsUnavailable) {
  auto unix_address = ParseAddress("unix:/nonexistent-codebox-dir/codebox.sock");
  auto resp = Client(*unix_address).Send(Get("/healthz"));
  EXPECT_EQ(resp.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(resp.status().message(),
            "no codebox server at unix:/nonexistent-codebox-dir/codebox.sock: is `codebox serve` "
            "running?");

  // A port that was just free.
  base::UniqueFd fd(socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  fd.reset();
  auto tcp = ParseAddress("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)));
  auto resp2 = Client(*tcp).Send(Get("/healthz"));
  EXPECT_EQ(resp2.status().code(), StatusCode::kUnavailable) << resp2.status().ToString();
}

TEST(ClientTest, RequestTimeoutIsDeadlineExceeded) {
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  ClientRequest r = Get("/block");
  r.timeout = std::chrono::milliseconds(200);
  auto start = Clock::now();
  auto resp = t->UnixClient().Send(r);
  EXPECT_EQ(resp.status().code(), StatusCode::kDeadlineExceeded) << resp.status().ToString();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  handler.release.Set();
}

TEST(ClientTest, EventStreamTimeoutIsPerWait) {
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  ClientRequest r = Get("/events");
  r.timeout = std::chrono::milliseconds(300);
  int events = 0;
  auto resp = t->TcpClient().SendForEvents(r, [&](auto, auto) {
    events++;
    return Status::Ok();
  });
  // The first event came; the second never did within the wait.
  EXPECT_EQ(events, 1);
  EXPECT_EQ(resp.status().code(), StatusCode::kDeadlineExceeded) << resp.status().ToString();
  handler.release.Set();
}

TEST(ClientTest, OversizedAnswerIsLimitExceeded) {
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  ClientOptions o;
  o.max_response_bytes = 10;
  auto resp = t->UnixClient(o).Send(Get("/echo"));
  EXPECT_EQ(resp.status().code(), StatusCode::kLimitExceeded) << resp.status().ToString();
  o.max_response_bytes = 1000;
  EXPECT_TRUE(t->UnixClient(o).Send(Get("/echo")).ok());
}

TEST(ClientTest, EncodesQueries) {
  EXPECT_EQ(base::PercentEncode("a b/c~d_e.f-g"), "a%20b%2Fc~d_e.f-g");
  EXPECT_EQ(base::PercentEncode("ü+&="), "%C3%BC%2B%26%3D");
  EXPECT_EQ(EncodeQuery({{"path", "/work/a b"}, {"list", "1"}}), "path=%2Fwork%2Fa%20b&list=1");
  EXPECT_EQ(EncodeQuery({}), "");
}

}  // namespace
}  // namespace codebox::http
