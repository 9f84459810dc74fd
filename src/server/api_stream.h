// Server-sent events for the box calls that stream (exec, python, run_code, run), and what
// happens when the client goes away mid-call: the call's box work is stopped, never left
// running to its timeout.
#ifndef CODEBOX_SERVER_API_STREAM_H_
#define CODEBOX_SERVER_API_STREAM_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>

#include "codebox/status.h"
#include "http/server.h"

namespace codebox::server {

// The events of one answer. Send() is called from the box's internal threads; events go out
// in the order Send() is called. The first failed send (the client is gone, or too slow) makes
// every later Send() a no-op, so a box callback never blocks on a dead client twice.
class EventSink {
 public:
  explicit EventSink(http::Exchange& exchange) : exchange_(exchange) {}
  Status Begin();
  // Any other event first sends what SendText held back.
  void Send(std::string_view event, const nlohmann::json& data);
  // {"text": chunk} as `event` ("stdout", "stderr"), holding back a UTF-8 character cut at
  // the chunk's end until the next chunk of the same event, so it arrives whole instead of as
  // two U+FFFD (JSON text must be UTF-8; invalid bytes become U+FFFD).
  void SendText(std::string_view event, std::string_view chunk);
  bool failed() const { return failed_.load(); }

 private:
  void SendLocked(std::string_view event, const std::string& text);

  http::Exchange& exchange_;
  std::map<std::string, std::string, std::less<>> held_;  // event -> a cut character's bytes
  std::mutex mu_;
  std::atomic<bool> failed_{false};
};

// While a box call runs, watches (every 50 ms) whether the client has gone away (the
// connection closed, or the sink's last send failed) and then calls `on_gone` once, from the
// watch's own thread (box callbacks must not call into their box; this thread may).
// The destructor stops the watch and waits for an `on_gone` in progress.
class DisconnectWatch {
 public:
  DisconnectWatch(http::Exchange& exchange, const EventSink* sink, std::function<void()> on_gone);
  ~DisconnectWatch();
  DisconnectWatch(const DisconnectWatch&) = delete;
  DisconnectWatch& operator=(const DisconnectWatch&) = delete;
  bool fired() const { return fired_.load(); }

 private:
  void Run();

  http::Exchange& exchange_;
  const EventSink* sink_;
  std::function<void()> on_gone_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> fired_{false};
  std::thread thread_;
};

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_API_STREAM_H_
