// Terminal input for `codebox repl`: lines with libedit's editing and history on a terminal,
// plain lines from a pipe; and Ctrl-C, which interrupts the running cell or, at the prompt,
// abandons the line being typed.
#ifndef CODEBOX_CLI_LINE_READER_H_
#define CODEBOX_CLI_LINE_READER_H_

#include <signal.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/unique_fd.h"
#include "codebox/status.h"

namespace codebox::cli {

// $XDG_STATE_HOME/codebox/repl_history, else $HOME/.local/state/codebox/repl_history; "" (no
// history file) when neither is set. A relative XDG_STATE_HOME is ignored, as the XDG spec says.
std::string ReplHistoryPath(const std::string& xdg_state_home, const std::string& home);

// Most lines the history file keeps (the oldest go first).
inline constexpr int kReplHistoryLines = 1000;

// Routes SIGINT while it lives (one per process): during a cell (SetCellRunning(true)) to
// `interrupt_cell`, called on a thread of its own; at the prompt to prompt_fd(), which becomes
// readable, for the LineReader. Install it before starting any thread (Box::Create): it blocks
// SIGINT in the calling thread, so every thread started later has it blocked and only the
// relay's own thread takes the signal; no other wait is cut short by it (EINTR).
class InterruptRelay {
 public:
  static StatusOr<std::unique_ptr<InterruptRelay>> Install(std::function<void()> interrupt_cell);
  ~InterruptRelay();  // restores the previous SIGINT disposition

  void SetCellRunning(bool running);
  // True (once) when interrupt_cell ran since the last call.
  bool TakeCellInterrupted() { return cell_interrupted_.exchange(false); }
  int prompt_fd() const { return prompt_read_.get(); }

 private:
  InterruptRelay() = default;
  void CellThread();

  std::function<void()> interrupt_cell_;
  base::UniqueFd prompt_read_, prompt_write_, cell_read_, cell_write_;
  std::atomic<bool> cell_interrupted_{false};
  std::thread thread_;
  struct sigaction old_action_ = {};
  sigset_t old_mask_ = {};
};

class LineReader {
 public:
  enum class Event {
    kLine,         // *line holds it, without the newline
    kInterrupted,  // Ctrl-C at the prompt: the line is abandoned
    kEnd,          // Ctrl-D on an empty line, or the end of the input
  };
  // A libedit reader when stdin and stdout are terminals (history in `history_path` unless
  // empty), else a plain one that shows no prompts. Ctrl-C is seen through `interrupt_fd`.
  static std::unique_ptr<LineReader> Create(const std::string& history_path, int interrupt_fd);
  virtual ~LineReader() = default;

  virtual Event Read(const std::string& prompt, std::string* line) = 0;
  // Adds a line to the history and saves the history file.
  virtual void Remember(const std::string& line) = 0;
  // Why the history cannot be kept (said once), or "".
  virtual std::string TakeHistoryProblem() { return {}; }
};

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_LINE_READER_H_
