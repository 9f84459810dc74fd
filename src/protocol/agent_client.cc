#include "protocol/agent_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <set>
#include <thread>
#include <variant>

#include "base/io.h"
#include "base/log.h"
#include "protocol/frame.h"
#include "protocol/message.h"
#include "protocol/messages.h"

namespace codebox::protocol {

using Clock = std::chrono::steady_clock;

namespace {

// An exec whose agent-side timeout passed has this long to report before the host gives up.
constexpr auto kExecGrace = std::chrono::seconds(10);
// Streams remembered after the host finished or gave up on them (to tell a late frame from a
// forged one); the oldest are forgotten past this.
constexpr size_t kRememberedStreams = 4096;
// Listing accounting: bytes charged per entry on top of its name.
constexpr uint64_t kEntryOverhead = 64;

std::string Violation(const std::string& what) { return "agent protocol violation: " + what; }

// Waits until fd is writable or `idle` passes without progress.
Status WaitWritable(int fd, std::chrono::milliseconds idle) {
  for (;;) {
    pollfd p{fd, POLLOUT, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(idle.count(), INT32_MAX)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return base::ErrnoStatus("poll agent connection");
    if (ready == 0) {
      return DeadlineExceeded("agent stopped reading: no progress sending to it for " +
                              std::to_string(idle.count()) + " ms");
    }
    return Status::Ok();
  }
}

// sendmsg() with MSG_NOSIGNAL so a dead agent is an error, not a SIGPIPE in the user's
// process, and MSG_DONTWAIT so an agent that stops reading cannot block the host past `idle`;
// writev() for transports that are not sockets. The parts are sent in order without first
// being copied into one buffer (file data moves at hundreds of MB/s).
Status SendAll(int fd, std::chrono::milliseconds idle, std::string_view first,
               std::string_view second = {}) {
  iovec iov[2] = {{const_cast<char*>(first.data()), first.size()},
                  {const_cast<char*>(second.data()), second.size()}};
  int index = 0;
  while (index < 2) {
    if (iov[index].iov_len == 0) {
      ++index;
      continue;
    }
    msghdr msg = {};
    msg.msg_iov = &iov[index];
    msg.msg_iovlen = static_cast<size_t>(2 - index);
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == ENOTSOCK) {
      RETURN_IF_ERROR(WaitWritable(fd, idle));
      n = ::writev(fd, &iov[index], 2 - index);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        RETURN_IF_ERROR(WaitWritable(fd, idle));
        continue;
      }
      return BoxCrashed(std::string("agent connection closed: write: ") + std::strerror(errno));
    }
    for (auto left = static_cast<size_t>(n); left > 0 && index < 2;) {
      size_t step = std::min(left, iov[index].iov_len);
      iov[index].iov_base = static_cast<char*>(iov[index].iov_base) + step;
      iov[index].iov_len -= step;
      left -= step;
      if (iov[index].iov_len == 0) ++index;
    }
  }
  return Status::Ok();
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
Verdict Continue() { return {}; }
Verdict Done(Status st = Status::Ok()) { return {Verdict::kDone, std::move(st)}; }
Verdict GiveUp(Status st) { return {Verdict::kGiveUp, std::move(st)}; }

// What a frame is, for messages: the event's name for control frames, else the frame type.
std::string Describe(const Frame& frame, const msg::Event* event) {
  if (event != nullptr) return std::string(msg::EventName(*event));
  return std::string(FrameTypeName(frame.type));
}

Verdict Unexpected(const Frame& frame, const msg::Event* event, const char* request) {
  return {Verdict::kViolation, ProtocolError(Violation(Describe(frame, event) + " on " + request +
                                                       " stream " + std::to_string(frame.stream)))};
}

// Called on the reader thread for each frame of a request; `event` is the decoded event of a
// control frame (error events never reach it: they end the request).
using FrameHandler = std::function<Verdict(const Frame&, const msg::Event* event)>;

// One request in flight; `result` is final once `finished` is set.
struct Pending {
  FrameHandler on_frame;
  bool finished = false;
  bool in_handler = false;  // the reader is running on_frame (user callbacks) right now
  Status result;
  Clock::time_point last_frame;
};

// How abandoned_ remembers a stream the reader gave up on while the agent still sends.
constexpr char kGivenUp[] = "given up";

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
WaitPolicy IdleWait(std::chrono::milliseconds idle) { return WaitPolicy{std::nullopt, idle}; }
WaitPolicy DeadlineWait(Clock::time_point deadline) { return WaitPolicy{deadline, std::nullopt}; }

}  // namespace

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
  StatusOr<std::shared_ptr<Pending>> Register(uint32_t stream, FrameHandler on_frame) {
    auto pending = std::make_shared<Pending>();
    pending->on_frame = std::move(on_frame);
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
  void Abandon(uint32_t stream) {
    bool cancel = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto it = pending_.find(stream);
      if (it != pending_.end()) {
        std::shared_ptr<Pending> pending = it->second;
        pending_.erase(it);
        cancel = true;
        if (std::this_thread::get_id() != reader_.get_id()) {
          cv_.wait(lock, [&] { return !pending->in_handler || !dead_.ok(); });
        }
      } else if (const std::string* how = abandoned_.Find(stream)) {
        cancel = *how == kGivenUp;
      }
      abandoned_.Add(stream, "cancelled");
      cancel = cancel && dead_.ok();
    }
    if (cancel) SendCancel(stream);
  }

