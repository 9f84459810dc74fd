// Starting helper programs (apt-get, dpkg-deb, mkfs.erofs, xz, QEMU) as separate processes
// with a scrubbed environment and only the fds we name. Nothing of the caller's environment
// (API keys, tokens) reaches them.
#ifndef CODEBOX_VM_PROCESS_H_
#define CODEBOX_VM_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "codebox/status.h"

namespace codebox::vm {

// The whole environment helpers get.
std::vector<std::string> ScrubbedEnvironment();

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is an absolute path or found on the scrubbed PATH
  std::vector<std::string> env = ScrubbedEnvironment();
  std::string cwd;  // empty: inherit
  // (fd in this process, fd number in the child). The child gets exactly these plus nothing
  // else; an unmapped 0/1/2 is /dev/null.
  std::vector<std::pair<int, int>> fds;
  uint64_t max_file_bytes = 0;  // RLIMIT_FSIZE; writes past it fail with EFBIG (0 = none)
};

// Starts the program; returns its pid once execve succeeded (an exec failure is reported
// here, not as a child exit status).
StatusOr<pid_t> Spawn(const SpawnSpec& spec);

struct CommandOutput {
  int exit_code = 0;
  std::string out;
  std::string err;
};

// Runs a program to completion, capturing stdout and stderr. A non-zero exit is an IoError
// naming the program and carrying the tail of its stderr.
StatusOr<CommandOutput> RunCommand(const std::vector<std::string>& argv,
                                   const std::string& cwd = "");

// Finds a program on the scrubbed PATH. Empty if absent.
std::string FindProgram(const std::string& name);

// Last `max_lines` lines of text (for error messages).
std::string TailLines(const std::string& text, size_t max_lines);
// The last max_lines of a guest console, carriage returns dropped. A panic's stack trace
// pushes its cause out of any short tail, so the "Kernel panic" line is put first when the
// tail lacks it.
std::string ConsoleExcerpt(const std::string& console, size_t max_lines);

}  // namespace codebox::vm

#endif  // CODEBOX_VM_PROCESS_H_
