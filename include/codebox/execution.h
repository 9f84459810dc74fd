// Execution: what one cell of a box's code-interpreter session gave back (Box::RunCode).
//
//   auto e = box->RunCode("import math\nmath.pi * 2");
//   if (e.ok() && !e->error) std::cout << e->text() << "\n";   // 6.283185307179586
//
// The names follow E2B's Execution (logs, results, error, execution_count, .text), so code
// written for it reads naturally. Everything here came out of the box: the host has checked
// its types and sizes, but its content is the box's choice.
#ifndef CODEBOX_EXECUTION_H_
#define CODEBOX_EXECUTION_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/egress.h"

namespace codebox {

// One rich output of a cell, as a MIME bundle: `display(x)`, a chart, or the value of the
// cell's last expression. Values are text: text/plain, text/html, text/markdown, text/latex,
// image/svg+xml and application/javascript as the kernel formatted them; image/png and
// image/jpeg as base64 (as in Jupyter and E2B); application/json as JSON text. A matplotlib
// figure also comes as kChartMime: what it draws, as JSON text (docs/kernel.md, "Charts").
inline constexpr char kChartMime[] = "application/vnd.codebox.chart+json";

struct CellResult {
  std::map<std::string, std::string> data;  // MIME type -> value
  bool is_main_result = false;  // the value of the cell's last expression (at most one per cell)

  // The value for `mime`, or nullptr when this result has no such format.
  const std::string* Get(std::string_view mime) const {
    auto it = data.find(std::string(mime));
    return it == data.end() ? nullptr : &it->second;
  }
};

// An exception the cell raised, or why the cell's kernel is gone.
struct CellError {
  std::string name;       // "ZeroDivisionError", "KeyboardInterrupt" (timed out), "KernelRestarted"
  std::string value;      // "division by zero"
  std::string traceback;  // formatted by IPython, without colour codes
};

struct Execution {
  std::vector<std::string> stdout_chunks;  // E2B's logs.stdout: the pieces as they came
  std::vector<std::string> stderr_chunks;  // E2B's logs.stderr
  std::vector<CellResult> results;
  std::optional<CellError> error;
  int64_t execution_count = 0;  // the kernel's counter (In [n]); 0 when no cell ran
  std::chrono::milliseconds duration{0};
  // Interrupted (KeyboardInterrupt) at its timeout; the session's state survives unless
  // kernel_restarted is also set.
  bool timed_out = false;
  // The kernel died (or was killed because it ignored the interrupt): every variable is gone
  // and the next cell runs in a fresh kernel. error->value says why.
  bool kernel_restarted = false;
  bool out_of_memory = false;     // the kernel was killed for the box's memory limit
  bool output_truncated = false;  // the cell passed the per-cell output cap; the rest is dropped
  std::string driver;             // which isolation ran it: "jail", "vm/kvm", "vm/tcg"
  // The box's connections refused, failed or cut while the cell ran: why, and what to do.
  std::vector<NetworkEvent> network_events = {};

  // text/plain of the main result; "" when the cell had none (E2B's Execution.text).
  std::string text() const {
    for (const CellResult& r : results) {
      if (r.is_main_result) {
        const std::string* t = r.Get("text/plain");
        return t == nullptr ? std::string() : *t;
      }
    }
    return {};
  }
};

struct RunCodeOptions {
  // nullopt: BoxOptions::exec_timeout; else at least 1 ms, or kNoTimeout.
  std::optional<std::chrono::milliseconds> timeout = {};
  // Streaming, called from an internal thread in the order the kernel sent them, before
  // RunCode returns (the Execution still holds everything). Must not call back into the Box.
  std::function<void(std::string_view)> on_stdout = {};
  std::function<void(std::string_view)> on_stderr = {};
  std::function<void(const CellResult&)> on_result = {};
  // The session the cell runs in: "" is the box's own; any other name is a session of its own
  // (its own kernel and variables: E2B's code contexts), started on its first cell in `cwd`
  // (empty: the workdir; a relative one is under it). At most kMaxCodeSessions named sessions
  // live in a box at once (Box::EndCodeSession ends one). Named sessions run in boxes of this
  // process only, not yet on a box of a server.
  std::string session = {};
  std::string cwd = {};
};

inline constexpr size_t kMaxCodeSessions = 8;

}  // namespace codebox

#endif  // CODEBOX_EXECUTION_H_
