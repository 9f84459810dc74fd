// An incremental text/event-stream parser for the client: bytes in as they arrive, events out
// as each one ends (a blank line). "event:" names it (default "message"), "data:" lines are
// joined with '\n', ":" lines are comments (the server's keep-alives); "id:" and "retry:" are
// ignored. One event is capped in size, since a stream may run for long.
#ifndef CODEBOX_HTTP_SSE_H_
#define CODEBOX_HTTP_SSE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::http {

class SseParser {
 public:
  using Callback = std::function<Status(std::string_view event, std::string_view data)>;
  explicit SseParser(uint64_t max_event_bytes = 64ull << 20) : max_event_bytes_(max_event_bytes) {}

  // Feeds bytes; calls on_event for each completed event. An error on_event returns is
  // returned; kLimitExceeded when one event passes the cap.
  Status Feed(std::string_view bytes, const Callback& on_event);

 private:
  Status Line(std::string_view line, const Callback& on_event);

  uint64_t max_event_bytes_;
  std::string line_;
  std::string event_;
  std::string data_;
  bool has_data_ = false;
};

}  // namespace codebox::http

#endif  // CODEBOX_HTTP_SSE_H_
