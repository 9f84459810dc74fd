// Incremental parser for server-sent events (the text/event-stream format that
// OpenAI-compatible servers use when asked to stream). Bytes arrive in arbitrary pieces
// from the network; events come out whole.
//
// Follows the WHATWG "event stream interpretation": lines end in \n, \r\n or \r; a blank
// line ends an event; "data:" lines are joined with \n; lines starting with ':' are comments
// (servers send them as keep-alives); one leading space after the colon is dropped.
#ifndef CODEBOX_LLM_SSE_H_
#define CODEBOX_LLM_SSE_H_

#include <functional>
#include <string>
#include <string_view>

namespace codebox::llm {

struct SseEvent {
  std::string event;  // the "event:" field; empty means the default "message"
  std::string data;
};

class SseParser {
 public:
  using Callback = std::function<void(const SseEvent&)>;

  // Feeds the next bytes; calls on_event for every event they complete.
  void Feed(std::string_view bytes, const Callback& on_event);
  // The stream ended: an event not yet closed by a blank line is still delivered, because
  // some servers close the connection right after the last data line.
  void Finish(const Callback& on_event);

 private:
  void ProcessLine(std::string_view line, const Callback& on_event);
  void Dispatch(const Callback& on_event);

  std::string line_;  // the line being assembled across Feed calls
  bool last_was_cr_ = false;  // a \r ended the previous piece: a following \n belongs to it
  SseEvent pending_;
  bool has_data_ = false;
};

}  // namespace codebox::llm

#endif  // CODEBOX_LLM_SSE_H_
