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
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/io.h"
#include "base/log.h"
#include "protocol/frame.h"
#include "protocol/message.h"

namespace codebox::protocol {

using Clock = std::chrono::steady_clock;

// list_dir and mkdir answer at once from a live agent; past this it is not answering.
constexpr auto kSmallRequestDeadline = std::chrono::seconds(30);

namespace {

// The protocol's error "code" back to a StatusCode; unknown codes stay errors of the box.
Status StatusFromErrorEvent(const Json& event) {
  std::string code = event.value("code", "io_error");
  std::string message = event.value("message", "agent reported an error without a message");
  if (code == "not_found") return NotFound(message);
  if (code == "invalid_argument") return InvalidArgument(message);
  if (code == "permission_denied") return PermissionDenied(message);
  if (code == "protocol_error") return ProtocolError(message);
  return IoError(message);
}

// sendmsg()/send() with MSG_NOSIGNAL so a dead agent is an error, not a SIGPIPE in the
// user's process; writev() for transports that are not sockets. `parts` are sent in order
// without first being copied into one buffer (file data moves at hundreds of MB/s).
Status SendAll(int fd, std::string_view first, std::string_view second = {}) {
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
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = ::writev(fd, &iov[index], 2 - index);
    if (n < 0) {
      if (errno == EINTR) continue;
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

// Called on the reader thread for each frame of a request: the frame, and for control
// frames the parsed event. Returns true on the request's terminal frame.
using FrameHandler = std::function<bool(const Frame&, const Json&)>;

// One request in flight; `result` and `terminal` are final once `finished` is set.
struct Pending {
  FrameHandler on_frame;
  bool finished = false;
  Status result;
  Json terminal;
};

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

  uint32_t NewStream() { return next_stream_.fetch_add(2); }

  // Registers a request before its first frame goes out, so no answer can be missed.
  StatusOr<std::shared_ptr<Pending>> Register(uint32_t stream, FrameHandler on_frame) {
    auto pending = std::make_shared<Pending>();
    pending->on_frame = std::move(on_frame);
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return dead_;
    pending_[stream] = pending;
    return pending;
  }

  void Unregister(uint32_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.erase(stream);
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
    return SendAll(fd_.get(), header, payload);
  }

  // Sends `request` on a new stream, then whatever after_request sends (stdin, file data),
  // and waits for the terminal event.
  StatusOr<Json> Call(const Json& request, FrameHandler on_frame,
                      std::optional<Clock::time_point> deadline,
                      const std::function<Status(uint32_t)>& after_request);

  Status SendControl(uint32_t stream, const Json& message) {
    return Send(FrameType::kControl, stream, DumpControl(message));
  }

  // Waits for the terminal event; nullopt deadline waits as long as the connection lives.
  StatusOr<Json> Wait(uint32_t stream, const std::shared_ptr<Pending>& pending,
                      std::optional<Clock::time_point> deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    auto done = [&] { return pending->finished; };
    if (deadline) {
      if (!cv_.wait_until(lock, *deadline, done)) {
        pending_.erase(stream);
        return DeadlineExceeded("agent did not answer request on stream " + std::to_string(stream) +
                                " in time");
      }
    } else {
      cv_.wait(lock, done);
    }
    if (!pending->result.ok()) return pending->result;
    return pending->terminal;
  }

 private:
  void ReadLoop() {
    std::string buf(kDataChunk + kHeaderSize, '\0');
    Status why;
    for (;;) {
      // Frames already buffered (from the handshake) first.
      auto next = decoder_.Next();
      if (!next.ok()) {
        why = ProtocolError("agent sent a malformed frame: " + next.status().message());
        break;
      }
      if (next->has_value()) {
        if (Status st = Dispatch(**next); !st.ok()) {
          why = st;
          break;
        }
        continue;
      }
      ssize_t n = ::read(fd_.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        why = BoxCrashed(std::string("agent connection closed: read: ") + std::strerror(errno));
        break;
      }
      if (n == 0) {
        Status end = decoder_.CheckEndOfStream();
        why = end.ok() ? BoxCrashed("agent connection closed: end of stream")
                       : ProtocolError("agent connection closed: " + end.message());
        break;
      }
      decoder_.Feed(std::string_view(buf.data(), static_cast<size_t>(n)));
    }
    FailAll(why);
  }

  Status Dispatch(Frame& frame) {
    if (frame.stream == 0) {
      // Stream 0 after the handshake carries only the agent's fatal errors.
      auto event = ParseControl(frame.payload);
      if (!event.ok()) return ProtocolError("agent sent a malformed control frame on stream 0");
      Status st = StatusFromErrorEvent(*event);
      if (st.code() == StatusCode::kProtocolError) return ProtocolError("agent closed the connection: " + st.message());
      return BoxCrashed("agent closed the connection: " + st.message());
    }
    std::shared_ptr<Pending> pending;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(frame.stream);
      if (it == pending_.end()) return Status::Ok();  // a request given up on (deadline)
      pending = it->second;
    }
    Status result;
    Json terminal;
    bool finished = false;
    if (frame.type == FrameType::kControl) {
      auto event = ParseControl(frame.payload);
      if (!event.ok()) return ProtocolError("agent sent a malformed control frame: " + event.status().message());
      terminal = std::move(*event);
      if (terminal.value("event", "") == "error") {
        finished = true;
        result = StatusFromErrorEvent(terminal);
      }
    }
    // Callbacks (user code) run without the lock so they may take their time.
    if (!finished) finished = pending->on_frame(frame, terminal);
    if (finished) {
      std::lock_guard<std::mutex> lock(mu_);
      pending->finished = true;
      pending->result = result;
      pending->terminal = std::move(terminal);
      pending_.erase(frame.stream);
      cv_.notify_all();
    }
    return Status::Ok();
  }

  void FailAll(const Status& why) {
    CODEBOX_LOG(kInfo, "agent connection ended: " << why.ToString());
    std::lock_guard<std::mutex> lock(mu_);
    dead_ = why;
    for (auto& [stream, pending] : pending_) {
      pending->finished = true;
      pending->result = why;
    }
    pending_.clear();
    cv_.notify_all();
  }

  base::UniqueFd fd_;
  FrameDecoder decoder_;
  std::mutex write_mu_;
  std::mutex mu_;  // guards pending_, dead_ and every Pending's result fields
  std::condition_variable cv_;
  std::map<uint32_t, std::shared_ptr<Pending>> pending_;
  Status dead_;
  std::atomic<uint32_t> next_stream_{1};
  std::thread reader_;
};

AgentClient::AgentClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AgentClient::~AgentClient() = default;

Status AgentClient::connection_status() const { return impl_->connection_status(); }

namespace {

// Reads the agent's hello within the deadline; frames after it stay in the decoder.
Status ReadHello(int fd, FrameDecoder* decoder, Clock::time_point deadline) {
  char buf[4096];
  for (;;) {
    auto next = decoder->Next();
    if (!next.ok()) return ProtocolError("agent hello: " + next.status().message());
    if (next->has_value()) {
      const Frame& frame = **next;
      auto hello = ParseControl(frame.payload);
      if (!hello.ok()) return ProtocolError("agent hello: " + hello.status().message());
      if (frame.type == FrameType::kControl && hello->value("event", "") == "error") {
        return StatusFromErrorEvent(*hello).WithContext("agent refused the connection");
      }
      if (frame.type != FrameType::kHello) {
        return ProtocolError("agent sent a " + std::string(FrameTypeName(frame.type)) +
                             " frame before its hello");
      }
      auto version = GetInt(*hello, "protocol");
      if (!version.ok()) return ProtocolError("agent hello: " + version.status().message());
      if (*version != kProtocolVersion) {
        return ProtocolError("agent speaks protocol " + std::to_string(*version) + ", this host " +
                             std::to_string(kProtocolVersion));
      }
      return Status::Ok();
    }
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return StartFailed("agent did not send its hello in time");
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno != EINTR) return base::ErrnoStatus("poll agent connection");
    if (ready <= 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return BoxCrashed(std::string("agent connection closed: read: ") + std::strerror(errno));
    if (n == 0) return BoxCrashed("agent connection closed before its hello");
    decoder->Feed(std::string_view(buf, static_cast<size_t>(n)));
  }
}

bool IsEvent(const Frame& frame, const Json& event, const char* name) {
  return frame.type == FrameType::kControl && event.value("event", "") == name;
}

}  // namespace

StatusOr<std::unique_ptr<AgentClient>> AgentClient::Connect(base::UniqueFd fd,
                                                            std::chrono::milliseconds handshake_timeout) {
  if (!fd.valid()) return InvalidArgument("agent connection: invalid fd");
  Clock::time_point deadline = Clock::now() + handshake_timeout;
  // The reader thread blocks in read(); writes block too, under the write mutex.
  RETURN_IF_ERROR(base::SetNonBlocking(fd.get(), false).WithContext("agent connection"));
  RETURN_IF_ERROR(SendAll(fd.get(), EncodeFrame(FrameType::kHello, 0,
                                                DumpControl(Json{{"protocol", kProtocolVersion},
                                                                 {"client", "codebox/0.1.0"}})))
                      .WithContext("agent hello"));
  FrameDecoder decoder;
  RETURN_IF_ERROR(ReadHello(fd.get(), &decoder, deadline));
  return std::unique_ptr<AgentClient>(
      new AgentClient(std::make_unique<Impl>(std::move(fd), std::move(decoder))));
}

StatusOr<Json> AgentClient::Impl::Call(const Json& request, FrameHandler on_frame,
                                       std::optional<Clock::time_point> deadline,
                                       const std::function<Status(uint32_t)>& after_request) {
  uint32_t stream = NewStream();
  ASSIGN_OR_RETURN(auto pending, Register(stream, std::move(on_frame)));
  Status sent = SendControl(stream, request);
  if (sent.ok() && after_request) sent = after_request(stream);
  if (!sent.ok()) {
    Unregister(stream);
    return sent;
  }
  return Wait(stream, pending, deadline);
}

StatusOr<ExecResult> AgentClient::Exec(const ExecRequest& request) {
  if (request.argv.empty()) return InvalidArgument("exec: empty argv");
  Json message{{"op", "exec"},
               {"argv", request.argv},
               {"env", request.env},
               {"cwd", request.cwd},
               {"stdin", request.stdin_data ? "stream" : "none"},
               {"timeout_ms", request.timeout.count()},
               {"output_limit", request.output_limit}};
  // Filled on the reader thread; read here only after Wait() saw the request finish.
  auto result = std::make_shared<ExecResult>();
  auto on_frame = [result, &request](const Frame& frame, const Json& event) {
    if (frame.type == FrameType::kStdout) {
      result->stdout_data.append(frame.payload);
      if (request.on_stdout) request.on_stdout(frame.payload);
    } else if (frame.type == FrameType::kStderr) {
      result->stderr_data.append(frame.payload);
      if (request.on_stderr) request.on_stderr(frame.payload);
    }
    return IsEvent(frame, event, "exit");
  };
  auto send_stdin = [this, &request](uint32_t stream) -> Status {
    if (!request.stdin_data) return Status::Ok();
    std::string_view data = *request.stdin_data;
    for (size_t off = 0; off < data.size(); off += kDataChunk) {
      RETURN_IF_ERROR(impl_->Send(FrameType::kStdin, stream, data.substr(off, kDataChunk)));
    }
    return impl_->Send(FrameType::kStdin, stream, {});
  };
  // The agent enforces the timeout; this deadline only guards against an agent that stopped
  // answering altogether.
  std::optional<Clock::time_point> deadline;
  if (request.timeout.count() > 0) deadline = Clock::now() + request.timeout + std::chrono::seconds(5);
  auto exit = impl_->Call(message, on_frame, deadline, send_stdin);
  if (!exit.ok()) return exit.status().WithContext("exec " + request.argv[0]);
  const Json& e = *exit;
  result->exit_code = e.value("exit_code", -1);
  result->signal = e.value("signal", 0);
  result->timed_out = e.value("timed_out", false);
  result->output_truncated = e.value("output_truncated", false);
  result->out_of_memory = e.value("out_of_memory", false);
  result->duration = std::chrono::milliseconds(e.value("duration_ms", int64_t{0}));
  return std::move(*result);
}

Status AgentClient::WriteFile(const std::string& box_path, std::string_view data, uint32_t mode) {
  auto send_data = [this, data](uint32_t stream) -> Status {
    for (size_t off = 0; off < data.size(); off += kDataChunk) {
      RETURN_IF_ERROR(impl_->Send(FrameType::kData, stream, data.substr(off, kDataChunk)));
    }
    return impl_->Send(FrameType::kData, stream, {});
  };
  return impl_->Call(Json{{"op", "write_file"}, {"path", box_path}, {"mode", mode}, {"parents", true}},
                     [](const Frame& f, const Json& e) { return IsEvent(f, e, "done"); }, {}, send_data)
      .status()
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
      RETURN_IF_ERROR(impl_->Send(FrameType::kData, stream, std::string_view(chunk.data(), static_cast<size_t>(n))));
      if (n == 0) return Status::Ok();
    }
  };
  return impl_->Call(Json{{"op", "write_file"}, {"path", box_path}, {"mode", st.st_mode & 07777}, {"parents", true}},
                     [](const Frame& f, const Json& e) { return IsEvent(f, e, "done"); }, {}, send_data)
      .status()
      .WithContext("copy " + host_path + " to box " + box_path);
}

