// The stdio transport of MCP (`codebox mcp`): newline-delimited JSON-RPC messages on one fd
// in and one fd out, nothing else on the out fd (logs go to stderr).
//
// Requests other than tools/call (initialize, ping, tools/list) and notifications are handled
// as they are read, in order; tools/call runs on a worker thread, one call at a time in the
// order they came (the box runs one anyway, and `x = 1` then `print(x)` must not swap), so
// that a notifications/cancelled read meanwhile interrupts the cell it names, or drops a
// call still queued. Answers are written
// whole, one per line, under a lock. A line longer than max_line_bytes is answered with an
// error (id null) and the rest of it is skipped, never buffered.
#ifndef CODEBOX_MCP_STDIO_H_
#define CODEBOX_MCP_STDIO_H_

#include <chrono>
#include <cstddef>

#include "mcp/session.h"

namespace codebox::mcp {

struct StdioOptions {
  size_t max_line_bytes = 16u << 20;
  size_t max_pending = 64;  // tools/call queued or running; more are answered with an error
  // After a stop: how long the cancelled calls may take to end.
  std::chrono::milliseconds stop_grace{std::chrono::seconds(5)};
};

enum class StdioEnd {
  kDone,  // every call has ended; the session may be destroyed
  kBusy,  // a call did not end within stop_grace: it still uses the session, so the caller
          // must exit the process without destroying it (the box dies with the process)
};

// Serves `session` until `in_fd` ends (the calls in flight are answered first), the out fd
// is gone, or `stop_fd` (-1: none) becomes readable (a signal: the calls in flight are
// cancelled, and no more answers are written).
StdioEnd ServeStdio(Session& session, int in_fd, int out_fd, int stop_fd,
                    const StdioOptions& options = {});

}  // namespace codebox::mcp

#endif  // CODEBOX_MCP_STDIO_H_
