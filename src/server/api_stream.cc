#include "server/api_stream.h"

#include <chrono>
#include <utility>

#include "api/text_event.h"
#include "base/json.h"

namespace codebox::server {

Status EventSink::Begin() {
  Status st = exchange_.BeginEvents(200);
  if (!st.ok()) failed_ = true;
  return st;
}

namespace {

// How many bytes at the end of `s` begin a UTF-8 character that the next chunk may complete
// (0 when `s` ends on a character boundary or the tail can never become valid).
size_t CutCharacterBytes(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

void EventSink::Send(std::string_view event, const nlohmann::json& data) {
  if (failed_) return;
  std::string text = base::JsonText(data);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [held_event, bytes] : held_) {
    if (bytes.empty()) continue;
    SendLocked(held_event, base::JsonText(api::TextEventToJson(std::exchange(bytes, {}))));
  }
  SendLocked(event, text);
}

void EventSink::SendText(std::string_view event, std::string_view chunk) {
  if (failed_) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(event);
  if (it == held_.end()) it = held_.emplace(std::string(event), std::string()).first;
  std::string text = std::exchange(it->second, {});
  text.append(chunk);
  size_t cut = CutCharacterBytes(text);
  it->second = text.substr(text.size() - cut);
  text.resize(text.size() - cut);
  if (!text.empty()) SendLocked(event, base::JsonText(api::TextEventToJson(text)));
}

void EventSink::SendLocked(std::string_view event, const std::string& text) {
  if (failed_) return;
  if (!exchange_.SendEvent(event, text).ok()) failed_ = true;
}

DisconnectWatch::DisconnectWatch(http::Exchange& exchange, const EventSink* sink,
                                 std::function<void()> on_gone)
    : exchange_(exchange), sink_(sink), on_gone_(std::move(on_gone)) {
  thread_ = std::thread([this] { Run(); });
}

DisconnectWatch::~DisconnectWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DisconnectWatch::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stop_; })) {
    if (exchange_.ClientGone() || (sink_ != nullptr && sink_->failed())) {
      fired_ = true;
      lock.unlock();
      on_gone_();
      return;
    }
  }
}

}  // namespace codebox::server