StatusOr<std::string> AgentClient::ReadFile(const std::string& box_path) {
  auto data = std::make_shared<std::string>();
  auto on_frame = [data](const Frame& frame, const Json& event) {
    if (IsEvent(frame, event, "file")) data->reserve(event.value("size", size_t{0}));
    if (frame.type != FrameType::kData) return false;
    data->append(frame.payload);
    return frame.payload.empty();
  };
  auto done = impl_->Call(Json{{"op", "read_file"}, {"path", box_path}}, on_frame, {}, nullptr);
  if (!done.ok()) return done.status().WithContext("read " + box_path);
  return std::move(*data);
}

// A minimal version (placeholder until the protocol branch lands, which adds an idle deadline).
Status AgentClient::ReadFileStream(const std::string& box_path, uint64_t max_bytes,
                                   const std::function<Status(uint64_t size, uint32_t mode)>& on_header,
                                   const std::function<Status(std::string_view chunk)>& on_chunk) {
  // Written on the reader thread; read here after Wait().
  struct State {
    Status error;
    bool header = false;
    uint64_t received = 0;
  };
  auto state = std::make_shared<State>();
  auto on_frame = [state, max_bytes, &box_path, &on_header, &on_chunk](const Frame& frame,
                                                                      const Json& event) {
    if (IsEvent(frame, event, "file") && !state->header) {
      state->header = true;
      auto size = event.find("size");
      auto mode = event.find("mode");
      if (size == event.end() || !size->is_number_unsigned() || mode == event.end() ||
          !mode->is_number_unsigned() || mode->get<uint64_t>() > 07777) {
        state->error = ProtocolError("read " + box_path + ": malformed file header");
        return true;
      }
      if (size->get<uint64_t>() > max_bytes) {
        state->error = LimitExceeded("read " + box_path + ": the box claims " +
                                     std::to_string(size->get<uint64_t>()) +
                                     " bytes, over the limit of " +
                                     std::to_string(max_bytes));
        return true;
      }
      state->error = on_header(size->get<uint64_t>(), mode->get<uint32_t>());
      return !state->error.ok();
    }
    if (frame.type != FrameType::kData) return false;
    if (!state->header) {
      state->error = ProtocolError("read " + box_path + ": data before the file header");
      return true;
    }
    if (frame.payload.empty()) return true;
    if (frame.payload.size() > max_bytes - state->received) {
      state->error = LimitExceeded("read " + box_path + ": the box sent more than " +
                                   std::to_string(max_bytes) + " bytes");
      return true;
    }
    state->received += frame.payload.size();
    state->error = on_chunk(frame.payload);
    return !state->error.ok();
  };
  Status st = impl_->Call(Json{{"op", "read_file"}, {"path", box_path}}, on_frame, {}, nullptr).status();
  if (st.ok()) st = state->error;
  return st;
}

