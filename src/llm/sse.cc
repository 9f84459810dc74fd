#include "llm/sse.h"

namespace codebox::llm {

void SseParser::Feed(std::string_view bytes, const Callback& on_event) {
  for (char c : bytes) {
    if (last_was_cr_) {
      last_was_cr_ = false;
      if (c == '\n') continue;  // the \n of a \r\n pair
    }
    if (c == '\r' || c == '\n') {
      last_was_cr_ = (c == '\r');
      ProcessLine(line_, on_event);
      line_.clear();
    } else {
      line_.push_back(c);
    }
  }
}

void SseParser::Finish(const Callback& on_event) {
  if (!line_.empty()) {
    ProcessLine(line_, on_event);
    line_.clear();
  }
  Dispatch(on_event);
}

void SseParser::ProcessLine(std::string_view line, const Callback& on_event) {
  if (line.empty()) {
    Dispatch(on_event);
    return;
  }
  if (line.front() == ':') return;  // comment / keep-alive
  std::string_view field = line;
  std::string_view value;
  if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) pending_.data.push_back('\n');
    pending_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    pending_.event = std::string(value);
  }
  // "id" and "retry" matter only to reconnecting browsers; ignored.
}

void SseParser::Dispatch(const Callback& on_event) {
  if (has_data_) on_event(pending_);
  pending_ = SseEvent{};
  has_data_ = false;
}

}  // namespace codebox::llm
