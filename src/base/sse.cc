#include "base/sse.h"

namespace codebox::base {

Status SseParser::Feed(std::string_view bytes, const Callback& on_event) {
  while (!bytes.empty()) {
    if (last_was_cr_) {
      last_was_cr_ = false;
      if (bytes.front() == '\n') {  // the \n of a \r\n pair
        bytes.remove_prefix(1);
        continue;
      }
    }
    size_t end = bytes.find_first_of("\r\n");
    if (end == std::string_view::npos) {
      line_.append(bytes);
      bytes = {};
    } else {
      line_.append(bytes.substr(0, end));
      last_was_cr_ = bytes[end] == '\r';
      bytes.remove_prefix(end + 1);
      std::string line = std::move(line_);
      line_.clear();
      RETURN_IF_ERROR(Line(line, on_event));
    }
    if (line_.size() + data_.size() + event_.size() > max_event_bytes_) {
      return LimitExceeded("an event of the stream passes " + std::to_string(max_event_bytes_) +
                           " bytes");
    }
  }
  return Status::Ok();
}

Status SseParser::Finish(const Callback& on_event) {
  if (!line_.empty()) {
    std::string line = std::move(line_);
    line_.clear();
    RETURN_IF_ERROR(Line(line, on_event));
  }
  return Dispatch(on_event);
}

Status SseParser::Line(std::string_view line, const Callback& on_event) {
  if (line.empty()) return Dispatch(on_event);
  if (line.front() == ':') return Status::Ok();  // a comment: the keep-alive
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "event") {
    event_ = std::string(value);
  } else if (field == "data") {
    if (has_data_) data_ += '\n';
    data_.append(value);
    has_data_ = true;
  }
  return Status::Ok();
}

Status SseParser::Dispatch(const Callback& on_event) {
  if (!has_data_ && event_.empty()) return Status::Ok();
  std::string event = event_.empty() ? "message" : std::move(event_);
  std::string data = std::move(data_);
  event_.clear();
  data_.clear();
  has_data_ = false;
  return on_event(event, data);
}

}  // namespace codebox::base
