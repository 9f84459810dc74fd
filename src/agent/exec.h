// Starting one exec: parsing its request and forking the process with its pipes.
#ifndef CODEBOX_AGENT_EXEC_H_
#define CODEBOX_AGENT_EXEC_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "codebox/status.h"
#include "protocol/messages.h"

namespace codebox::agent {

struct ExecSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value", the whole environment
  std::string cwd = "/";
  bool stdin_stream = false;  // else /dev/null
  int64_t timeout_ms = 0;     // 0 = none
  uint64_t output_limit = 16ull << 20;
  std::optional<protocol::msg::User> user;  // nullopt: the agent's own ids
};

// Validates a decoded `exec` request (docs/protocol.md) beyond its types: strings that
// execve would cut at a NUL, environment names. Errors name the field.
StatusOr<ExecSpec> ParseExecSpec(const protocol::msg::Exec& request);

struct SpawnedExec {
  pid_t pid = -1;            // also its process group and session id (setsid)
  base::UniqueFd stdin_fd;   // write end, non-blocking; invalid when stdin is /dev/null
  base::UniqueFd stdout_fd;  // read ends, non-blocking
  base::UniqueFd stderr_fd;
  // With a user: the read end (non-blocking) on which the child reports a failed switch to it;
  // read it with UserSwitchFailure once the child has exited.
  base::UniqueFd switch_report;
};

// Forks the process in a new session. A program that cannot be executed is not an error here:
// the child writes "codebox-agent: exec NAME: reason" to its stderr and exits 127, as the
// protocol says. Errors are for the agent's own failures (pipe, fork).
//
// With spec.user the child drops its supplementary groups and becomes uid:gid before anything
// else it does for the program; if it cannot, it reports why on switch_report and exits 127
// without running it.
StatusOr<SpawnedExec> SpawnExec(const ExecSpec& spec);

// Why the exited child of an exec with `user` did not become it ("exec: cannot switch to uid
// 1000: Operation not permitted"), or nullopt when it did.
std::optional<Status> UserSwitchFailure(int switch_report, const protocol::msg::User& user);

}  // namespace codebox::agent

#endif  // CODEBOX_AGENT_EXEC_H_
