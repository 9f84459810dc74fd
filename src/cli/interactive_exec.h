// `codebox exec -i` / `-t` / `-it` and `codebox shell`: a program in a box that the user talks
// to while it runs (Box::Start). With a terminal (-t), the box's program runs on a
// pseudo-terminal in the box and this terminal is put in raw mode, so every key (Ctrl-C is
// byte 0x03, Ctrl-D 0x04) goes to the program in the box, and its output is written here as
// it comes, raw, as `docker exec -it` does; the window's size follows (SIGWINCH). Without one
// (-i), stdin is streamed to the program as it arrives and its end closes the program's stdin.
#ifndef CODEBOX_CLI_INTERACTIVE_EXEC_H_
#define CODEBOX_CLI_INTERACTIVE_EXEC_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "codebox/box.h"
#include "codebox/status.h"

namespace codebox::cli {

struct InteractiveExec {
  bool tty = false;  // -t: a terminal in the box, raw mode here
  // The exec's timeout: nullopt for none (a session lasts as long as the user wants), unless
  // --timeout was given. The box's --box-timeout applies either way.
  std::optional<std::chrono::milliseconds> timeout;
};

// Checked before any box starts: -t needs this process's stdin to be a terminal ("the input
// device is not a TTY", as docker says).
Status CheckInteractive(const InteractiveExec& exec);

// Runs argv in `box` (the user's TERM and window size with -t) until it ends or this process
// is told to stop (SIGTERM, SIGHUP: the program is killed). The terminal's settings are
// restored on every way out. Returns the exit status: the program's, 128+N for signal N, 124
// timed out, 125 when codebox failed (the error printed as `codebox COMMAND: ...`).
int RunInteractive(const std::string& command, Box& box, const std::vector<std::string>& argv,
                   const InteractiveExec& exec);

// Whether `args` (a command's options, up to "--") set the exec timeout, by any of its names.
bool NamesExecTimeout(const std::vector<std::string>& args);

// The exit status of `codebox exec` for a result: the program's, 124 timed out, 128+N for a
// signal.
int ExitStatusOf(const ExecResult& result);

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_INTERACTIVE_EXEC_H_
