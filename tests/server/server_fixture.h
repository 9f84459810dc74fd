// The in-process server the API tests talk to: a BoxRegistry of real jail boxes, the Api and
// an http::Server listening on a unix socket in a temp dir and on loopback TCP port 0. Skips
// (as tests/box does) when this host cannot start a jail box.
#ifndef CODEBOX_TESTS_SERVER_SERVER_FIXTURE_H_
#define CODEBOX_TESTS_SERVER_SERVER_FIXTURE_H_

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "http/client.h"
#include "http/server.h"
#include "server/api.h"
#include "server/box_registry.h"
#include "tests/server/openapi_check.h"

namespace codebox::testing {

class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // What a subclass changes before SetUp runs.
  std::vector<std::string> tokens_;
  // Tenants: when given, the tokens are theirs (tokens_ is filled from them).
  std::vector<server::TokenGrant> grants_;
  server::TenantLimits tenant_limits_;
  server::Ceilings ceilings_;
  std::vector<server::PoolSpec> pools_;
  uint32_t max_boxes_ = 64;
  uint64_t max_body_bytes_ = 1 << 20;
  bool tcp_ = false;        // Call() and Stream() over loopback TCP instead of the unix socket
  server::AskOptions ask_;  // the model behind POST /v1/ask

  http::Client UnixClient(const std::string& token = "") const;
  http::Client TcpClient(const std::string& token = "") const;

  // A request (with tokens_[0] when there are tokens); the response is
  // checked against the OpenAPI document for `route` (its pattern).
  http::ClientResponse Call(const std::string& method, const std::string& target,
                            const std::string& route, const std::string& body = "",
                            const std::string& content_type = "application/json");
  // The same with `token` ("" for none).
  http::ClientResponse CallAs(const std::string& token, const std::string& method,
                              const std::string& target, const std::string& route,
                              const std::string& body = "",
                              const std::string& content_type = "application/json");
  nlohmann::json Json(const http::ClientResponse& response) const;
  // POST /v1/boxes {} and the new id; fails the test on error.
  std::string CreateBox(const std::string& body = "{}");

  // Events of a streamed request, in order.
  struct Event {
    std::string name;
    nlohmann::json data;
  };
  std::vector<Event> Stream(const std::string& target, const std::string& body);

  std::string dir_;
  std::unique_ptr<server::BoxRegistry> registry_;
  std::unique_ptr<server::Api> api_;
  std::unique_ptr<http::Server> server_;
  std::vector<http::Address> bound_;
  OpenApiChecker openapi_;
  std::atomic<int> requests_seen_{0};
  // What hooks.on_egress was told: (box id, record), in order.
  std::mutex egress_mu_;
  std::vector<std::pair<std::string, EgressRecord>> egress_seen_;
};

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_SERVER_SERVER_FIXTURE_H_
