// The Origin and Host checks (src/server/api_origin.h): the rules, then a real server on
// loopback TCP with and without tokens. No box is needed: the refused requests never reach
// one, and the allowed ones ask for the server's status.
#include "server/api_origin.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "http/client.h"
#include "http/server.h"
#include "server/api.h"
#include "server/box_registry.h"
#include "tests/server/openapi_check.h"

namespace codebox::testing {
namespace {

using nlohmann::json;
using server::IsLoopbackNameOrIpLiteral;
using server::RefusedOrigin;

http::Request WithHeaders(const std::string& host, const std::string& origin) {
  http::Request r;
  r.method = "POST";
  r.path = "/mcp";
  if (!host.empty()) r.headers["host"] = host;
  if (!origin.empty()) r.headers["origin"] = origin;
  return r;
}

TEST(ApiOriginRules, LoopbackNamesAndIpLiterals) {
  for (const char* ok : {"localhost", "LocalHost:8080", "127.0.0.1", "127.0.0.1:39000", "[::1]",
                         "[::1]:8080", "10.1.2.3:80", "[fe80::1]:1"}) {
    EXPECT_TRUE(IsLoopbackNameOrIpLiteral(ok)) << ok;
  }
  for (const char* bad :
       {"", "evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io:80",
        "[::1", "[::1]x", "localhost:abc", "127.0.0.1:", "0x7f000001"}) {
    EXPECT_FALSE(IsLoopbackNameOrIpLiteral(bad)) << bad;
  }
}

TEST(ApiOriginRules, OriginMustBeTheServersOwn) {
  EXPECT_EQ(RefusedOrigin(WithHeaders("", ""), false), "") << "the unix socket: no headers";
  EXPECT_EQ(RefusedOrigin(WithHeaders("127.0.0.1:8080", ""), false), "") << "curl";
  EXPECT_EQ(RefusedOrigin(WithHeaders("127.0.0.1:8080", "http://127.0.0.1:8080"), false), "");
  EXPECT_EQ(RefusedOrigin(WithHeaders("LOCALHOST:8080", "http://localhost:8080"), false), "");
  EXPECT_EQ(RefusedOrigin(WithHeaders("localhost:8080", "https://localhost:8080"), false), "");
  for (const char* other : {"http://evil.example", "null", "http://127.0.0.1:8081",
                            "http://127.0.0.1:8080.evil.example", "http://localhost:8080"}) {
    EXPECT_NE(RefusedOrigin(WithHeaders("127.0.0.1:8080", other), false), "") << other;
    EXPECT_NE(RefusedOrigin(WithHeaders("127.0.0.1:8080", other), true), "")
        << other << ": a token does not let another site's page in";
  }
  EXPECT_NE(RefusedOrigin(WithHeaders("", "http://evil.example"), false), "")
      << "an Origin with no Host to compare with";
}

TEST(ApiOriginRules, HostMustBeLoopbackWithoutTokens) {
  // DNS rebinding: the attacker's name resolves to 127.0.0.1; Origin and Host agree.
  http::Request rebound = WithHeaders("evil.example:8080", "http://evil.example:8080");
  std::string why = RefusedOrigin(rebound, false);
  EXPECT_NE(why.find("--token-file"), std::string::npos) << why;
  EXPECT_NE(RefusedOrigin(WithHeaders("evil.example:8080", ""), false), "");
  // With tokens the name is the operator's (a server on 0.0.0.0 behind a DNS name).
  EXPECT_EQ(RefusedOrigin(rebound, true), "");
  EXPECT_EQ(RefusedOrigin(WithHeaders("codebox.internal:8080", ""), true), "");
}

// Origin and Host are the client's, as long as the header limit: the refusal quotes an excerpt.
TEST(ApiOriginRules, RefusalQuotesOnlyAnExcerpt) {
  const std::string long_origin = "http://" + std::string(10'000, 'o') + ".example";
  const std::string long_host = std::string(10'000, 'h') + ".example:8080";
  std::string why = RefusedOrigin(WithHeaders(long_host, long_origin), true);
  EXPECT_NE(why, "");
  EXPECT_LT(why.size(), 400u) << why.size();
  why = RefusedOrigin(WithHeaders(long_host, ""), false);
  EXPECT_NE(why.find("--token-file"), std::string::npos) << why;
  EXPECT_LT(why.size(), 400u) << why.size();
}

// A server on 127.0.0.1:0 over a registry that never starts a box.
class ApiOriginServerTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) token_ = "origin-test-token-0123456789";
    server::RegistryOptions registry_options;
    registry_ = std::make_unique<server::BoxRegistry>(registry_options);
    server::ApiOptions api_options;
    api_options.tokens_required = GetParam();
    api_ = std::make_unique<server::Api>(api_options, registry_.get());
    http::ServerOptions options;
    options.listen = {*http::ParseAddress("127.0.0.1:0")};
    if (!token_.empty()) options.tokens = {token_};
    server_ = std::make_unique<http::Server>(options, api_.get());
    Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
    address_ = server_->bound().at(0);
  }
  void TearDown() override {
    if (server_) server_->Stop(std::chrono::seconds(5));
    server_.reset();
    api_.reset();
    registry_.reset();
  }

