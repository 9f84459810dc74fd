#include "tests/server/server_fixture.h"

#include "base/fs.h"
#include "testing/box_test_util.h"

namespace codebox::testing {

using nlohmann::json;

void ServerFixture::SetUp() {
  std::string skip;
  auto probe = MakeBoxOrSkipReason(TestBoxOptions(), &skip);
  if (!probe) GTEST_SKIP() << skip;
  probe.reset();
  auto dir = base::MakeTempDir(base::TempRoot(), "codebox-server-test-");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  dir_ = *dir;

  server::RegistryOptions registry_options;
  registry_options.defaults = TestBoxOptions();
  registry_options.max_boxes = max_boxes_;
  registry_options.pools = pools_;
  registry_options.node = "local";
  registry_ = std::make_unique<server::BoxRegistry>(registry_options);

  server::ApiOptions api_options;
  api_options.defaults = registry_options.defaults;
  api_options.max_boxes = max_boxes_;
  if (!grants_.empty()) {
    tokens_.clear();
    for (const server::TokenGrant& g : grants_) tokens_.push_back(g.token);
  }
  api_options.tokens_required = !tokens_.empty();
  api_options.grants = grants_;
  api_options.tenant_limits = tenant_limits_;
  api_options.ceilings = ceilings_;
  api_options.ask = ask_;
  api_options.hooks.on_request = [this](const server::RequestReport&) { ++requests_seen_; };
  api_options.hooks.on_egress = [this](std::string_view box, const EgressRecord& r) {
    std::lock_guard<std::mutex> lock(egress_mu_);
    egress_seen_.emplace_back(std::string(box), r);
  };
  api_options.hooks.metrics_text = [](const server::Caller&) {
    return std::string("codebox_test_metric 1\n");
  };
  api_ = std::make_unique<server::Api>(api_options, registry_.get());

  http::ServerOptions server_options;
  server_options.listen = {*http::ParseAddress("unix:" + dir_ + "/codebox.sock"),
                           *http::ParseAddress("127.0.0.1:0")};
  server_options.tokens = tokens_;
  server_options.public_paths = server::PublicPaths();
  server_options.max_body_bytes = max_body_bytes_;
  server_ = std::make_unique<http::Server>(server_options, api_.get());
  Status started = server_->Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  registry_->Start();
  bound_ = server_->bound();
  ASSERT_EQ(bound_.size(), 2u);
}

void ServerFixture::TearDown() {
  if (server_) server_->Stop(std::chrono::seconds(5));
  if (registry_) registry_->Shutdown();
  server_.reset();
  api_.reset();
  registry_.reset();
  if (!dir_.empty()) (void)base::RemoveTree(dir_);
}

http::Client ServerFixture::UnixClient(const std::string& token) const {
  return http::Client(bound_[0], {.token = token});
}

http::Client ServerFixture::TcpClient(const std::string& token) const {
  return http::Client(bound_[1], {.token = token});
}

http::ClientResponse ServerFixture::Call(const std::string& method, const std::string& target,
                                         const std::string& route, const std::string& body,
                                         const std::string& content_type) {
  return CallAs(tokens_.empty() ? "" : tokens_[0], method, target, route, body, content_type);
}

http::ClientResponse ServerFixture::CallAs(const std::string& token, const std::string& method,
                                           const std::string& target, const std::string& route,
                                           const std::string& body,
                                           const std::string& content_type) {
  http::ClientRequest request;
  request.method = method;
  request.target = target;
  request.body = body;
  request.content_type = content_type;
  auto response = (tcp_ ? TcpClient(token) : UnixClient(token)).Send(request);
  EXPECT_TRUE(response.ok()) << method << " " << target << ": " << response.status().ToString();
  if (!response.ok()) return {};
  auto type = response->headers.find("content-type");
  std::string error =
      openapi_.Check(method, route, response->status,
                     type == response->headers.end() ? "" : type->second, response->body);
  EXPECT_EQ(error, "") << "the response does not fit src/server/openapi.json";
  EXPECT_TRUE(response->headers.count("x-request-id")) << method << " " << target;
  return *response;
}

json ServerFixture::Json(const http::ClientResponse& response) const {
  json j = json::parse(response.body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << response.body;
  return j;
}

std::string ServerFixture::CreateBox(const std::string& body) {
  http::ClientResponse r = Call("POST", "/v1/boxes", "/v1/boxes", body);
  EXPECT_EQ(r.status, 201) << r.body;
  json j = Json(r);
  return j.is_object() && j.contains("id") ? j["id"].get<std::string>() : std::string();
}

std::vector<ServerFixture::Event> ServerFixture::Stream(const std::string& target,
                                                        const std::string& body) {
  http::ClientRequest request;
  request.method = "POST";
  request.target = target;
  request.body = body;
  request.headers = {{"Accept", "text/event-stream"}};
  std::vector<Event> events;
  const std::string token = tokens_.empty() ? "" : tokens_[0];
  auto response = (tcp_ ? TcpClient(token) : UnixClient(token))
                      .SendForEvents(request, [&](std::string_view name, std::string_view data) {
                        events.push_back({std::string(name), json::parse(data, nullptr, false)});
                        return Status::Ok();
                      });
  EXPECT_TRUE(response.ok()) << response.status().ToString();
  if (response.ok()) {
    EXPECT_EQ(response->status, 200) << response->body;
    EXPECT_EQ(response->headers["content-type"].rfind("text/event-stream", 0), 0u);
  }
  return events;
}

}  // namespace codebox::testing