  // Fire and forget: the answer (done, or an error for a stream the agent already finished)
  // ends the cancel's own stream in the reader; nobody waits for it.
  void SendCancel(uint32_t target) {
    uint32_t stream = NewStream();
    auto pending = Register(stream, [](const Frame& frame, const msg::Event* event) -> Verdict {
      if (event != nullptr && std::holds_alternative<msg::Done>(*event)) return Done();
      return {Verdict::kViolation,
              ProtocolError(Violation(Describe(frame, event) + " on cancel stream " +
                                      std::to_string(frame.stream)))};
    });
    if (!pending.ok()) return;
    if (!Send(FrameType::kControl, stream, msg::EncodeRequest(msg::Cancel{target})).ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.erase(stream);
    }
  }

  Status Send(FrameType type, uint32_t stream, std::string_view payload) {
    // The header alone (an empty frame), with the real length patched in: the payload is
    // sent from where it lies.
    std::string header = EncodeFrame(type, stream, {});
    for (int i = 0; i < 4; ++i) header[i] = static_cast<char>((payload.size() >> (8 * i)) & 0xff);
    std::lock_guard<std::mutex> lock(write_mu_);
    {
      std::lock_guard<std::mutex> state(mu_);
      if (!dead_.ok()) return dead_;
    }
    Status st = SendAll(fd_.get(), idle(), header, payload);
    if (!st.ok()) {
      // Part of a frame may have gone out: the stream cannot be framed any more.
      {
        std::lock_guard<std::mutex> state(mu_);
        if (dead_.ok()) dead_ = st.WithContext("agent connection closed");
      }
      ::shutdown(fd_.get(), SHUT_RDWR);
    }
    return st;
  }

  // Sends `request` on a new stream, then whatever after_request sends (stdin, file data),
  // and waits for the request to end.
  Status Call(const msg::Request& request, FrameHandler on_frame, WaitPolicy policy,
              const std::function<Status(uint32_t)>& after_request, uint32_t* stream_out = nullptr);

