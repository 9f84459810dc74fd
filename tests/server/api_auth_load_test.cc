// Bearer tokens over both listeners, and 100 concurrent clients each getting its own answer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "testing/box_test_util.h"
#include "tests/server/server_fixture.h"

namespace codebox::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

class ApiAuthTest : public ServerFixture {
 protected:
  void SetUp() override {
    tokens_ = {"first-token-0123456789", "second-token-abcdef"};
    ServerFixture::SetUp();
  }
};

TEST_F(ApiAuthTest, TokensOnUnixAndTcp) {
  for (bool tcp : {false, true}) {
    SCOPED_TRACE(tcp ? "tcp" : "unix");
    auto client = [&](const std::string& token) {
      return tcp ? TcpClient(token) : UnixClient(token);
    };
    http::ClientRequest status;
    status.target = "/v1/status";
    for (const std::string& wrong : {std::string(), std::string("first-token-012345678"),
                                     std::string("first-token-0123456789x")}) {
      auto r = client(wrong).Send(status);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->status, 401) << "token '" << wrong << "'";
      json body = json::parse(r->body, nullptr, false);
      EXPECT_EQ(openapi_.Check("GET", "/v1/status", r->status, r->headers["content-type"], r->body),
                "");
      EXPECT_EQ(body["error"]["code"], "unauthenticated") << r->body;
    }
    for (const std::string& right : tokens_) {
      auto r = client(right).Send(status);
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->status, 200);
    }
    http::ClientRequest health;
    health.target = "/healthz";
    auto r = client("").Send(health);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << "/healthz needs no token";
    http::ClientRequest metrics;
    metrics.target = "/metrics";
    r = client("").Send(metrics);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 401) << "/metrics needs the token";
  }
}

class ApiLoadTest : public ServerFixture {
 protected:
  void SetUp() override {
    auto pool = server::ParsePoolSpec("python=4", TestBoxOptions());
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pools_ = {*pool};
    max_boxes_ = 8;  // 16 threads against 8 boxes (4 of them the pool): some answers are 429
    ServerFixture::SetUp();
  }
};

// 100 clients at once (16 threads, over both listeners), each POST /v1/run print(i): every one
// gets its own i. A 429 (the server at max_boxes) is retried after its Retry-After.
TEST_F(ApiLoadTest, HundredConcurrentClientsEachGetTheirOwnAnswer) {
  constexpr int kClients = 100;
  constexpr int kThreads = 16;
  const auto deadline = Clock::now() + std::chrono::minutes(2);
  std::atomic<int> next{0};
  std::atomic<int> retried{0};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::string> answers(kClients);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      http::Client client = t % 2 == 0 ? UnixClient() : TcpClient();
      for (int i = next++; i < kClients && Clock::now() < deadline; i = next++) {
        http::ClientRequest request;
        request.method = "POST";
        request.target = "/v1/run";
        request.body = json({{"code", "print(" + std::to_string(i) + ")"}}).dump();
        for (int attempt = 0; attempt < 200 && Clock::now() < deadline; ++attempt) {
          auto r = client.Send(request);
          if (r.ok() && r->status == 429) {
            EXPECT_EQ(r->headers["retry-after"], "1");
            ++retried;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            continue;
          }
          std::lock_guard<std::mutex> lock(mu);
          if (!r.ok()) {
            failures.push_back(std::to_string(i) + ": " + r.status().ToString());
          } else if (r->status != 200) {
            failures.push_back(std::to_string(i) + ": " + std::to_string(r->status) + r->body);
          } else {
            answers[i] = json::parse(r->body, nullptr, false).value("stdout", "?");
          }
          break;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LT(Clock::now(), deadline) << "100 one-shot runs took over 2 minutes";
  EXPECT_TRUE(failures.empty()) << ::testing::PrintToString(failures);
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(answers[i], std::to_string(i) + "\n") << i;
  std::printf("100 clients: %d answers of 429 retried\n", retried.load());
  EXPECT_EQ(Json(Call("GET", "/healthz", "/healthz"))["status"], "ok");
}

// A pool box's /python runs in its prewarmed interpreter; a client gone mid-run ends it too.
TEST_F(ApiLoadTest, ClientGoneMidWarmPythonKillsIt) {
  bool ready = false;
  for (auto end = Clock::now() + std::chrono::seconds(30); !ready && Clock::now() < end;) {
    ready = !registry_->Pools().empty() && registry_->Pools()[0].ready > 0;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(ready) << "the pool did not fill";
  json box = Json(Call("POST", "/v1/boxes", "/v1/boxes", "{}"));
  ASSERT_EQ(box["from_pool"], true);
  const std::string id = box["id"];
  http::ClientRequest request;
  request.method = "POST";
  request.target = "/v1/boxes/" + id + "/python";
  request.body =
      json({{"code", "print(1, flush=True)\nimport time\ntime.sleep(60)"}, {"timeout", 120}})
          .dump();
  request.headers = {{"Accept", "text/event-stream"}};
  auto r = UnixClient().SendForEvents(request, [](std::string_view, std::string_view) {
    return Status(StatusCode::kInternal, "the test hangs up");
  });
  EXPECT_FALSE(r.ok());
  bool idle = false;
  for (auto end = Clock::now() + std::chrono::seconds(10); !idle && Clock::now() < end;) {
    auto record = registry_->Get(id);
    idle = record.ok() && record->state == "idle";
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(idle) << "the prewarmed python3 ran on after its client went away";
  auto next = Call("POST", "/v1/boxes/" + id + "/python", "/v1/boxes/{id}/python",
                   R"j({"code": "print(5)"})j");
  EXPECT_EQ(Json(next)["stdout"], "5\n") << "the box still runs code";
}

}  // namespace
}  // namespace codebox::testing