StatusOr<std::vector<DirEntry>> AgentClient::ListDir(const std::string& box_path) {
  auto event = impl_->Call(Json{{"op", "list_dir"}, {"path", box_path}},
                           [](const Frame& f, const Json& e) { return IsEvent(f, e, "entries"); },
                           Clock::now() + kSmallRequestDeadline, nullptr);
  if (!event.ok()) return event.status().WithContext("list " + box_path);
  std::vector<DirEntry> entries;
  auto list = event->find("entries");
  if (list == event->end() || !list->is_array()) return ProtocolError("list " + box_path + ": no entries in answer");
  for (const Json& j : *list) {
    if (!j.is_object()) return ProtocolError("list " + box_path + ": malformed entry");
    entries.push_back(DirEntry{j.value("name", ""), j.value("type", "other"), j.value("size", uint64_t{0}),
                               j.value("mode", 0u)});
  }
  return entries;
}

Status AgentClient::MakeDir(const std::string& box_path, uint32_t mode) {
  return impl_->Call(Json{{"op", "mkdir"}, {"path", box_path}, {"mode", mode}, {"parents", true}},
                     [](const Frame& f, const Json& e) { return IsEvent(f, e, "done"); },
                     Clock::now() + kSmallRequestDeadline, nullptr)
      .status()
      .WithContext("mkdir " + box_path);
}

Status AgentClient::Shutdown(std::chrono::milliseconds wait) {
  return impl_->Call(Json{{"op", "shutdown"}}, [](const Frame& f, const Json& e) { return IsEvent(f, e, "done"); },
                     Clock::now() + wait, nullptr)
      .status()
      .WithContext("shutdown");
}

}  // namespace codebox::protocol
