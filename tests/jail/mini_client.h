// The jail tests' terse view of protocol::AgentClient: Hello() connects, Exec()/Sh() return
// the exit status with stdout and stderr as `out` and `err`.
#ifndef CODEBOX_TESTS_JAIL_MINI_CLIENT_H_
#define CODEBOX_TESTS_JAIL_MINI_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "codebox/status.h"
#include "agent_client/agent_client.h"

namespace codebox::jail::testing {

struct MiniResult {
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  bool out_of_memory = false;
  std::string out, err;
};

class MiniClient {
 public:
  explicit MiniClient(base::UniqueFd fd) : fd_(std::move(fd)) {}

  Status Hello() {
    ASSIGN_OR_RETURN(agent_, protocol::AgentClient::Connect(std::move(fd_), std::chrono::seconds(10)));
    return Status::Ok();
  }

  StatusOr<MiniResult> Exec(const std::vector<std::string>& argv, int timeout_ms = 20000) {
    if (!agent_) return Internal("MiniClient::Exec before Hello");
    protocol::ExecRequest request;
    request.exec.argv = argv;
    request.exec.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", "/root"}};
    request.exec.cwd = "/";
    request.exec.timeout = std::chrono::milliseconds(timeout_ms);
    ASSIGN_OR_RETURN(ExecResult r, agent_->Exec(request));
    return MiniResult{r.exit_code, r.signal, r.timed_out, r.out_of_memory,
                      std::move(r.stdout_data), std::move(r.stderr_data)};
  }

  StatusOr<MiniResult> Sh(const std::string& script, int timeout_ms = 20000) {
    return Exec({"/bin/sh", "-c", script}, timeout_ms);
  }

 private:
  base::UniqueFd fd_;
  std::unique_ptr<protocol::AgentClient> agent_;
};

}  // namespace codebox::jail::testing

#endif  // CODEBOX_TESTS_JAIL_MINI_CLIENT_H_
