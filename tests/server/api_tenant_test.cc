// Tenants, quotas and ceilings of codebox serve's API (issue 32), as real clients against the
// in-process server with real jail boxes: another tenant's box answers exactly as an unknown one
// on every route, quotas and ceilings are refused with what they are, and deep JSON is a 400.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/server/server_fixture.h"

namespace codebox::testing {
namespace {

using nlohmann::json;

constexpr char kTokenA[] = "token-of-tenant-a-0123456789";
constexpr char kTokenA2[] = "second-token-of-tenant-a-012";
constexpr char kTokenB[] = "token-of-tenant-b-0123456789";
constexpr char kTokenAdmin[] = "token-of-the-admin-012345678";

class ApiTenantTest : public ServerFixture {
 protected:
  void SetUp() override {
    auto grant = [](const char* token, const char* tenant) {
      server::TokenGrant g;
      g.token = token;
      g.tenant = tenant;
      return g;
    };
    grants_ = {grant(kTokenA, "a"), grant(kTokenA2, "a"), grant(kTokenB, "b"),
               grant(kTokenAdmin, "ops")};
    grants_[2].max_boxes = 1;
    grants_[3].admin = true;
    tenant_limits_ = {.max_boxes = 3, .max_requests = 8};
    ceilings_.output_limit_bytes = 32 << 20;
    ceilings_.memory_mib = 1024;
    ceilings_.exec_timeout = std::chrono::seconds(60);
    ServerFixture::SetUp();
  }

  std::string CreateAs(const std::string& token, int want = 201) {
    http::ClientResponse r = CallAs(token, "POST", "/v1/boxes", "/v1/boxes", "{}");
    EXPECT_EQ(r.status, want) << r.body;
    json j = Json(r);
    return r.status == 201 ? j["id"].get<std::string>() : std::string();
  }

