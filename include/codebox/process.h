// A process in a box: the handle that follows one (Process), and what a box's table says of
// each process started in it (ProcessInfo, Box::Processes).
#ifndef CODEBOX_PROCESS_H_
#define CODEBOX_PROCESS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox {

// Kills one Box::Exec or Box::RunPython from another thread while it runs (a server whose
// client hung up): pass it as ExecOptions::cancel, call Cancel() from anywhere. The exec's
// whole process tree is killed, also what left its process group, and the call returns its
// result as the kill left it (signal 9). A Cancel() before the exec started kills it as it
// starts. One ExecCancel serves one call.
class ExecCancel {
 public:
  void Cancel();
  bool cancelled() const;
  // For the box: `kill` runs on Cancel(), or at once when Cancel() came first. Unbind()
  // before what `kill` uses goes away; it waits for a `kill` that is running.
  void Bind(std::function<void()> kill);
  void Unbind();

 private:
  mutable std::mutex mu_;
  bool cancelled_ = false;
  std::function<void()> kill_;
};

// One process of a box's table. The box is the attacker: what it says is bounded by the host
// (at most 256 entries, 8 arguments of 128 bytes each) but not otherwise to be believed.
struct ProcessInfo {
  int pid = 0;
  std::vector<std::string> argv;  // the first arguments, each cut short
  bool tty = false;
  bool background = false;
  std::chrono::system_clock::time_point started;  // by the box's clock
  bool running = true;
  // Once it ended (running false): exit_code, signal, timed_out, out_of_memory, duration.
  std::optional<ExecResult> exit;
  uint64_t stdout_bytes = 0, stderr_bytes = 0;      // written in all
  uint64_t dropped_stdout = 0, dropped_stderr = 0;  // no longer held for attachers
};

// A program running in a box, started by Box::Start, that the caller talks to while it runs:
// an interactive shell (ExecOptions::tty), a REPL, a server reading requests on stdin.
// Every method may be called from any thread, also while another thread is in Wait().
// Destroying it before Wait() returned kills the program and everything it started (as the
// exec timeout would), unless it is a background one (ExecOptions::background) or a handle of
// Box::Attach: those only stop following it. Box::Destroy() (or the box's lifetime) ends it
// too: Wait() then fails. The Process object must be destroyed before the Box object.
class Process {
 public:
  virtual ~Process() = default;
  // Bytes for the program's stdin, in order. On a terminal they are typed: "\x03" is Ctrl-C
  // (SIGINT to the foreground programs), "\x04" Ctrl-D, as the terminal's settings say.
  virtual Status WriteStdin(std::string_view data) = 0;
  // Ends stdin (the program reads end of file). On a terminal, types its end-of-file character
  // (Ctrl-D) instead: the terminal stays, the program's output still comes.
  virtual Status CloseStdin() = 0;
  // The terminal's new size (each side 1..10000); its foreground programs get SIGWINCH.
  // kInvalidArgument for a program started without ExecOptions::tty; kNotFound once it ended.
  virtual Status Resize(TerminalSize size) = 0;
  // Sends `sig` to the program's process group; kNotFound once it ended.
  virtual Status Signal(int sig) = 0;
  // Kills the program and everything it started, also what left its process group; returns
  // at once (Wait() then reports the kill).
  virtual Status Kill() = 0;
  // Its pid in the box (Box::Attach, Box::Processes take it); 0 when the box did not say.
  virtual int pid() const = 0;
  // A handle of Box::Attach or of a background Box::Start stops following the process, which
  // runs on: Wait() then fails with kFailedPrecondition. Does nothing on an exec's own handle.
  virtual void Detach() = 0;
  // Waits for the end and returns what Box::Exec would have (the output limit, timeout, OOM
  // and ExecResult::driver alike). Call once.
  virtual StatusOr<ExecResult> Wait() = 0;
};

}  // namespace codebox

#endif  // CODEBOX_PROCESS_H_
