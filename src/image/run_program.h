// Runs an external program (debootstrap, chroot, dpkg-query) from an argv array — never
// through a shell — and hands its output to a callback line by line.
#ifndef CODEBOX_IMAGE_RUN_PROGRAM_H_
#define CODEBOX_IMAGE_RUN_PROGRAM_H_

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "codebox/status.h"

namespace codebox::image {

struct ProgramResult {
  int exit_code = -1;            // exit status, or -1 when killed by a signal
  int signal = 0;                // the signal that killed it, else 0
  std::string output;            // stdout (and stderr unless split), when capture_stdout is set
  std::deque<std::string> tail;  // the last lines of output (stdout+stderr), for errors
  bool ok() const { return exit_code == 0; }
  // "exited with status 2" / "killed by signal 9", then the tail lines indented.
  std::string Describe() const;
};

struct ProgramOptions {
  std::vector<std::string> env;  // the child's whole environment ("K=V")
  bool capture_stdout = false;   // keep stdout in ProgramResult::output (stderr apart)
  std::function<void(const std::string&)> on_line;  // each output line, as it arrives
  size_t tail_lines = 15;
};

// Starts argv[0] (looked up in PATH of the *calling* process when it has no '/'), with
// stdin from /dev/null. Fails only when the program cannot be started; a nonzero exit is
// reported in the result.
StatusOr<ProgramResult> RunProgram(const std::vector<std::string>& argv,
                                   const ProgramOptions& options);

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_RUN_PROGRAM_H_
