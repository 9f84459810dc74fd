// The HTTP client against the scripted server: no box needed, runs everywhere.
#include "llm/client.h"

#include <gtest/gtest.h>

#include "fake_server.h"

namespace codebox::llm {
namespace {

using std::chrono::milliseconds;
using testing::FakeServer;

class ClientTest : public ::testing::Test {
 protected:
  ChatClient Start(const std::string& scenario) {
    Status s = server_.Start(scenario);
    EXPECT_TRUE(s.ok()) << s.ToString();
    ClientOptions o;
    o.base_url = server_.base_url();
    o.api_key = "sk-test-key";
    o.model = "fake-model";
    o.initial_backoff = milliseconds(20);
    o.max_retries = 2;
    o.request_timeout = milliseconds(5'000);
    o.on_notice = [this](std::string_view n) { notices_.emplace_back(n); };
    return ChatClient(o);
  }
  std::vector<Message> Hello() { return {{"user", "hello", {}, {}}}; }

  FakeServer server_;
  std::vector<std::string> notices_;
};

TEST_F(ClientTest, StreamingDeliversTextInPieces) {
  ChatClient client = Start("streaming.json");
  std::vector<std::string> pieces;
  auto r = client.Complete(Hello(), {}, [&](std::string_view t) { pieces.emplace_back(t); });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(pieces.size(), 3u);
  std::string joined;
  for (auto& p : pieces) joined += p;
  EXPECT_EQ(joined, "This answer arrives in many small pieces over server-sent events.");
  EXPECT_EQ(r->reply.message.content, joined);
  auto requests = server_.Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["body"]["stream"], true);
  EXPECT_EQ(requests[0]["body"]["model"], "fake-model");
  EXPECT_EQ(requests[0]["headers"]["Authorization"], "Bearer sk-test-key");
}

TEST_F(ClientTest, NonStreamingReplyIsParsed) {
  ChatClient client = Start("streaming.json");
  ClientOptions o = client.options();
  o.stream = false;
  o.api_key = "";  // local servers need none: no Authorization header at all
  auto r = ChatClient(o).Complete(Hello(), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->reply.message.content, "This answer arrives in many small pieces over server-sent events.");
  EXPECT_FALSE(server_.Requests()[0]["headers"].contains("Authorization"));
}

TEST_F(ClientTest, RetriesAfter429HonouringRetryAfter) {
  ChatClient client = Start("retry_429.json");
  auto start = std::chrono::steady_clock::now();
  auto r = client.Complete(Hello(), {});
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->reply.message.content, "hello after the rate limit");
  EXPECT_EQ(r->attempts, 2);
  EXPECT_GE(elapsed, milliseconds(950));  // Retry-After: 1, not the 20 ms backoff
  ASSERT_EQ(notices_.size(), 1u);
  EXPECT_NE(notices_[0].find("HTTP 429"), std::string::npos);
}

TEST_F(ClientTest, UnauthorizedSaysCheckTheKey) {
  ChatClient client = Start("unauthorized.json");
  auto r = client.Complete(Hello(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("OPENAI_API_KEY"), std::string::npos);
  EXPECT_NE(r.status().message().find("Incorrect API key"), std::string::npos);
  EXPECT_EQ(server_.Requests().size(), 1u);  // 401 is not retried
}

TEST_F(ClientTest, MissingKeyForOpenAiIsSaidBeforeAnyRequest) {
  ClientOptions o;  // the default endpoint, which always wants a key
  o.api_key.clear();
  ChatClient client(o);
  auto r = client.Complete(Hello(), {}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("OPENAI_API_KEY is not set"), std::string::npos);
}

TEST_F(ClientTest, UnknownModelSaysCheckTheModelAndUrl) {
  ChatClient client = Start("model_not_found.json");
  auto r = client.Complete(Hello(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("fake-model"), std::string::npos);
  EXPECT_NE(r.status().message().find("does not exist"), std::string::npos);
  EXPECT_NE(r.status().message().find("--model"), std::string::npos);
}

TEST_F(ClientTest, ServerErrorsExhaustRetries) {
  ChatClient client = Start("server_error_500.json");
  auto r = client.Complete(Hello(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("after 3 attempts"), std::string::npos);
  EXPECT_NE(r.status().message().find("internal failure three"), std::string::npos);
  EXPECT_EQ(server_.Requests().size(), 3u);
  EXPECT_EQ(notices_.size(), 2u);
}

TEST_F(ClientTest, SlowReplyTimesOut) {
  ChatClient client = Start("slow_reply.json");
  ClientOptions o = client.options();
  o.request_timeout = milliseconds(500);
  auto start = std::chrono::steady_clock::now();
  auto r = ChatClient(o).Complete(Hello(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("no reply"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2'500));
}

TEST_F(ClientTest, MalformedReplyIsAProtocolError) {
  ChatClient client = Start("malformed_reply.json");
  ClientOptions o = client.options();
  o.stream = false;
  auto r = ChatClient(o).Complete(Hello(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(r.status().message().find("malformed reply"), std::string::npos);
}

TEST(ClientUnreachableTest, SaysTheServerIsNotThere) {
  ClientOptions o;
  o.base_url = "http://127.0.0.1:" + std::to_string(testing::UnusedPort()) + "/v1";
  o.model = "m";
  auto r = ChatClient(o).Complete({{"user", "hi", {}, {}}}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("OPENAI_BASE_URL"), std::string::npos);
}

TEST(ClientOptionsTest, EnvironmentFillsOnlyWhatIsEmpty) {
  setenv("OPENAI_BASE_URL", "http://example.invalid/v1", 1);
  setenv("CODEBOX_MODEL", "env-model", 1);
  ClientOptions o;
  o.base_url = "";
  o.model = "";
  o.api_key = "explicit";
  ClientOptions filled = ClientOptionsFromEnvironment(o);
  EXPECT_EQ(filled.base_url, "http://example.invalid/v1");
  EXPECT_EQ(filled.model, "env-model");
  EXPECT_EQ(filled.api_key, "explicit");
  unsetenv("OPENAI_BASE_URL");
  unsetenv("CODEBOX_MODEL");
}

}  // namespace
}  // namespace codebox::llm