  // Waits for the request to finish under `policy`. *idle_passed is set (and kDeadlineExceeded
  // returned) when only the idle deadline passed, so the caller may probe and wait again.
  Status Wait(uint32_t stream, const std::shared_ptr<Pending>& pending, WaitPolicy policy,
              bool* idle_passed) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (pending->finished) return pending->result;
      Clock::time_point now = Clock::now();
      if (policy.deadline && now >= *policy.deadline) {
        return DeadlineExceeded("agent did not finish the request on stream " +
                                std::to_string(stream) + " in time");
      }
      if (policy.idle && now >= pending->last_frame + *policy.idle) {
        if (idle_passed != nullptr) *idle_passed = true;
        return DeadlineExceeded("agent sent nothing on stream " + std::to_string(stream) + " for " +
                                std::to_string(policy.idle->count()) + " ms");
      }
      std::optional<Clock::time_point> wake = policy.deadline;
      if (policy.idle) {
        Clock::time_point idle_end = pending->last_frame + *policy.idle;
        if (!wake || idle_end < *wake) wake = idle_end;
      }
      if (wake) {
        cv_.wait_until(lock, *wake);
      } else {
        cv_.wait(lock);
      }
    }
  }

  // Marks the request as just heard from (a liveness probe said it runs).
  void Touch(const std::shared_ptr<Pending>& pending) {
    std::lock_guard<std::mutex> lock(mu_);
    pending->last_frame = Clock::now();
  }

  std::shared_ptr<Pending> Lookup(uint32_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(stream);
    return it == pending_.end() ? nullptr : it->second;
  }

 private:
  void ReadLoop() {
    std::string buf(kDataChunk + kHeaderSize, '\0');
    Status why;
    // Defence in depth: nothing below should throw (checked decoding), but an exception
    // (bad_alloc, a bug) must end this connection, never the host process.
    try {
      why = ReadFrames(buf);
    } catch (const std::exception& e) {
      why =
          ProtocolError(std::string("agent connection: internal error while reading: ") + e.what());
    } catch (...) {
      why = ProtocolError("agent connection: internal error while reading");
    }
    // The agent sees the connection end (and, as PID 1, the box with it).
    ::shutdown(fd_.get(), SHUT_RDWR);
    FailAll(why);
  }

  Status ReadFrames(std::string& buf) {
    for (;;) {
      // Frames already buffered (from the handshake) first.
      auto next = decoder_.Next();
      if (!next.ok())
        return ProtocolError("agent sent a malformed frame: " + next.status().message());
      if (next->has_value()) {
        RETURN_IF_ERROR(Dispatch(**next));
        continue;
      }
      ssize_t n = ::read(fd_.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        return BoxCrashed(std::string("agent connection closed: read: ") + std::strerror(errno));
      if (n == 0) {
        Status end = decoder_.CheckEndOfStream();
        return end.ok() ? BoxCrashed("agent connection closed: end of stream")
                        : ProtocolError("agent connection closed: " + end.message());
      }
      decoder_.Feed(std::string_view(buf.data(), static_cast<size_t>(n)));
    }
  }

  Status Dispatch(const Frame& frame) {
    std::optional<msg::Event> event;
    if (frame.type == FrameType::kControl) {
      auto decoded = msg::DecodeEventPayload(frame.payload);
      if (!decoded.ok()) {
        return ProtocolError(Violation("bad event on stream " + std::to_string(frame.stream) +
                                       ": " + decoded.status().message()));
      }
      event = std::move(*decoded);
    }
    const msg::Event* ev = event ? &*event : nullptr;
    if (frame.stream == 0) {
      // Stream 0 after the handshake carries only the agent's fatal errors.
      if (ev != nullptr && std::holds_alternative<msg::Error>(*ev)) {
        Status st = msg::StatusFromError(std::get<msg::Error>(*ev));
        if (st.code() == StatusCode::kProtocolError) {
          return ProtocolError("agent closed the connection: " + st.message());
        }
        return BoxCrashed("agent closed the connection: " + st.message());
      }
      return ProtocolError(Violation(Describe(frame, ev) + " frame on stream 0"));
    }
    std::shared_ptr<Pending> pending;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(frame.stream);
      if (it == pending_.end()) {
        if (abandoned_.Find(frame.stream) != nullptr) return Status::Ok();  // given up on
        const std::string what = Describe(frame, ev);
        const std::string where = " on stream " + std::to_string(frame.stream);
        if (const std::string* terminal = finished_.Find(frame.stream)) {
          if (*terminal == what && ev != nullptr) {
            return ProtocolError(Violation("second " + what + where));
          }
          return ProtocolError(Violation(what + where + " after its terminal " + *terminal));
        }
        if (frame.stream % 2 == 0 || frame.stream >= next_stream_.load()) {
          return ProtocolError(Violation(what + where + ", which the host never opened"));
        }
        return ProtocolError(Violation(what + where + ", which is not open"));
      }
      pending = it->second;
      pending->last_frame = Clock::now();
      pending->in_handler = true;
    }
    Verdict verdict;
    if (ev != nullptr && std::holds_alternative<msg::Error>(*ev)) {
      verdict = Done(msg::StatusFromError(std::get<msg::Error>(*ev)));
    } else {
      // Handlers run user callbacks, without the lock so they may take their time; one that
      // throws fails its own call only.
      try {
        verdict = pending->on_frame(frame, ev);
      } catch (const std::exception& e) {
        verdict = GiveUp(Internal(std::string("a callback threw: ") + e.what()));
      } catch (...) {
        verdict = GiveUp(Internal("a callback threw an exception"));
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    pending->in_handler = false;
    if (verdict.kind == Verdict::kViolation) {
      cv_.notify_all();
      return verdict.status;
    }
    if (verdict.kind != Verdict::kContinue) {
      if (!pending->finished) {
        pending->finished = true;
        pending->result = verdict.status;
      }
      if (pending_.erase(frame.stream) > 0) {
        if (verdict.kind == Verdict::kDone) {
          finished_.Add(frame.stream, Describe(frame, ev));
        } else {
          abandoned_.Add(frame.stream, kGivenUp);  // the caller's Abandon cancels it
        }
      }
    }
    cv_.notify_all();
    return Status::Ok();
  }

  void FailAll(const Status& why) {
    CODEBOX_LOG(kInfo, "agent connection ended: " << why.ToString());
    std::lock_guard<std::mutex> lock(mu_);
    if (dead_.ok()) dead_ = why;  // a failed send may have said first why it ended
    for (auto& [stream, pending] : pending_) {
      pending->finished = true;
      pending->result = dead_;
    }
    pending_.clear();
    cv_.notify_all();
  }

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

AgentClient::AgentClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AgentClient::~AgentClient() = default;

Status AgentClient::connection_status() const { return impl_->connection_status(); }

void AgentClient::set_idle_timeout(std::chrono::milliseconds idle) { impl_->set_idle(idle); }

namespace {

// Reads the agent's hello within the deadline; frames after it stay in the decoder.
Status ReadHello(int fd, FrameDecoder* decoder, Clock::time_point deadline) {
  char buf[4096];
  for (;;) {
    auto next = decoder->Next();
    if (!next.ok()) return ProtocolError("agent hello: " + next.status().message());
    if (next->has_value()) {
      const Frame& frame = **next;
      auto message = ParseControl(frame.payload);
      if (!message.ok()) return ProtocolError("agent hello: " + message.status().message());
      if (frame.type == FrameType::kControl) {
        auto event = msg::DecodeEvent(*message);
        if (event.ok() && std::holds_alternative<msg::Error>(*event)) {
          return msg::StatusFromError(std::get<msg::Error>(*event))
              .WithContext("agent refused the connection");
        }
      }
      if (frame.type != FrameType::kHello || frame.stream != 0) {
        return ProtocolError("agent sent a " + std::string(FrameTypeName(frame.type)) +
                             " frame before its hello");
      }
      auto hello = msg::DecodeHello(*message);
      if (!hello.ok()) return ProtocolError("agent hello: " + hello.status().message());
      if (hello->protocol != kProtocolVersion) {
        return ProtocolError("agent speaks protocol " + std::to_string(hello->protocol) +
                             ", this host " + std::to_string(kProtocolVersion));
      }
      return Status::Ok();
    }
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return StartFailed("agent did not send its hello in time");
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, INT32_MAX)));
    if (ready < 0 && errno != EINTR) return base::ErrnoStatus("poll agent connection");
    if (ready <= 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return BoxCrashed(std::string("agent connection closed: read: ") + std::strerror(errno));
    if (n == 0) return BoxCrashed("agent connection closed before its hello");
    decoder->Feed(std::string_view(buf, static_cast<size_t>(n)));
  }
}

// A handler for requests answered by one `done`.
FrameHandler ExpectDone(const char* request) {
  return [request](const Frame& frame, const msg::Event* event) -> Verdict {
    if (event != nullptr && std::holds_alternative<msg::Done>(*event)) return Done();
    return Unexpected(frame, event, request);
  };
}

}  // namespace

