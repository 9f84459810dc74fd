// The host's reader of the kernel's protocol lines (docs/kernel.md). Cell code runs in the
// kernel's process and may write anything to the protocol fd, so every line is hostile input:
// checked types, a cap per line and per cell, only known MIME types kept. A line that breaks
// the protocol is an error (the session kills the kernel for it); nothing here throws, and no
// buffer is sized from a number the kernel sent.
#ifndef CODEBOX_INTERPRETER_IPYTHON_DECODER_H_
#define CODEBOX_INTERPRETER_IPYTHON_DECODER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/execution.h"
#include "codebox/status.h"

namespace codebox::interpreter {

// A line may be this much longer than the per-cell output cap (JSON escaping, error texts):
// the kernel keeps its lines under the cap plus this (it is told the cap per cell).
inline constexpr uint64_t kLineSlack = 4u << 20;
// The most bytes of one error field (name, value, traceback) the host keeps.
inline constexpr size_t kMaxErrorField = 256u << 10;
// Each chunk and result costs the host memory beyond its bytes: a cell keeps at most
// max(kMinItems, output cap / kItemBytes) of them (a flood of one-byte prints is cut there).
inline constexpr uint64_t kItemBytes = 64;
inline constexpr uint64_t kMinItems = 4096;

// The MIME types a result may carry; others are dropped.
bool IsKnownMime(std::string_view mime);

// What the kernel said that is not part of a cell's Execution.
struct KernelFatal {
  std::string kind;  // "no_ipython", "start_failed", ...
  std::string message;
};

// Something to hand to the user's streaming callbacks, in the order the kernel sent it.
struct Emit {
  enum Kind { kStdout, kStderr, kResult } kind = kStdout;
  std::string text;
  CellResult result;
};

class KernelDecoder {
 public:
  explicit KernelDecoder(uint64_t output_limit);

  // The longest line accepted (the kernel is told it).
  uint64_t max_line() const { return max_line_; }

  // Starts collecting cell `id`: messages for any other id are dropped from now on.
  void BeginCell(int64_t id);

  // Takes bytes of the protocol stream. An error (the kernel broke the protocol; the text says
  // how) is sticky: every later call returns it.
  Status Feed(std::string_view bytes);

  bool ready() const { return ready_; }
  const std::optional<KernelFatal>& fatal() const { return fatal_; }
  std::string ipython_version() const { return ipython_version_; }
  bool cell_done() const { return cell_done_; }
  // The cell being collected (or the last one).
  Execution& execution() { return execution_; }
  // Output decoded since the last call, for the streaming callbacks.
  std::vector<Emit> TakeEmits();

 private:
  Status Line(std::string_view line);
  // Charges `bytes` and one item to the cell's output budget; false (and output_truncated)
  // when over.
  bool Charge(uint64_t bytes);

  const uint64_t output_limit_;
  const uint64_t max_line_;
  const uint64_t max_items_;
  std::string partial_;  // an unfinished line, never longer than max_line_
  Status broken_;
  bool ready_ = false;
  std::optional<KernelFatal> fatal_;
  std::string ipython_version_;
  int64_t cell_id_ = -1;  // no cell: every id is another one
  bool cell_done_ = false;
  uint64_t used_ = 0;
  uint64_t items_ = 0;
  bool main_seen_ = false;
  Execution execution_;
  std::vector<Emit> emits_;
};

}  // namespace codebox::interpreter

#endif  // CODEBOX_INTERPRETER_IPYTHON_DECODER_H_
