// Internal to AgentClient (agent_client.cc and agent_connection.cc include it, nothing else):
// the connection to one agent — its reader thread, the requests in flight and what the host
// remembers of each stream — and the verdicts request handlers give on each frame.
#ifndef CODEBOX_AGENT_CLIENT_AGENT_CONNECTION_H_
#define CODEBOX_AGENT_CLIENT_AGENT_CONNECTION_H_

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <variant>

#include "base/unique_fd.h"
#include "codebox/status.h"
#include "agent_client/agent_client.h"
#include "protocol/frame.h"
#include "protocol/messages.h"

namespace codebox::protocol {

using Clock = std::chrono::steady_clock;

// An exec whose agent-side timeout passed has this long to report before the host gives up.
inline constexpr auto kExecGrace = std::chrono::seconds(10);
// Streams remembered after the host finished or gave up on them (to tell a late frame from a
// forged one); the oldest are forgotten past this.
inline constexpr size_t kRememberedStreams = 4096;
// Listing accounting: bytes charged per entry on top of its name.
inline constexpr uint64_t kEntryOverhead = 64;

inline std::string Violation(const std::string& what) {
  return "agent protocol violation: " + what;
}

// What a request's frame handler decided about one frame.
struct Verdict {
  enum Kind {
    kContinue,   // more frames to come
    kDone,       // the terminal frame; `status` is the call's result
    kGiveUp,     // the host ends the call (cap, callback error); later frames are dropped
    kViolation,  // the frame breaks the protocol; `status` says how; the connection ends
  } kind = kContinue;
  Status status;
};
inline Verdict Continue() { return {}; }
inline Verdict Done(Status st = Status::Ok()) { return {Verdict::kDone, std::move(st)}; }
inline Verdict GiveUp(Status st) { return {Verdict::kGiveUp, std::move(st)}; }

// What a frame is, for messages: the event's name for control frames, else the frame type.
inline std::string Describe(const Frame& frame, const msg::Event* event) {
  if (event != nullptr) return std::string(msg::EventName(*event));
  return std::string(FrameTypeName(frame.type));
}

inline Verdict Unexpected(const Frame& frame, const msg::Event* event, const char* request) {
  return {Verdict::kViolation, ProtocolError(Violation(Describe(frame, event) + " on " + request +
                                                       " stream " + std::to_string(frame.stream)))};
}

// Called on the reader thread for each frame of a request; `event` is the decoded event of a
// control frame (error events never reach it: they end the request).
using FrameHandler = std::function<Verdict(const Frame&, const msg::Event* event)>;

// One request in flight; `result` is final once `finished` is set.
struct Pending {
  FrameHandler on_frame;
  // Called (under the connection's lock, so it must not call back into it) once `finished` is
  // set, by whatever set it: a terminal event, an error event, the connection's end.
  std::function<void(const Status&)> on_finish;
  bool finished = false;
  bool in_handler = false;  // the reader is running on_frame (user callbacks) right now
  Status result;
  Clock::time_point last_frame;
};

// How abandoned_ remembers a stream the reader gave up on while the agent still sends.
inline constexpr char kGivenUp[] = "given up";

// A bounded memory of stream ids (oldest forgotten first).
class RecentStreams {
 public:
  void Add(uint32_t stream, std::string what) {
    if (names_.emplace(stream, std::move(what)).second) order_.push_back(stream);
    while (order_.size() > kRememberedStreams) {
      names_.erase(order_.front());
      order_.pop_front();
    }
  }
  const std::string* Find(uint32_t stream) const {
    auto it = names_.find(stream);
    return it == names_.end() ? nullptr : &it->second;
  }