StatusOr<std::unique_ptr<AgentClient>> AgentClient::Connect(
    base::UniqueFd fd, std::chrono::milliseconds handshake_timeout) {
  if (!fd.valid()) return InvalidArgument("agent connection: invalid fd");
  Clock::time_point deadline = Clock::now() + handshake_timeout;
  // The reader thread blocks in read(); writes use MSG_DONTWAIT and poll.
  RETURN_IF_ERROR(base::SetNonBlocking(fd.get(), false).WithContext("agent connection"));
  msg::Hello hello;
  hello.protocol = kProtocolVersion;
  hello.client = "codebox/0.1.0";
  RETURN_IF_ERROR(SendAll(fd.get(), std::max(handshake_timeout, std::chrono::milliseconds(1)),
                          EncodeFrame(FrameType::kHello, 0, msg::EncodeHello(hello)))
                      .WithContext("agent hello"));
  FrameDecoder decoder;
  RETURN_IF_ERROR(ReadHello(fd.get(), &decoder, deadline));
  return std::unique_ptr<AgentClient>(
      new AgentClient(std::make_unique<Impl>(std::move(fd), std::move(decoder))));
}

Status AgentClient::Impl::Call(const msg::Request& request, FrameHandler on_frame,
                               WaitPolicy policy,
                               const std::function<Status(uint32_t)>& after_request,
                               uint32_t* stream_out) {
  uint32_t stream = NewStream();
  if (stream_out != nullptr) *stream_out = stream;
  ASSIGN_OR_RETURN(auto pending, Register(stream, std::move(on_frame)));
  Status st = Send(FrameType::kControl, stream, msg::EncodeRequest(request));
  if (st.ok() && after_request) st = after_request(stream);
  if (st.ok()) {
    // Sending may have taken a while (a big upload): idle time counts from its end.
    Touch(pending);
    st = Wait(stream, pending, policy, nullptr);
  }
  if (!st.ok()) Abandon(stream);
  return st;
}