  std::vector<std::string> ListedIds(const std::string& token) {
    http::ClientResponse r = CallAs(token, "GET", "/v1/boxes", "/v1/boxes");
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<std::string> ids;
    const json list = Json(r);  // kept: a range-for over a temporary's member would dangle
    for (const json& box : list["boxes"]) ids.push_back(box["id"].get<std::string>());
    return ids;
  }
};

struct BoxRoute {
  const char* method;
  const char* suffix;  // after /v1/boxes/{id}
  const char* route;
  const char* body;
};

// Every route that names a box.
const BoxRoute kBoxRoutes[] = {
    {"GET", "", "/v1/boxes/{id}", ""},
    {"POST", "/exec", "/v1/boxes/{id}/exec", R"j({"argv": ["true"]})j"},
    {"POST", "/python", "/v1/boxes/{id}/python", R"j({"code": "print(1)"})j"},
    {"POST", "/run_code", "/v1/boxes/{id}/run_code", R"j({"code": "1"})j"},
    {"POST", "/restart", "/v1/boxes/{id}/restart", ""},
    {"POST", "/interrupt", "/v1/boxes/{id}/interrupt", ""},
    {"POST", "/packages", "/v1/boxes/{id}/packages", R"j({"packages": ["x"]})j"},
    {"PUT", "/files?path=f.txt", "/v1/boxes/{id}/files", "data"},
    {"GET", "/files?path=/work", "/v1/boxes/{id}/files", ""},
    {"GET", "/files?path=/work&list=1", "/v1/boxes/{id}/files", ""},
    {"DELETE", "/files?path=f.txt", "/v1/boxes/{id}/files", ""},
    {"POST", "/processes", "/v1/boxes/{id}/processes", R"j({"argv": ["sleep", "60"]})j"},
    {"GET", "/processes", "/v1/boxes/{id}/processes", ""},
    {"GET", "/processes/1/events", "/v1/boxes/{id}/processes/{pid}/events", ""},
    {"POST", "/processes/1/stdin", "/v1/boxes/{id}/processes/{pid}/stdin", R"j({"text": "x"})j"},
    {"POST", "/processes/1/signal", "/v1/boxes/{id}/processes/{pid}/signal",
     R"j({"signal": 9})j"},
    {"DELETE", "/processes/1", "/v1/boxes/{id}/processes/{pid}", ""},
    {"DELETE", "", "/v1/boxes/{id}", ""},
};

TEST_F(ApiTenantTest, AnotherTenantsBoxIsExactlyAnUnknownOne) {
  const std::string box = CreateAs(kTokenA);
  ASSERT_FALSE(box.empty());
  // An id of this node and incarnation (its first 4 hex digits) that no one holds.
  std::string unknown = box;
  unknown.replace(6, 12, "000000000000");
  for (const BoxRoute& r : kBoxRoutes) {
    http::ClientResponse theirs =
        CallAs(kTokenB, r.method, "/v1/boxes/" + box + r.suffix, r.route, r.body,
               std::string(r.method) == "PUT" ? "application/octet-stream" : "application/json");
    http::ClientResponse none =
        CallAs(kTokenB, r.method, "/v1/boxes/" + unknown + r.suffix, r.route, r.body,
               std::string(r.method) == "PUT" ? "application/octet-stream" : "application/json");
    EXPECT_EQ(theirs.status, 404) << r.method << " " << r.suffix << ": " << theirs.body;
    EXPECT_EQ(none.status, 404) << r.method << " " << r.suffix;
    // The same answer but for the id itself: nothing tells "another's" from "none".
    std::string masked = theirs.body;
    for (size_t at; (at = masked.find(box)) != std::string::npos;) {
      masked.replace(at, box.size(), unknown);
    }
    EXPECT_EQ(masked, none.body) << r.method << " " << r.suffix;
  }
  // Nothing of it listed for b, nor in its status; a's other token and the admin see it.
  EXPECT_TRUE(ListedIds(kTokenB).empty());
  json status = Json(CallAs(kTokenB, "GET", "/v1/status", "/v1/status"));
  EXPECT_TRUE(status["boxes"].empty()) << status.dump();
  EXPECT_EQ(ListedIds(kTokenA2), std::vector<std::string>{box});
  EXPECT_EQ(ListedIds(kTokenAdmin), std::vector<std::string>{box});
  http::ClientResponse got = CallAs(kTokenA2, "GET", "/v1/boxes/" + box, "/v1/boxes/{id}");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(Json(got)["tenant"], "a");
  // b's tries destroyed nothing: a's box still runs code.
  http::ClientResponse ran = CallAs(kTokenA, "POST", "/v1/boxes/" + box + "/exec",
                                    "/v1/boxes/{id}/exec", R"j({"argv": ["echo", "still"]})j");
  EXPECT_EQ(ran.status, 200) << ran.body;
  EXPECT_EQ(Json(ran)["stdout"], "still\n");
  EXPECT_EQ(CallAs(kTokenAdmin, "DELETE", "/v1/boxes/" + box, "/v1/boxes/{id}").status, 204);
}

TEST_F(ApiTenantTest, BoxQuotasArePerTenant) {
  // b's token file line gives it one box; a has the server's default of 3.
  std::string b1 = CreateAs(kTokenB);
  ASSERT_FALSE(b1.empty());
  http::ClientResponse refused = CallAs(kTokenB, "POST", "/v1/boxes", "/v1/boxes", "{}");
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_NE(refused.body.find("quota"), std::string::npos) << refused.body;
  EXPECT_EQ(CallAs(kTokenB, "POST", "/v1/run", "/v1/run", R"j({"code": "1"})j").status, 429)
      << "a one-shot box counts too";
  // Another tenant is not held back by b.
  std::vector<std::string> a_boxes;
  for (int i = 0; i < 3; ++i) a_boxes.push_back(CreateAs(kTokenA));
  CreateAs(kTokenA2, 429);  // a's share is a's, whichever of its tokens asks
  // A destroyed box gives its place back.
  EXPECT_EQ(CallAs(kTokenB, "DELETE", "/v1/boxes/" + b1, "/v1/boxes/{id}").status, 204);
  EXPECT_FALSE(CreateAs(kTokenB).empty());
}

TEST_F(ApiTenantTest, CeilingsRefuseWhatNoRequestMayAsk) {
  struct Case {
    std::string body;
    std::string names;
  };
  for (const Case& c : std::vector<Case>{
           {R"j({"code": "1", "output_limit_bytes": 4294967296})j", "output_limit_bytes 4294967296"},
           {R"j({"code": "1", "memory": 2048})j", "memory_mib 2048"},
           {R"j({"code": "1", "timeout": 3600})j", "timeout 3600 s"},
           {R"j({"code": "1", "exec_timeout": 61})j", "exec_timeout 61 s"}}) {
    http::ClientResponse r = CallAs(kTokenA, "POST", "/v1/run", "/v1/run", c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    const std::string message = Json(r)["error"]["message"].get<std::string>();
    EXPECT_NE(message.find(c.names), std::string::npos) << message;
    EXPECT_NE(message.find("ceiling"), std::string::npos) << message;
  }
  // "none" asks for as long as the server allows: granted as the ceiling, not refused.
  http::ClientResponse r =
      CallAs(kTokenA, "POST", "/v1/run", "/v1/run", R"j({"code": "print(2)", "timeout": "none"})j");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r)["stdout"], "2\n");
}

TEST_F(ApiTenantTest, DeepJsonIsA400AndTheServerLives) {
  std::string deep = std::string(200'000, '[') + std::string(200'000, ']');
  for (const char* route : {"/v1/boxes", "/v1/run"}) {
    http::ClientResponse r = CallAs(kTokenA, "POST", route, route, R"j({"env": )j" + deep + "}");
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find("more than 64 deep"), std::string::npos) << r.body.substr(0, 300);
    EXPECT_LT(r.body.size(), 1000u);
  }
  http::ClientRequest mcp;
  mcp.method = "POST";
  mcp.target = "/mcp";
  mcp.content_type = "application/json";
  mcp.headers = {{"Accept", "application/json, text/event-stream"}};
  mcp.body = R"j({"jsonrpc": "2.0", "method": "ping", "id": )j" + deep + "}";
  auto answer = UnixClient(kTokenA).Send(mcp);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->status, 400);
  EXPECT_EQ(Json(*answer)["error"]["code"], -32700) << answer->body.substr(0, 300);
  // A huge unknown field name: answered at once, its name cut short in the message.
  std::string huge_key = std::string(512 << 10, 'k');
  http::ClientResponse r =
      CallAs(kTokenA, "POST", "/v1/run", "/v1/run", R"j({"code": "1", ")j" + huge_key + R"j(": 1})j");
  EXPECT_EQ(r.status, 400);
  EXPECT_LT(r.body.size(), 1000u);
  EXPECT_EQ(CallAs(kTokenA, "POST", "/v1/run", "/v1/run", R"j({"code": "print(3)"})j").status, 200);
}

