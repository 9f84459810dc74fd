#include "server/api_stream.h"

#include <chrono>

#include "server/api_json.h"

namespace codebox::server {

Status EventSink::Begin() {
  Status st = exchange_.BeginEvents(200);
  if (!st.ok()) failed_ = true;
  return st;
}

void EventSink::Send(std::string_view event, const nlohmann::json& data) {
  if (failed_) return;
  std::string text = Dump(data);
  std::lock_guard<std::mutex> lock(mu_);
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
