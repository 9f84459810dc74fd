// Starts codebox-agent as an ordinary child on a socketpair, the way the jail driver does
// minus the jail, and connects an AgentClient to it.
#ifndef CODEBOX_TESTS_AGENT_AGENT_HARNESS_H_
#define CODEBOX_TESTS_AGENT_AGENT_HARNESS_H_

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent_client/agent_client.h"
#include "base/unique_fd.h"
#include "codebox/status.h"

namespace codebox::testing {

// Ids the agent runs as (AgentProcess::Start), with no supplementary groups.
struct AgentIds {
  uid_t uid;
  gid_t gid;
};

class AgentProcess {
 public:
  // Forks the agent with its end of a socketpair as --fd 3 and its stderr in a temp file;
  // `extra_args` follow (e.g. {"--egress-port", "0"}). With `run_as` (needs root) the agent
  // runs as those ids instead of the test's.
  static StatusOr<std::unique_ptr<AgentProcess>> Start(std::vector<std::string> extra_args = {},
                                                       std::optional<AgentIds> run_as = {});
  ~AgentProcess();  // kills the agent if it still runs

  pid_t pid() const { return pid_; }
  // The host's end of the socketpair (until Connect() takes it).
  base::UniqueFd TakeHostFd() { return std::move(host_fd_); }
  StatusOr<std::unique_ptr<protocol::AgentClient>> Connect();
  // Waits for the agent to exit; returns its wait status, or -1 if it had not exited in time.
  int WaitExit(int timeout_ms);
  std::string StderrText() const;
  // The egress port the agent (started with --egress-port) announced on its stderr once it
  // listens (at the first egress_accept); kDeadlineExceeded if it did not within `wait`.
  StatusOr<uint16_t> EgressPort(std::chrono::milliseconds wait) const;
  // Live (non-zombie) processes whose parent chain reaches the agent.
  int CountDescendants() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  base::UniqueFd host_fd_;
  std::string stderr_path_;
};

// A fixture with an agent started and a client connected to it (agent_, client_).
class ConnectedAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto agent = AgentProcess::Start();
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(*agent);
    auto client = agent_->Connect();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }

  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<protocol::AgentClient> client_;
};

}  // namespace codebox::testing

#endif  // CODEBOX_TESTS_AGENT_AGENT_HARNESS_H_