 private:
  std::deque<uint32_t> order_;
  std::map<uint32_t, std::string> names_;
};

// How a caller waits: an absolute deadline and/or an idle deadline (no frame for that long).
struct WaitPolicy {
  std::optional<Clock::time_point> deadline;
  std::optional<std::chrono::milliseconds> idle;
};
inline WaitPolicy IdleWait(std::chrono::milliseconds idle) {
  return WaitPolicy{std::nullopt, idle};
}
inline WaitPolicy DeadlineWait(Clock::time_point deadline) {
  return WaitPolicy{deadline, std::nullopt};
}

// A handler for requests answered by one `done`.
inline FrameHandler ExpectDone(const char* request) {
  return [request](const Frame& frame, const msg::Event* event) -> Verdict {
    if (event != nullptr && std::holds_alternative<msg::Done>(*event)) return Done();
    return Unexpected(frame, event, request);
  };
}

class AgentClient::Impl {
 public:
  Impl(base::UniqueFd fd, FrameDecoder decoder) : fd_(std::move(fd)), decoder_(std::move(decoder)) {
    reader_ = std::thread([this] { ReadLoop(); });
  }

  ~Impl() {
    // shutdown() wakes the reader blocked in read() and any writer blocked in send().
    ::shutdown(fd_.get(), SHUT_RDWR);
    reader_.join();
  }

  Status connection_status() {
    std::lock_guard<std::mutex> lock(mu_);
    return dead_;
  }

  std::chrono::milliseconds idle() const { return std::chrono::milliseconds(idle_ms_.load()); }
  void set_idle(std::chrono::milliseconds idle) { idle_ms_ = std::max<int64_t>(1, idle.count()); }

  uint32_t NewStream() { return next_stream_.fetch_add(2); }

  // Registers a request before its first frame goes out, so no answer can be missed.
  StatusOr<std::shared_ptr<Pending>> Register(
      uint32_t stream, FrameHandler on_frame,
      std::function<void(const Status&)> on_finish = nullptr) {
    auto pending = std::make_shared<Pending>();
    pending->on_frame = std::move(on_frame);
    pending->on_finish = std::move(on_finish);
    pending->last_frame = Clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return dead_;
    pending_[stream] = pending;
    return pending;
  }

  // The host gives up on a request: late frames on its stream are dropped from now on, and
  // its handler (which may call user code) is not running when this returns.
  // A request still running in the agent (deadline passed, or given up on by the reader) is
  // cancelled there too, so a refused 1 PiB download or an upload the host stopped sending
  // does not keep the agent busy until the box ends.
  void Abandon(uint32_t stream);

  // Fire and forget: the answer (done, or an error for a stream the agent already finished)
  // ends the cancel's own stream in the reader; nobody waits for it.
  void SendCancel(uint32_t target);
  // The same for any request answered by done (or an error nobody needs).
  void SendAndForget(const msg::Request& request);

  Status Send(FrameType type, uint32_t stream, std::string_view payload);

  // Sends `request` on a new stream, then whatever after_request sends (stdin, file data),
  // and waits for the request to end.
  Status Call(const msg::Request& request, FrameHandler on_frame, WaitPolicy policy,
              const std::function<Status(uint32_t)>& after_request, uint32_t* stream_out = nullptr);

  // Waits for the request to finish under `policy`. *idle_passed is set (and kDeadlineExceeded
  // returned) when only the idle deadline passed, so the caller may probe and wait again.
  Status Wait(uint32_t stream, const std::shared_ptr<Pending>& pending, WaitPolicy policy,
              bool* idle_passed);

  // Marks the request as just heard from (a liveness probe said it runs).
  void Touch(const std::shared_ptr<Pending>& pending) {
    std::lock_guard<std::mutex> lock(mu_);
    pending->last_frame = Clock::now();
  }

 private:
  void ReadLoop();

  Status ReadFrames(std::string& buf);

  Status Dispatch(const Frame& frame);

  void FailAll(const Status& why);

  base::UniqueFd fd_;
  FrameDecoder decoder_;
  std::mutex write_mu_;
  std::mutex mu_;  // guards pending_, dead_, the stream memories and every Pending's fields
  std::condition_variable cv_;
  std::map<uint32_t, std::shared_ptr<Pending>> pending_;
  RecentStreams finished_;   // ended by their terminal event (name kept)
  RecentStreams abandoned_;  // given up on by the host; late frames are dropped
  Status dead_;
  std::atomic<uint32_t> next_stream_{1};
  std::atomic<int64_t> idle_ms_{kDefaultIdleTimeout.count()};
  std::thread reader_;
};

}  // namespace codebox::protocol

#endif  // CODEBOX_AGENT_CLIENT_AGENT_CONNECTION_H_