namespace {

// Filled on the reader thread; read by the caller only after the request finished (or was
// abandoned, which waits for the handler to be out).
struct ExecState {
  uint64_t limit = 0;
  std::function<void(std::string_view)> on_stdout, on_stderr;
  ExecResult result;
  bool host_truncated = false;
};

Status CheckExecRequest(const ExecRequest& request) {
  if (request.argv.empty()) return InvalidArgument("exec: empty argv");
  for (size_t i = 0; i < request.argv.size(); ++i) {
    // execve would cut the string at the NUL, silently dropping the rest.
    if (request.argv[i].find('\0') != std::string::npos) {
      return InvalidArgument("exec: argv[" + std::to_string(i) + "] contains a NUL byte");
    }
  }
  if (request.cwd.find('\0') != std::string::npos) {
    return InvalidArgument("exec: the working directory contains a NUL byte");
  }
  for (const auto& [name, value] : request.env) {
    if (name.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
      return InvalidArgument("exec: environment variable contains a NUL byte");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ExecResult> AgentClient::Exec(const ExecRequest& request) {
  RETURN_IF_ERROR(CheckExecRequest(request));
  msg::Exec exec;
  exec.argv = request.argv;
  exec.env = request.env;
  exec.cwd = request.cwd;
  exec.stdin_stream = request.stdin_data.has_value();
  exec.timeout_ms = std::max<int64_t>(0, request.timeout.count());
  exec.output_limit = std::min<uint64_t>(request.output_limit, std::numeric_limits<int64_t>::max());
  const std::string what = "exec " + request.argv[0].substr(0, 256);
  {
    size_t encoded = msg::EncodeRequest(exec).size();
    if (encoded > kMaxPayload) {
      return InvalidArgument(what + ": exec request is " + std::to_string(encoded) +
                             " bytes encoded; argv and environment may take at most " +
                             std::to_string(kMaxPayload) + " bytes in all (JSON-encoded)");
    }
  }

  auto state = std::make_shared<ExecState>();
  state->limit = exec.output_limit;
  state->on_stdout = request.on_stdout;
  state->on_stderr = request.on_stderr;
  auto on_frame = [state](const Frame& frame, const msg::Event* event) -> Verdict {
    if (frame.type == FrameType::kStdout || frame.type == FrameType::kStderr) {
      const bool out = frame.type == FrameType::kStdout;
      std::string& data = out ? state->result.stdout_data : state->result.stderr_data;
      // The host's own count: whatever the agent claims, at most `limit` bytes per stream.
      uint64_t room = state->limit - std::min<uint64_t>(data.size(), state->limit);
      size_t keep = static_cast<size_t>(std::min<uint64_t>(room, frame.payload.size()));
      if (keep < frame.payload.size()) state->host_truncated = true;
      if (keep == 0) return Continue();
      std::string_view piece(frame.payload.data(), keep);
      data.append(piece);
      const auto& callback = out ? state->on_stdout : state->on_stderr;
      if (callback) callback(piece);
      return Continue();
    }
    if (event != nullptr && std::holds_alternative<msg::Exit>(*event)) {
      const msg::Exit& e = std::get<msg::Exit>(*event);
      ExecResult& r = state->result;
      r.exit_code = e.exit_code;
      r.signal = e.signal;
      r.timed_out = e.timed_out;
      r.output_truncated = e.output_truncated || state->host_truncated;
      r.out_of_memory = e.out_of_memory;
      r.duration = std::chrono::milliseconds(e.duration_ms);
      return Done();
    }
    return Unexpected(frame, event, "exec");
  };
  auto send_stdin = [this, &request](uint32_t stream) -> Status {
    if (!request.stdin_data) return Status::Ok();
    std::string_view data = *request.stdin_data;
    for (size_t off = 0; off < data.size(); off += kDataChunk) {
      RETURN_IF_ERROR(impl_->Send(FrameType::kStdin, stream, data.substr(off, kDataChunk)));
    }
    return impl_->Send(FrameType::kStdin, stream, {});
  };

  uint32_t stream = impl_->NewStream();
  auto pending = impl_->Register(stream, on_frame);
  if (!pending.ok()) return pending.status().WithContext(what);
  Status st = impl_->Send(FrameType::kControl, stream, msg::EncodeRequest(exec));
  if (st.ok()) st = send_stdin(stream);
  // The agent enforces the timeout; the host waits for it plus a grace, and while the exec
  // is silent asks the agent every idle period whether it still runs (kill, signal 0).
  WaitPolicy policy;
  if (request.timeout.count() > 0) policy.deadline = Clock::now() + request.timeout + kExecGrace;
  bool ended_on_agent = false;
  while (st.ok()) {
    impl_->Touch(*pending);
    policy.idle = impl_->idle();
    bool idle_passed = false;
    st = impl_->Wait(stream, *pending, policy, &idle_passed);
    if (st.ok() || !idle_passed) break;
    if (ended_on_agent) {
      st = DeadlineExceeded("agent said the exec on stream " + std::to_string(stream) +
                            " had ended but sent no exit");
      break;
    }
    msg::Kill probe;
    probe.target = stream;
    probe.signal = 0;
    Status alive = impl_->Call(probe, ExpectDone("kill"), IdleWait(impl_->idle()), nullptr);
    if (alive.ok()) {
      st = Status::Ok();  // it runs: wait another idle period
    } else if (alive.code() == StatusCode::kNotFound) {
      ended_on_agent = true;  // its exit may be on the way: one more idle period
      st = Status::Ok();
    } else {
      st = alive.WithContext("agent did not answer whether the exec still runs");
    }
  }
  if (!st.ok()) {
    impl_->Abandon(stream);
    return st.WithContext(what);
  }
  return std::move(state->result);
}

Status AgentClient::WriteFile(const std::string& box_path, std::string_view data, uint32_t mode) {
  auto send_data = [this, data](uint32_t stream) -> Status {
    for (size_t off = 0; off < data.size(); off += kDataChunk) {
      RETURN_IF_ERROR(impl_->Send(FrameType::kData, stream, data.substr(off, kDataChunk)));
    }
    return impl_->Send(FrameType::kData, stream, {});
  };
  return impl_
      ->Call(msg::WriteFile{box_path, mode & 07777, true}, ExpectDone("write_file"),
             IdleWait(impl_->idle()), send_data)
      .WithContext("write " + box_path);
}

Status AgentClient::WriteFileFromHost(const std::string& host_path, const std::string& box_path) {
  base::UniqueFd in(::open(host_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return base::ErrnoStatus("copy in: open " + host_path);
  struct stat st;
  if (::fstat(in.get(), &st) != 0) return base::ErrnoStatus("copy in: stat " + host_path);
  auto send_data = [this, &in, &host_path](uint32_t stream) -> Status {
    std::string chunk(kDataChunk, '\0');
    for (;;) {
      ssize_t n = ::read(in.get(), chunk.data(), chunk.size());
      if (n < 0 && errno == EINTR) continue;
      // Without an end frame the agent never renames its temp file into place, so a
      // failed host read leaves no partial file in the box.
      if (n < 0) return base::ErrnoStatus("read " + host_path);
      RETURN_IF_ERROR(impl_->Send(FrameType::kData, stream,
                                  std::string_view(chunk.data(), static_cast<size_t>(n))));
      if (n == 0) return Status::Ok();
    }
  };
  return impl_
      ->Call(msg::WriteFile{box_path, static_cast<uint32_t>(st.st_mode & 07777), true},
             ExpectDone("write_file"), IdleWait(impl_->idle()), send_data)
      .WithContext("copy " + host_path + " to box " + box_path);
}

Status AgentClient::ReadFileStream(
    const std::string& box_path, uint64_t max_bytes,
    const std::function<Status(uint64_t size, uint32_t mode)>& on_header,
    const std::function<Status(std::string_view chunk)>& on_chunk) {
  struct State {
    bool header = false;
    uint64_t received = 0;
  };
  auto state = std::make_shared<State>();
  // The callbacks are the caller's: Call() returns only once the handler is out of them.
  auto on_frame = [state, max_bytes, &on_header, &on_chunk, &box_path](
                      const Frame& frame, const msg::Event* event) -> Verdict {
    if (event != nullptr && std::holds_alternative<msg::File>(*event)) {
      if (state->header) {
        return {Verdict::kViolation,
                ProtocolError(Violation("second file event on read_file stream " +
                                        std::to_string(frame.stream)))};
      }
      state->header = true;
      const msg::File& f = std::get<msg::File>(*event);
      if (f.size > max_bytes) {
        return GiveUp(LimitExceeded("box file " + box_path + " is " + std::to_string(f.size) +
                                    " bytes, over the limit of " + std::to_string(max_bytes)));
      }
      if (on_header) {
        if (Status st = on_header(f.size, f.mode); !st.ok()) return GiveUp(st);
      }
      return Continue();
    }
    if (frame.type != FrameType::kData) return Unexpected(frame, event, "read_file");
    if (!state->header) {
      return {Verdict::kViolation,
              ProtocolError(Violation("data before the file event on read_file stream " +
                                      std::to_string(frame.stream)))};
    }
    if (frame.payload.empty()) return Done();
    state->received += frame.payload.size();
    if (state->received > max_bytes) {
      return GiveUp(LimitExceeded("box file " + box_path + " sent more than the limit of " +
                                  std::to_string(max_bytes) + " bytes"));
    }
    if (on_chunk) {
      if (Status st = on_chunk(frame.payload); !st.ok()) return GiveUp(st);
    }
    return Continue();
  };
  return impl_->Call(msg::ReadFile{box_path}, on_frame, IdleWait(impl_->idle()), nullptr)
      .WithContext("read " + box_path);
}

StatusOr<std::string> AgentClient::ReadFile(const std::string& box_path, uint64_t max_bytes) {
  // Grows with the bytes that really arrive: never reserved from the size the agent claims.
  std::string data;
  RETURN_IF_ERROR(ReadFileStream(
      box_path, max_bytes, [](uint64_t, uint32_t) { return Status::Ok(); },
      [&data](std::string_view chunk) {
        data.append(chunk);
        return Status::Ok();
      }));
  return data;
}

StatusOr<std::vector<DirEntry>> AgentClient::ListDir(const std::string& box_path,
                                                     size_t max_entries, uint64_t max_bytes) {
  struct State {
    std::vector<DirEntry> entries;
    uint64_t bytes = 0;
  };
  auto state = std::make_shared<State>();
  auto on_frame = [state, max_entries, max_bytes, &box_path](const Frame& frame,
                                                             const msg::Event* event) -> Verdict {
    if (event == nullptr || !std::holds_alternative<msg::Entries>(*event)) {
      return Unexpected(frame, event, "list_dir");
    }
    const auto& page = std::get<msg::Entries>(*event);
    for (const DirEntry& entry : page.entries) {
      state->bytes += entry.name.size() + kEntryOverhead;
      if (state->entries.size() >= max_entries || state->bytes > max_bytes) {
        return GiveUp(LimitExceeded("listing of box directory " + box_path +
                                    " is over the limit of " + std::to_string(max_entries) +
                                    " entries or " + std::to_string(max_bytes) + " bytes"));
      }
      state->entries.push_back(entry);
    }
    return page.more ? Continue() : Done();
  };
  Status st = impl_->Call(msg::ListDir{box_path}, on_frame, IdleWait(impl_->idle()), nullptr);
  if (!st.ok()) return st.WithContext("list " + box_path);
  return std::move(state->entries);
}

Status AgentClient::MakeDir(const std::string& box_path, uint32_t mode) {
  return impl_
      ->Call(msg::MakeDir{box_path, mode & 07777, true}, ExpectDone("mkdir"),
             IdleWait(impl_->idle()), nullptr)
      .WithContext("mkdir " + box_path);
}

Status AgentClient::Shutdown(std::chrono::milliseconds wait) {
  return impl_
      ->Call(msg::Shutdown{}, ExpectDone("shutdown"), DeadlineWait(Clock::now() + wait), nullptr)
      .WithContext("shutdown");
}

}  // namespace codebox::protocol
