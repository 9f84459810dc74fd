// Server-sent events end to end: order, incremental delivery, the client leaving mid-stream.
#include <gtest/gtest.h>

#include <thread>

#include "http/test_handler.h"

namespace codebox::http {
namespace {

using testing::Get;
using testing::StartTestServer;
using testing::TestHandler;

TEST(EventsTest, EventsArriveInOrderAndAsTheyAreSent) {
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  for (const Client& client : {t->UnixClient(), t->TcpClient()}) {
    handler.release.Reset();
    std::vector<std::pair<std::string, std::string>> seen;
    bool second_sent_before_first_seen = false;
    auto resp = client.SendForEvents(Get("/events"), [&](std::string_view e, std::string_view d) {
      if (seen.empty()) {
        // The handler holds the second event until we release it: the first arrived alone.
        second_sent_before_first_seen = handler.release.IsSet();
        handler.release.Set();
      }
      seen.emplace_back(e, d);
      return Status::Ok();
    });
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    EXPECT_EQ(resp->status, 200);
    EXPECT_EQ(resp->headers["content-type"], "text/event-stream");
    EXPECT_EQ(resp->headers["cache-control"], "no-cache");
    EXPECT_FALSE(resp->headers["x-request-id"].empty());
    EXPECT_FALSE(second_sent_before_first_seen);
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0], std::make_pair(std::string("a"), std::string("1")));
    EXPECT_EQ(seen[1], std::make_pair(std::string("b"), std::string("2\nline2")));
  }
}

TEST(EventsTest, NonEventAnswerIsReturnedWhole) {
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  int events = 0;
  auto resp = t->UnixClient().SendForEvents(Get("/echo"), [&](auto, auto) {
    events++;
    return Status::Ok();
  });
  ASSERT_TRUE(resp.ok());
  EXPECT_EQ(resp->status, 200);
  EXPECT_EQ(resp->body.substr(0, 9), "GET /echo");
  EXPECT_EQ(events, 0);
}

TEST(EventsTest, ClientLeavingMidStreamFailsSendEvent) {
  TestHandler handler;
  auto t = StartTestServer(&handler);
  ASSERT_TRUE(t);
  int seen = 0;
  auto resp = t->UnixClient().SendForEvents(Get("/until-gone"), [&](auto, auto) {
    return ++seen == 3 ? Status(StatusCode::kInternal, "enough") : Status::Ok();
  });
  EXPECT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().message(), "enough");
  ASSERT_TRUE(handler.gone_seen.WaitFor(std::chrono::seconds(5)))
      << "the handler's SendEvent kept succeeding after the client left";
  EXPECT_TRUE(handler.client_gone_after_failure);
}

}  // namespace
}  // namespace codebox::http
