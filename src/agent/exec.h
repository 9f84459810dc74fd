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

// Validates a decoded `exec` request (docs/protocol.md) beyond its types: strings that
// execve would cut at a NUL, environment names. Errors name the field. SpawnExec takes only a
// request that passed.
Status CheckExec(const protocol::msg::Exec& request);

// The request's environment as execve takes it: "NAME=value", sorted by name.
std::vector<std::string> EnvironmentStrings(const protocol::msg::Exec& request);

struct SpawnedExec {
  pid_t pid = -1;            // also its process group and session id (setsid)
  base::UniqueFd stdin_fd;   // write end, non-blocking; invalid when stdin is /dev/null
  base::UniqueFd stdout_fd;  // read ends, non-blocking
  base::UniqueFd stderr_fd;  // invalid with a tty: its output comes on stdout_fd
  // With a tty: stdout_fd and stdin_fd are two descriptors of the terminal's master side (the
  // loop polls one for output and the other for room for stdin); reading it fails with EIO
  // once every process closed the terminal.
  // With a user: the read end (non-blocking) on which the child reports a failed switch to it;
  // read it with UserSwitchFailure once the child has exited.
  base::UniqueFd switch_report;
};

// Forks the process in a new session. A program that cannot be executed is not an error here:
// the child writes "codebox-agent: exec NAME: reason" to its stderr and exits as shells do:
// 127 when there is no such program (ENOENT, ENOTDIR), 126 when there is one that cannot run
// (EACCES, ENOEXEC, EISDIR, ...). Errors are for the agent's own failures (pipe, pty, fork).
//
// With spec.tty the child is the leader of a new session whose controlling terminal is a new
// pseudo-terminal of that size (TIOCSCTTY); the terminal's slave side is its fds 0, 1 and 2
// (and belongs to spec.user, as login(1) makes it).
//
// With spec.user the child drops its supplementary groups and becomes uid:gid before anything
// else it does for the program; if it cannot, it reports why on switch_report and exits 127
// without running it.
StatusOr<SpawnedExec> SpawnExec(const protocol::msg::Exec& spec);

// Why the exited child of an exec with `user` did not become it ("exec: cannot switch to uid
// 1000: Operation not permitted"), or nullopt when it did.
std::optional<Status> UserSwitchFailure(int switch_report, const protocol::msg::User& user);

// Sets the size of the terminal whose master side is `master` (the kernel then sends SIGWINCH
// to its foreground process group).
Status SetTerminalSize(int master, protocol::msg::TerminalSize size);

// Signals the process group of an exec's process `pid`. Right after fork the child may not
// have called setsid() yet, so there is no such group: then the process itself gets it (while
// it still has the agent's signals blocked, so the signal waits, pending, until it unblocks
// them).
void SignalExec(pid_t pid, int sig);

// The exit status of a child whose execve failed with `err`: 127 not found, 126 not runnable.
int ExecFailureStatus(int err);

}  // namespace codebox::agent

#endif  // CODEBOX_AGENT_EXEC_H_
