// MCP over Streamable HTTP at /mcp (src/server/api_mcp.cc) with codebox's own HTTP client: the
// session rules of the MCP specification (2025-11-25, "Transports"), bad requests, the session
// cap and the idle timeout need no box; the last test runs a tool in a real jail box and checks
// that the session's box is registered and destroyed with the session. The real-client test is
// tests/mcp/mcp_client_test.mjs (the official TypeScript SDK).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "http/client.h"
#include "http/server.h"
#include "server/api.h"
#include "server/box_registry.h"
#include "testing/box_test_util.h"
#include "tests/server/openapi_check.h"

namespace codebox::testing {
namespace {

using nlohmann::json;

json Request(int id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

json Initialize(int id = 1) {
  return Request(id, "initialize",
                 {{"protocolVersion", "2025-11-25"},
                  {"capabilities", json::object()},
                  {"clientInfo", {{"name", "api_mcp_test"}, {"version", "1"}}}});
}

class McpHttpTest : public ::testing::Test {
 public:
  // What a test changes before Start.
  uint32_t max_boxes_ = 4;
  std::chrono::milliseconds idle_timeout_ = std::chrono::minutes(10);

  void Start() {
    server::RegistryOptions registry_options;
    registry_options.defaults = TestBoxOptions();
    registry_options.max_boxes = max_boxes_;
    registry_ = std::make_unique<server::BoxRegistry>(registry_options);
    server::ApiOptions api_options;
    api_options.defaults = registry_options.defaults;
    api_options.max_boxes = max_boxes_;
    api_options.idle_timeout = idle_timeout_;
    api_ = std::make_unique<server::Api>(api_options, registry_.get());
    http::ServerOptions options;
    options.listen = {*http::ParseAddress("127.0.0.1:0")};
    server_ = std::make_unique<http::Server>(options, api_.get());
    Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
    registry_->Start();
    address_ = server_->bound().at(0);
  }
  void SetUp() override { Start(); }
  void TearDown() override {
    if (server_) server_->Stop(std::chrono::seconds(5));
    if (registry_) registry_->Shutdown();
    server_.reset();
    api_.reset();
    registry_.reset();
  }

  http::ClientResponse Send(http::ClientRequest request) {
    request.timeout = std::chrono::seconds(120);
    auto response = http::Client(address_).Send(request);
    EXPECT_TRUE(response.ok()) << response.status().ToString();
    if (!response.ok()) return {};
    if (request.target == "/mcp") {
      EXPECT_EQ(openapi_.Check(request.method, "/mcp", response->status,
                               response->headers["content-type"], response->body),
                "")
          << "the response does not fit src/server/openapi.json";
    }
    return *response;
  }

  // POST /mcp with the session's headers (none when `session` is "").
  http::ClientResponse Post(const json& message, const std::string& session,
                            const std::string& version = "2025-11-25") {
    http::ClientRequest request;
    request.method = "POST";
    request.target = "/mcp";
    request.body = message.dump();
    request.headers = {{"Accept", "application/json, text/event-stream"}};
    if (!session.empty()) {
      request.headers.emplace_back("Mcp-Session-Id", session);
      if (!version.empty()) request.headers.emplace_back("MCP-Protocol-Version", version);
    }
    return Send(request);
  }

  // initialize + notifications/initialized; the session id.
  std::string Open() {
    http::ClientResponse r = Post(Initialize(), "");
    EXPECT_EQ(r.status, 200) << r.body;
    std::string id = r.headers["mcp-session-id"];
    EXPECT_EQ(id.size(), 32u) << "128 random bits as hex: " << id;
    r = Post({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, id);
    EXPECT_EQ(r.status, 202) << r.body;
    EXPECT_EQ(r.body, "");
    return id;
  }

  http::ClientResponse Delete(const std::string& session) {
    http::ClientRequest request;
    request.method = "DELETE";
    request.target = "/mcp";
    if (!session.empty()) request.headers = {{"Mcp-Session-Id", session}};
    return Send(request);
  }

  static json Body(const http::ClientResponse& r) { return json::parse(r.body, nullptr, false); }

  std::unique_ptr<server::BoxRegistry> registry_;
  std::unique_ptr<server::Api> api_;
  std::unique_ptr<http::Server> server_;
  http::Address address_;
  OpenApiChecker openapi_;
};

TEST_F(McpHttpTest, InitializeGivesASessionThatAnswersRequests) {
  http::ClientResponse r = Post(Initialize(7), "");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["content-type"].rfind("application/json", 0), 0u);
  json init = Body(r);
  EXPECT_EQ(init["id"], 7);
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-11-25") << r.body;
  std::string session = r.headers["mcp-session-id"];
  ASSERT_EQ(session.size(), 32u);
  EXPECT_EQ(session.find_first_not_of("0123456789abcdef"), std::string::npos) << session;
  EXPECT_NE(Open(), session) << "each initialize makes a new session";

  r = Post(Request(2, "tools/list"), session);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(Body(r)["result"]["tools"].is_array()) << r.body;
  r = Post(Request(3, "ping"), session);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["id"], 3);
  // A response from the client (to nothing we asked) is accepted with no body.
  r = Post({{"jsonrpc", "2.0"}, {"id", 99}, {"result", json::object()}}, session);
  EXPECT_EQ(r.status, 202);
  r = Post(Request(4, "no/such/method"), session);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Body(r)["error"]["code"], -32601) << r.body;
}

TEST_F(McpHttpTest, SessionHeadersAreChecked) {
  std::string session = Open();
  http::ClientResponse r = Post(Request(1, "tools/list"), "");
  EXPECT_EQ(r.status, 400) << "no Mcp-Session-Id: " << r.body;
  EXPECT_NE(Body(r)["error"]["message"].get<std::string>().find("Mcp-Session-Id"),
            std::string::npos);
  EXPECT_EQ(Body(r)["id"], 1);
  r = Post(Request(1, "tools/list"), std::string(32, '0'));
  EXPECT_EQ(r.status, 404) << "an unknown session: " << r.body;
  r = Post(Request(1, "tools/list"), session, "1999-01-01");
  EXPECT_EQ(r.status, 400) << "an unsupported MCP-Protocol-Version: " << r.body;
  r = Post(Request(1, "tools/list"), session, "2025-06-18");
  EXPECT_EQ(r.status, 400) << "not the version negotiated: " << r.body;
  r = Post(Request(1, "tools/list"), session, std::string(8'000, '9'));
  EXPECT_EQ(r.status, 400) << "a long MCP-Protocol-Version: " << r.body;
  EXPECT_LT(Body(r)["error"]["message"].get<std::string>().size(), 400u) << "quoted in full";
  r = Post(Request(1, "tools/list"), session, "");
  EXPECT_EQ(r.status, 200) << "no version header: the one negotiated" << r.body;

  http::ClientRequest get;
  get.target = "/mcp";
  get.headers = {{"Accept", "text/event-stream"}, {"Mcp-Session-Id", session}};
  r = Send(get);
  EXPECT_EQ(r.status, 405) << "no server-initiated stream";
  EXPECT_EQ(r.headers["allow"], "POST, DELETE");

  EXPECT_EQ(Delete("").status, 400);
  EXPECT_EQ(Delete(session).status, 204);
  EXPECT_EQ(Post(Request(1, "ping"), session).status, 404) << "ended";
  EXPECT_EQ(Delete(session).status, 404);
}

TEST_F(McpHttpTest, BadRequestsAreAnsweredAndTheServerGoesOn) {
  std::string session = Open();
  http::ClientRequest request;
  request.method = "POST";
  request.target = "/mcp";
  request.headers = {{"Mcp-Session-Id", session}};
  request.body = "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ";
  http::ClientResponse r = Send(request);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Body(r)["error"]["code"], -32700) << r.body;
  request.body = Request(1, "ping").dump();
  request.content_type = "text/plain";
  EXPECT_EQ(Send(request).status, 415) << "a form post of another site cannot reach /mcp";
  request.content_type = "application/json; charset=utf-8";
  request.headers.emplace_back("Accept", "text/html");
  EXPECT_EQ(Send(request).status, 406);
  // The session still works.
  EXPECT_EQ(Post(Request(2, "ping"), session).status, 200);
  // A failed initialize makes no session.
  r = Post(Request(5, "initialize", {{"protocolVersion", 42}}), "");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(Body(r).contains("error")) << r.body;
  EXPECT_EQ(r.headers.count("mcp-session-id"), 0u) << r.body;
}

class McpHttpCapTest : public McpHttpTest {
 protected:
  void SetUp() override {
    max_boxes_ = 2;
    idle_timeout_ = std::chrono::milliseconds(400);
    Start();
  }
};

TEST_F(McpHttpCapTest, SessionsAreCappedAndIdleOnesEnd) {
  std::string a = Open(), b = Open();
  http::ClientResponse r = Post(Initialize(), "");
  EXPECT_EQ(r.status, 429) << "past --max-boxes sessions: " << r.body;
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_NE(Body(r)["error"]["message"].get<std::string>().find("--max-boxes"), std::string::npos);
  EXPECT_EQ(Delete(a).status, 204);
  std::string c = Open();
  EXPECT_FALSE(c.empty());
  // Idle past the timeout (the reaper looks every 100 ms here): ended.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 200;
  while (status != 404 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    status = Post(Request(1, "ping"), b).status;
  }
  EXPECT_EQ(status, 404) << "an idle session ends";
}

// run_python in `session`: the result (fails the test on an HTTP error).
json RunPython(McpHttpTest& t, const std::string& session, const std::string& code);

TEST_F(McpHttpTest, ToolCallRunsInARegisteredBoxThatEndsWithTheSession) {
  std::string skip;
  if (!MakeBoxOrSkipReason(TestBoxOptions(), &skip)) GTEST_SKIP() << skip;
  std::string a = Open(), b = Open();
  json result = RunPython(*this, a, "x = 6 * 7\nprint(x)");
  EXPECT_NE(result.dump().find("42"), std::string::npos) << result;
  EXPECT_NE(result.value("isError", false), true) << result;
  ASSERT_EQ(registry_->List().size(), 1u)
      << "the session's box is registered (counts in --max-boxes); b has made none yet";
  result = RunPython(*this, b, "print(x)");
  EXPECT_EQ(result.value("isError", false), true) << "each session has its own box: " << result;
  EXPECT_NE(result.dump().find("NameError"), std::string::npos) << result;
  EXPECT_EQ(registry_->List().size(), 2u);
  EXPECT_EQ(Delete(a).status, 204);
  EXPECT_EQ(registry_->List().size(), 1u) << "DELETE /mcp destroys the session's box";
  EXPECT_EQ(Delete(b).status, 204);
  EXPECT_EQ(registry_->box_count(), 0u);
}

TEST_F(McpHttpTest, DeleteDuringACallDestroysTheBoxNow) {
  std::string skip;
  if (!MakeBoxOrSkipReason(TestBoxOptions(), &skip)) GTEST_SKIP() << skip;
  std::string session = Open();
  auto started = std::chrono::steady_clock::now();
  json result;
  std::thread call([&] { result = RunPython(*this, session, "import time\ntime.sleep(60)"); });
  auto deadline = started + std::chrono::seconds(30);
  while (registry_->box_count() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the cell is running
  EXPECT_EQ(Delete(session).status, 204);
  EXPECT_EQ(registry_->box_count(), 0u) << "the box goes at once, not after the call";
  call.join();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(40))
      << "the running call ended with its box";
  EXPECT_EQ(result.value("isError", false), true) << result;
}

TEST_F(McpHttpCapTest, AnIdleSessionsBoxIsDestroyed) {
  std::string skip;
  if (!MakeBoxOrSkipReason(TestBoxOptions(), &skip)) GTEST_SKIP() << skip;
  std::string session = Open();
  json result = RunPython(*this, session, "print(1)");
  EXPECT_NE(result.value("isError", false), true) << result;
  EXPECT_EQ(registry_->List().size(), 1u);
  // The registry's own idle timeout is 10 minutes here: only the session's end destroys it.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (registry_->box_count() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(registry_->box_count(), 0u) << "the idle session ended with its box";
  EXPECT_EQ(Post(Request(9, "ping"), session).status, 404);
}

json RunPython(McpHttpTest& t, const std::string& session, const std::string& code) {
  static int id = 100;
  http::ClientResponse r =
      t.Post(Request(++id, "tools/call", {{"name", "run_python"}, {"arguments", {{"code", code}}}}),
             session);
  EXPECT_EQ(r.status, 200) << r.body;
  json result = json::parse(r.body, nullptr, false)["result"];
  EXPECT_TRUE(result.is_object() && result["content"].is_array()) << r.body;
  return result;
}

}  // namespace
}  // namespace codebox::testing
