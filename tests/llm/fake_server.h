// Starts tests/llm/fake_openai_server.py with a scenario and hands out its base URL and the
// requests it received. The server dies with the test: its stdin is a pipe we hold.
#ifndef CODEBOX_TESTS_LLM_FAKE_SERVER_H_
#define CODEBOX_TESTS_LLM_FAKE_SERVER_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codebox/status.h"

namespace codebox::llm::testing {

class FakeServer {
 public:
  FakeServer() = default;
  ~FakeServer();
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  // scenario: a file name under tests/llm/scenarios.
  Status Start(const std::string& scenario);
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  // Every request so far: {"path", "headers", "body"}.
  std::vector<nlohmann::json> Requests() const;
  void Stop();

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int port_ = 0;
  std::string log_path_;
};

// A port nothing listens on (bound, then closed).
int UnusedPort();

}  // namespace codebox::llm::testing

#endif  // CODEBOX_TESTS_LLM_FAKE_SERVER_H_
