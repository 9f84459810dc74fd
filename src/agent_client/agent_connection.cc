#include "agent_client/agent_connection.h"

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
#include <ctime>
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

namespace {

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

}  // namespace

void AgentClient::Impl::Abandon(uint32_t stream) {
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

void AgentClient::Impl::SendCancel(uint32_t target) { SendAndForget(msg::Cancel{target}); }

void AgentClient::Impl::SendAndForget(const msg::Request& request) {
  uint32_t stream = NewStream();
  const std::string name(msg::RequestName(request));
  auto pending = Register(stream, [name](const Frame& frame, const msg::Event* event) -> Verdict {
    // An error (signal_process: the process just ended) is an answer nobody waits for.
    if (event != nullptr &&
        (std::holds_alternative<msg::Done>(*event) || std::holds_alternative<msg::Error>(*event))) {
      return Done();
    }
    return {Verdict::kViolation, ProtocolError(Violation(Describe(frame, event) + " on " + name +
                                                         " stream " + std::to_string(frame.stream)))};
  });
  if (!pending.ok()) return;
  if (!Send(FrameType::kControl, stream, msg::EncodeRequest(request)).ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.erase(stream);
  }
}

Status AgentClient::Impl::Send(FrameType type, uint32_t stream, std::string_view payload) {
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

Status AgentClient::Impl::Wait(uint32_t stream, const std::shared_ptr<Pending>& pending,
                               WaitPolicy policy, bool* idle_passed) {
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

void AgentClient::Impl::ReadLoop() {
  std::string buf(kDataChunk + kHeaderSize, '\0');
  Status why;
  // Defence in depth: nothing below should throw (checked decoding), but an exception
  // (bad_alloc, a bug) must end this connection, never the host process.
  try {
    why = ReadFrames(buf);
  } catch (const std::exception& e) {
    why = ProtocolError(std::string("agent connection: internal error while reading: ") + e.what());
  } catch (...) {
    why = ProtocolError("agent connection: internal error while reading");
  }
  // The agent sees the connection end (and, as PID 1, the box with it).
  ::shutdown(fd_.get(), SHUT_RDWR);
  FailAll(why);
}

Status AgentClient::Impl::ReadFrames(std::string& buf) {
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

Status AgentClient::Impl::Dispatch(const Frame& frame) {
  std::optional<msg::Event> event;
  if (frame.type == FrameType::kControl) {
    auto decoded = msg::DecodeEventPayload(frame.payload);
    if (!decoded.ok()) {
      return ProtocolError(Violation("bad event on stream " + std::to_string(frame.stream) + ": " +
                                     decoded.status().message()));
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
      if (pending->on_finish) pending->on_finish(pending->result);
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

void AgentClient::Impl::FailAll(const Status& why) {
  CODEBOX_LOG(kInfo, "agent connection ended: " << why.ToString());
  std::lock_guard<std::mutex> lock(mu_);
  if (dead_.ok()) dead_ = why;  // a failed send may have said first why it ended
  for (auto& [stream, pending] : pending_) {
    pending->finished = true;
    pending->result = dead_;
    if (pending->on_finish) pending->on_finish(pending->result);
  }
  pending_.clear();
  cv_.notify_all();
}

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

}  // namespace

StatusOr<std::unique_ptr<AgentClient>> AgentClient::Connect(
    base::UniqueFd fd, std::chrono::milliseconds handshake_timeout,
    std::optional<msg::GuestSetup> guest) {
  if (!fd.valid()) return InvalidArgument("agent connection: invalid fd");
  Clock::time_point deadline = Clock::now() + handshake_timeout;
  // The reader thread blocks in read(); writes use MSG_DONTWAIT and poll.
  RETURN_IF_ERROR(base::SetNonBlocking(fd.get(), false).WithContext("agent connection"));
  msg::Hello hello;
  hello.protocol = kProtocolVersion;
  hello.client = "codebox/0.1.0";
  hello.guest = std::move(guest);
  if (hello.guest) {
    struct timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    hello.guest->time_unix_ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
  }
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

}  // namespace codebox::protocol
