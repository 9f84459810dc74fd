// Status on the terminal while people wait: a line drawn in place with a spinner ("[step 1]
// asking gpt-4o-mini... /"), and the note that a box is about to start under emulation. Only
// on a terminal: when stderr is a file or a pipe nothing is written, so what scripts capture
// stays as it was.
#ifndef CODEBOX_CLI_PROGRESS_H_
#define CODEBOX_CLI_PROGRESS_H_

#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/log.h"
#include "box/backend.h"
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::cli {

// Whether a status line can be drawn on `fd`: a terminal, and TERM is not "dumb" (which has no
// way to erase a line).
bool IsStatusTerminal(int fd);

// One line of status, redrawn in place ("\r TEXT SPINNER", erased to the end of the line) by a
// thread that turns the spinner every 100 ms until Clear(). Disabled, every call does nothing.
// The owner calls Clear() before it writes anything else to the terminal (stdout included, when
// both are the same terminal), so no status text is left among the output. Library log lines
// (CODEBOX_LOG) written while a status shows go through it: above the status, which is drawn
// again under them.
class StatusLine {
 public:
  // `columns`: the terminal's width, to keep the line from wrapping (which \r cannot undo);
  // 0: ask the terminal behind `out`.
  StatusLine(std::FILE* out, bool enabled, int columns = 0);
  ~StatusLine();  // Clear()s
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;

  // Shows `text` (replacing what is shown) with a turning spinner after it.
  void Show(std::string text);
  // Erases the line and leaves the cursor at its start. Nothing when nothing is shown.
  void Clear();
  bool enabled() const { return enabled_; }

 private:
  void Draw();  // with mu_ held
  void Spin();
  // A log line, written where the status is, which is drawn again after it.
  void WriteAbove(const std::string& text);
  static void LogAround(base::LogLevel level, const std::string& line);

  std::FILE* const out_;
  const bool enabled_;
  int columns_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::string text_;
  bool showing_ = false;
  bool stopping_ = false;
  int frame_ = 0;
  std::thread spinner_;
  bool routes_log_ = false;  // LogAround is the log sink because of this line
  base::LogSink previous_sink_ = nullptr;
};

// Whether a box with `options` starts as a vm under emulation, given the driver the host
// would choose for them (box::ChooseDriver): such a start takes seconds where a jail's takes
// milliseconds. False for a box on a codebox server (its host decides), and when no driver
// can run it (the error will say why).
bool StartsEmulated(const BoxOptions& options, const StatusOr<box::DriverChoice>& choice);

// While it lives (or until Done), "starting VM (emulated, a few seconds)..." on the terminal.
class BoxStartNotice {
 public:
  BoxStartNotice() = default;
  explicit BoxStartNotice(std::unique_ptr<StatusLine> line) : line_(std::move(line)) {}
  // The box is up (or failed to come up): the line is erased.
  void Done() { line_.reset(); }
  bool showing() const { return line_ != nullptr; }

 private:
  std::unique_ptr<StatusLine> line_;
};

// Says "starting VM (emulated, a few seconds)..." on stderr when it is a terminal and a box
// with `options` starts under emulation here (the host is probed only then); else shows
// nothing. Call it just before creating the box and Done() once it is up.
[[nodiscard]] BoxStartNotice AnnounceBoxStart(const BoxOptions& options);
// The same on `out`, with whether it is a terminal and the host's driver choice given.
using DriverChooser = std::function<StatusOr<box::DriverChoice>(const BoxOptions&)>;
[[nodiscard]] BoxStartNotice AnnounceBoxStart(const BoxOptions& options, std::FILE* out,
                                              bool terminal, const DriverChooser& choose);

}  // namespace codebox::cli

#endif  // CODEBOX_CLI_PROGRESS_H_