TEST_F(ApiTenantTest, McpSessionsAreTheirTenants) {
  http::ClientRequest init;
  init.method = "POST";
  init.target = "/mcp";
  init.content_type = "application/json";
  init.headers = {{"Accept", "application/json, text/event-stream"}};
  init.body = R"j({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {)j"
              R"j("protocolVersion": "2025-11-25", "capabilities": {},)j"
              R"j("clientInfo": {"name": "t", "version": "1"}}})j";
  auto opened = UnixClient(kTokenA).Send(init);
  ASSERT_TRUE(opened.ok());
  ASSERT_EQ(opened->status, 200) << opened->body;
  const std::string session = opened->headers["mcp-session-id"];
  ASSERT_FALSE(session.empty());
  http::ClientRequest ping = init;
  ping.body = R"j({"jsonrpc": "2.0", "id": 2, "method": "ping"})j";
  ping.headers.emplace_back("Mcp-Session-Id", session);
  auto theirs = UnixClient(kTokenB).Send(ping);
  ASSERT_TRUE(theirs.ok());
  EXPECT_EQ(theirs->status, 404) << theirs->body;
  http::ClientRequest end;
  end.method = "DELETE";
  end.target = "/mcp";
  end.headers = {{"Mcp-Session-Id", session}};
  auto ended = UnixClient(kTokenB).Send(end);
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->status, 404) << "b cannot end a's session";
  auto mine = UnixClient(kTokenA2).Send(ping);
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(mine->status, 200) << mine->body;
}

}  // namespace
}  // namespace codebox::testing
