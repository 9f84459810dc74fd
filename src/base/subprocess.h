// Starting other programs: build tools (debootstrap, dpkg-query, mkfs.erofs, xz), the jail
// supervisor, the vm keeper and QEMU. Always from an argv array, never through a shell; the
// child gets only the environment and the fds named here, default signal dispositions and an
// empty signal mask, whatever the caller's are. Safe in a multi-threaded process: the child
// runs nothing but system calls between clone and execve.
#ifndef CODEBOX_BASE_SUBPROCESS_H_
#define CODEBOX_BASE_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "codebox/status.h"

namespace codebox::base {

// The PATH helper programs are looked up on and get.
inline constexpr char kToolPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// PATH=kToolPath, LC_ALL=C, LANG=C: nothing of the caller's environment (API keys, tokens).
std::vector<std::string> ToolEnvironment();

// `name` when it contains '/' and is executable, else the first executable `dir/name` of the
// colon-separated `search_path`; empty when there is none.
std::string FindProgram(const std::string& name, const std::string& search_path = kToolPath);

struct Command {
  Command() = default;
  explicit Command(std::vector<std::string> argv_in) : argv(std::move(argv_in)) {}

  std::vector<std::string> argv;
  // The file to run when it is not argv[0] (which is then only the name the program sees).
  // Without a '/', it is looked up on the PATH of `env` (kToolPath when `env` has none).
  std::string program;
  std::vector<std::string> env = ToolEnvironment();  // the child's whole environment ("K=V")
  std::string cwd;                                   // empty: the caller's
  // (fd in this process, fd number in the child). The child gets exactly these; 0, 1 and 2
  // that are not named are /dev/null, and every other fd is closed.
  std::vector<std::pair<int, int>> fds;
  bool new_session = false;  // setsid(): out of the caller's process group (its ^C)
  // PR_SET_PDEATHSIG: the child gets this signal when the *thread* that spawned it ends, so it
  // means "when the parent dies" only in a single-threaded parent. 0: none.
  int parent_death_signal = 0;
  // RLIMIT_FSIZE, with SIGXFSZ ignored so that a write past it fails with EFBIG instead of
  // killing the writer. 0: no limit set.
  uint64_t max_file_bytes = 0;
  // A network namespace (an fd of /proc/.../ns/net) the child enters before anything else
  // (setns, which needs CAP_SYS_ADMIN); -1: the caller's.
  int net_namespace_fd = -1;
};

// Starts the command and returns its pid once execve has succeeded. When it cannot be run
// (not found, not executable, a bad fd or working directory) the error names the program and
// the reason, and no child is left behind. The caller reaps the child.
StatusOr<pid_t> Spawn(const Command& command);

struct RunOptions {
  // Then the child is SIGKILLed (its whole process group with new_session) and reaped.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  // stdout is kept in RunResult::out; otherwise it is read as lines, like stderr.
  bool capture_stdout = true;
  size_t max_output_bytes = 64u << 20;  // of stdout kept; the rest is read and dropped
  // Each line of stderr (and of stdout when not captured) as it arrives, '\r\n' trimmed,
  // at most 4 KiB (a longer line arrives in pieces).
  std::function<void(const std::string&)> on_line;
  size_t tail_lines = 15;  // kept in RunResult::tail for error messages
};

struct RunResult {
  std::string program;
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that killed it, else 0
  bool timed_out = false;
  std::chrono::milliseconds timeout{0};
  std::string out;  // stdout, when captured
  bool out_truncated = false;
  std::deque<std::string> tail;  // the last lines of stderr (and of stdout when not captured)

  bool ok() const { return exit_code == 0 && !timed_out; }
  // "exited with status 2" / "killed by signal 9" / "killed after its deadline of 600 s",
  // then the tail lines, indented.
  std::string Describe() const;
};

// Runs the command to its end: stdin /dev/null, stdout and stderr piped here (unless
// command.fds names them), no longer than options.timeout. Output that a descendant still
// writes after the child has exited is not waited for. Fails only when the command cannot be
// started or reaped; how it ended is in the result.
StatusOr<RunResult> Run(const Command& command, const RunOptions& options = {});

// Run, where anything but exit status 0 with all of stdout kept is an IoError naming the
// program, how it ended and its last lines of output.
StatusOr<RunResult> RunChecked(const Command& command, const RunOptions& options = {});

}  // namespace codebox::base

#endif  // CODEBOX_BASE_SUBPROCESS_H_
