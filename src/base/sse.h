// The one incremental parser of server-sent events (text/event-stream), for every stream
// codebox reads: a codebox server's exec and ask events (http::Client) and a model server's
// streamed reply (llm::Complete). Bytes arrive in arbitrary pieces; events come out whole.
//
// The WHATWG event-stream interpretation: lines end in \n, \r\n or \r; a blank line ends an
// event; "data:" lines are joined with \n; "event:" names it ("message" when none does);
// lines starting with ':' are comments (keep-alives); one space after the colon is dropped;
// "id:" and "retry:" are ignored. An event is delivered when it had a data line or a name.
// Both ends of such a stream may be hostile, so one event (with the line being read) is capped.
#ifndef CODEBOX_BASE_SSE_H_
#define CODEBOX_BASE_SSE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::base {

class SseParser {
 public:
  using Callback = std::function<Status(std::string_view event, std::string_view data)>;
  static constexpr uint64_t kDefaultMaxEventBytes = 64ull << 20;
  explicit SseParser(uint64_t max_event_bytes = kDefaultMaxEventBytes)
      : max_event_bytes_(max_event_bytes) {}

  // Feeds the next bytes; calls on_event for each event they complete. An error on_event
  // returns is returned (the parser is then spent); kLimitExceeded when one event passes the cap.
  Status Feed(std::string_view bytes, const Callback& on_event);
  // The stream ended: an event not yet closed by a blank line is still delivered, because
  // some servers close the connection right after the last data line.
  Status Finish(const Callback& on_event);

 private:
  Status Line(std::string_view line, const Callback& on_event);
  Status Dispatch(const Callback& on_event);

  uint64_t max_event_bytes_;
  std::string line_;          // the line being assembled across Feed calls
  bool last_was_cr_ = false;  // a \r ended the previous piece: a following \n belongs to it
  std::string event_;
  std::string data_;
  bool has_data_ = false;
};

}  // namespace codebox::base

#endif  // CODEBOX_BASE_SSE_H_