  http::ClientResponse Get(const std::string& target, const std::string& host,
                           const std::string& origin) {
    http::ClientRequest request;
    request.target = target;
    if (!host.empty()) request.headers.emplace_back("Host", host);
    if (!origin.empty()) request.headers.emplace_back("Origin", origin);
    request.timeout = std::chrono::seconds(10);
    auto response = http::Client(address_, {.token = token_}).Send(request);
    EXPECT_TRUE(response.ok()) << response.status().ToString();
    return response.ok() ? *response : http::ClientResponse{};
  }

  std::string token_;
  std::unique_ptr<server::BoxRegistry> registry_;
  std::unique_ptr<server::Api> api_;
  std::unique_ptr<http::Server> server_;
  http::Address address_;
  OpenApiChecker openapi_;
};

TEST_P(ApiOriginServerTest, RefusesOtherOriginsAndRebinding) {
  const bool tokens = GetParam();
  const std::string own = address_.ToString();  // 127.0.0.1:PORT, as the client's Host
  EXPECT_EQ(Get("/v1/status", "", "").status, 200);
  EXPECT_EQ(Get("/v1/status", "", "http://" + own).status, 200) << "same origin";

  http::ClientResponse r = Get("/v1/status", "", "http://evil.example");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(openapi_.Check("GET", "/v1/status", r.status, r.headers["content-type"], r.body), "");
  json body = json::parse(r.body, nullptr, false);
  EXPECT_EQ(body["error"]["code"], "forbidden") << r.body;
  EXPECT_NE(body["error"]["message"].get<std::string>().find("evil.example"), std::string::npos);
  // Every route, /mcp and the public /healthz included, and unknown paths too.
  EXPECT_EQ(Get("/healthz", "", "http://evil.example").status, 403);
  EXPECT_EQ(Get("/no/such/route", "", "http://evil.example").status, 403);
  http::ClientRequest post;
  post.method = "POST";
  post.target = "/mcp";
  post.body = R"({"jsonrpc":"2.0","id":1,"method":"ping"})";
  post.headers = {{"Origin", "http://evil.example"}};
  auto mcp = http::Client(address_, {.token = token_}).Send(post);
  ASSERT_TRUE(mcp.ok());
  EXPECT_EQ(mcp->status, 403) << mcp->body;

  // DNS rebinding: Host and Origin name the attacker's host.
  const std::string evil = "evil.example:" + std::to_string(address_.port);
  r = Get("/v1/status", evil, "http://" + evil);
  EXPECT_EQ(r.status, tokens ? 200 : 403) << r.body;
  EXPECT_EQ(Get("/healthz", evil, "").status, tokens ? 200 : 403);
  EXPECT_EQ(Get("/v1/status", "localhost:" + std::to_string(address_.port), "").status, 200);
}

INSTANTIATE_TEST_SUITE_P(Tokens, ApiOriginServerTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "tokens" : "no_tokens"; });

}  // namespace
}  // namespace codebox::testing
