#include "http/sse.h"

namespace codebox::http {

Status SseParser::Feed(std::string_view bytes, const Callback& on_event) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      line_.append(bytes);
      bytes = {};
    } else {
      line_.append(bytes.substr(0, nl));
      bytes.remove_prefix(nl + 1);
      if (!line_.empty() && line_.back() == '\r') line_.pop_back();
      std::string line = std::move(line_);
      line_.clear();
      RETURN_IF_ERROR(Line(line, on_event));
    }
    if (line_.size() + data_.size() + event_.size() > max_event_bytes_) {
      return LimitExceeded("an event from the server passes " + std::to_string(max_event_bytes_) +
                           " bytes");
    }
  }
  return Status::Ok();
}

Status SseParser::Line(std::string_view line, const Callback& on_event) {
  if (line.empty()) {
    if (!has_data_ && event_.empty()) return Status::Ok();
    std::string event = event_.empty() ? "message" : std::move(event_);
    std::string data = std::move(data_);
    event_.clear();
    data_.clear();
    has_data_ = false;
    return on_event(event, data);
  }
  if (line[0] == ':') return Status::Ok();
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (field == "event") {
    event_ = std::string(value);
  } else if (field == "data") {
    if (has_data_) data_ += '\n';
    data_.append(value);
    has_data_ = true;
  }
  return Status::Ok();
}

}  // namespace codebox::http
