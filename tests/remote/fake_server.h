// A codebox server stand-in for the client tests: an http::Server on a unix socket in a fresh
// temp dir, whose routes a test sets (exact method and path) to answer anything, well-formed
// or not. Every request is recorded. Create and delete of the box b-0123456789abcdef are
// answered unless a test replaces them.
#ifndef CODEBOX_TESTS_REMOTE_FAKE_SERVER_H_
#define CODEBOX_TESTS_REMOTE_FAKE_SERVER_H_

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "codebox/box.h"
#include "http/server.h"

namespace codebox::testing {

inline constexpr char kBoxId[] = "b-0123456789abcdef";
inline constexpr char kBoxPath[] = "/v1/boxes/b-0123456789abcdef";

class FakeServer : public http::Handler {
 public:
  using Route = std::function<void(const http::Request&, http::Exchange&)>;

  // Starts listening; check ok() (it fails the test when it cannot start).
  FakeServer();
  ~FakeServer() override;

  bool ok() const { return server_ != nullptr; }
  // "unix:/tmp/.../codebox.sock", for BoxOptions::server.
  const std::string& address() const { return address_; }
  const std::string& dir() const { return dir_; }

  void On(const std::string& method, const std::string& path, Route route);
  // A route that answers `status` with `body` as application/json.
  void OnJson(const std::string& method, const std::string& path, int status,
              const nlohmann::json& body);
  // A route that streams these events, then ends.
  void OnEvents(const std::string& method, const std::string& path,
                std::vector<std::pair<std::string, std::string>> events);

  std::vector<http::Request> requests();
  // The body of the last request to `path` as JSON (null when none).
  nlohmann::json LastBody(const std::string& path);

  void Handle(const http::Request& request, http::Exchange& exchange) override;

 private:
  std::string dir_;
  std::string address_;
  std::unique_ptr<http::Server> server_;
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Route> routes_;
  std::vector<http::Request> requests_;
};

// Responds `status` with `body` of `content_type`.
void Respond(http::Exchange& exchange, int status, std::string body,
             std::string content_type = "application/json");
// Responds `status` with `j` as JSON.
void RespondJson(http::Exchange& exchange, int status, const nlohmann::json& j);

// One ustar entry (a file, or type '5' a directory), for hand-made hostile archives; end the
// archive with TarEnd().
std::string TarEntry(const std::string& name, const std::string& data, char type = '0');
std::string TarEnd();

inline CopyOutOptions Limits(uint64_t max_bytes, uint64_t max_entries = 100'000) {
  CopyOutOptions options;
  options.max_bytes = max_bytes;
  options.max_entries = max_entries;
  return options;
}

// A fake server and boxes made on it.
class RemoteBoxTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.ok()); }

  std::unique_ptr<Box> Create(BoxOptions options = {}) {
    options.server = server_.address();
    auto box = Box::Create(options);
    EXPECT_TRUE(box.ok()) << box.status().ToString();
    return box.ok() ? std::move(*box) : nullptr;
  }

  FakeServer server_;
};

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_REMOTE_FAKE_SERVER_H_
