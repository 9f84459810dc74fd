#include "agent/server.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <variant>
#include <vector>

#include "base/io.h"
#include "base/log.h"

namespace codebox::agent {

using protocol::FrameType;
using protocol::Json;

Server::Server(base::UniqueFd conn, bool is_init) : conn_(std::move(conn)), is_init_(is_init) {
  read_buf_.resize(protocol::kDataChunk);
}

Server::~Server() = default;

int Server::Run() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  // Blocked signals are delivered only through the signalfd, so the loop sees them in order
  // with everything else; exec children unblock them before exec.
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  signal_fd_.reset(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  ::signal(SIGPIPE, SIG_IGN);
  if (!signal_fd_.valid()) {
    Fatal(1, base::ErrnoStatus("signalfd"));
    return exit_code_;
  }
  if (Status st = base::SetNonBlocking(conn_.get(), true); !st.ok()) {
    Fatal(1, st.WithContext("connection"));
    return exit_code_;
  }
  SendHello();

  std::vector<pollfd> fds;
  std::vector<PollSlot> slots;
  while (!quit_) {
    fds.clear();
    slots.clear();
    fds.push_back({signal_fd_.get(), POLLIN, 0});
    slots.push_back({0, 1});
    short conn_events = POLLIN;
    if (out_sent_ < out_.size()) conn_events |= POLLOUT;
    fds.push_back({conn_.get(), conn_events, 0});
    slots.push_back({0, 0});
    const bool backed_up = OutputBackedUp();
    for (auto& [pid, exec] : execs_) {
      // A foreground exec's pipes wait while the host is behind; a background one's never.
      const bool read = !backed_up || !exec.stream;
      const auto key = static_cast<uint32_t>(pid);
      if (read && exec.out.valid()) {
        fds.push_back({exec.out.get(), POLLIN, 0});
        slots.push_back({key, 2});
      }
      if (read && exec.err.valid()) {
        fds.push_back({exec.err.get(), POLLIN, 0});
        slots.push_back({key, 3});
      }
      if (exec.in.valid() && !exec.stdin_pending.empty()) {
        fds.push_back({exec.in.get(), POLLOUT, 0});
        slots.push_back({key, 4});
      }
    }
    AddEgressPolls(fds, slots);
    int n = ::poll(fds.data(), fds.size(), PollTimeoutMs(Clock::now()));
    if (n < 0 && errno != EINTR) {
      Fatal(1, base::ErrnoStatus("poll"));
      break;
    }
    for (size_t i = 0; n > 0 && i < fds.size() && !quit_; ++i) {
      if (fds[i].revents == 0) continue;
      const PollSlot& slot = slots[i];
      if (slot.which == 1) {
        HandleSignals();
        continue;
      }
      if (slot.which == 0) {
        if (fds[i].revents & POLLOUT) {
          if (!Flush()) break;
        }
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) ReadConnection();
        continue;
      }
      if (slot.which == 5) {
        AcceptEgress();
        continue;
      }
      if (slot.which == 6) {
        PumpEgress(slot.stream, fds[i].revents);
        continue;
      }
      // The exec may have been finished by an earlier slot of this round.
      auto it = execs_.find(static_cast<pid_t>(slot.stream));
      if (it == execs_.end()) continue;
      Exec& exec = it->second;
      if (slot.which == 2) DrainPipe(exec, exec.out, FrameType::kStdout);
      if (slot.which == 3) DrainPipe(exec, exec.err, FrameType::kStderr);
      if (slot.which == 4) PumpStdin(exec);
    }
    if (quit_) break;
    Clock::time_point now = Clock::now();
    CheckDeadlines(now);
    FinishExecs(now);
    PumpAttachers();
    PumpDownloads();
    if (shutdown_stream_ && (!AnyRunning() || now >= shutdown_deadline_)) {
      SendEvent(*shutdown_stream_, protocol::msg::Done{});
      quit_ = true;
    }
    if (!Flush()) break;
  }
  KillEverything();
  CloseAllEgress();
  FlushBlocking(std::chrono::milliseconds(2000));
  return exit_code_;
}

int Server::PollTimeoutMs(Clock::time_point now) const {
  if (!downloads_.empty() && !OutputBackedUp()) return 0;
  std::optional<Clock::time_point> next;
  auto consider = [&next](Clock::time_point t) {
    if (!next || t < *next) next = t;
  };
  for (const auto& [pid, exec] : execs_) {
    if (!exec.exited && exec.deadline && !exec.timed_out) consider(*exec.deadline);
    if (exec.exited && exec.running()) consider(exec.exited_at + kDrainGrace);
  }
  if (shutdown_stream_) consider(shutdown_deadline_);
  if (!next) return -1;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
  return ms < 0 ? 0 : static_cast<int>(ms);
}

void Server::Send(FrameType type, uint32_t stream, std::string_view payload) {
  // Compact the already-sent prefix before it dominates the buffer.
  if (out_sent_ > 0 && out_sent_ * 2 >= out_.size()) {
    out_.erase(0, out_sent_);
    out_sent_ = 0;
  }
  protocol::AppendFrame(&out_, type, stream, payload);
}

void Server::SendEvent(uint32_t stream, const protocol::msg::Event& event) {
  Send(FrameType::kControl, stream, protocol::msg::EncodeEvent(event));
}

void Server::SendError(uint32_t stream, const Status& status) {
  // Bounded so that an error about a huge request still fits one frame.
  std::string message = status.message();
  if (message.size() > 4096) message = message.substr(0, 4096) + "...";
  SendEvent(stream, protocol::msg::Error{std::string(ErrorCodeName(status)), message});
}

bool Server::Flush() {
  while (out_sent_ < out_.size()) {
    ssize_t n = ::send(conn_.get(), out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL);
    // Not every transport is a socket (a virtio-serial port is a character device).
    if (n < 0 && errno == ENOTSOCK) {
      n = ::write(conn_.get(), out_.data() + out_sent_, out_.size() - out_sent_);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      CODEBOX_LOG(kWarn, "codebox-agent: write to host failed: " << std::strerror(errno));
      quit_ = true;
      exit_code_ = 1;
      out_.clear();
      out_sent_ = 0;
      return false;
    }
    out_sent_ += static_cast<size_t>(n);
  }
  out_.clear();
  out_sent_ = 0;
  return true;
}

void Server::FlushBlocking(std::chrono::milliseconds budget) {
  Clock::time_point end = Clock::now() + budget;
  while (out_sent_ < out_.size() && Clock::now() < end) {
    if (!Flush()) return;
    if (out_sent_ >= out_.size()) return;
    pollfd p{conn_.get(), POLLOUT, 0};
    ::poll(&p, 1, 50);
  }
}

void Server::Fatal(int exit_code, const Status& why) {
  // The agent's stderr is the box's console / the driver's log: say why the box is ending.
  std::string line = "codebox-agent: " + why.ToString() + "; closing the connection\n";
  (void)!::write(STDERR_FILENO, line.data(), line.size());
  SendError(0, why);
  exit_code_ = exit_code;
  quit_ = true;
}

void Server::ReadConnection() {
  for (int round = 0; round < 4 && !quit_; ++round) {
    ssize_t n = ::read(conn_.get(), read_buf_.data(), read_buf_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // A host that hangs up with frames of ours unread resets a unix socket: a hang-up too.
      if (errno != ECONNRESET) {
        Fatal(1, base::ErrnoStatus("read from host"));
        return;
      }
      n = 0;
    }
    if (n == 0) {
      Status end = decoder_.CheckEndOfStream();
      if (!end.ok()) {
        Fatal(2, end.WithContext("malformed stream from host"));
      } else {
        CODEBOX_LOG(kInfo, "codebox-agent: host closed the connection");
        quit_ = true;
      }
      return;
    }
    decoder_.Feed(std::string_view(read_buf_.data(), static_cast<size_t>(n)));
    while (!quit_) {
      auto next = decoder_.Next();
      if (!next.ok()) {
        Fatal(2, next.status().WithContext("malformed frame from host"));
        return;
      }
      if (!next->has_value()) break;
      HandleFrame(std::move(**next));
    }
  }
}

void Server::HandleFrame(protocol::Frame frame) {
  if (!hello_received_) {
    HandleHello(frame);
    return;
  }
  switch (frame.type) {
    case FrameType::kControl: {
      auto request = protocol::ParseControl(frame.payload);
      if (!request.ok()) {
        Fatal(2, request.status().WithContext("malformed control frame from host"));
        return;
      }
      HandleControl(frame.stream, *request);
      return;
    }
    case FrameType::kStdin:
      HandleStdin(frame.stream, frame.payload);
      return;
    case FrameType::kData:
      HandleData(frame.stream, frame.payload);
      return;
    default:
      Fatal(2, ProtocolError("unexpected " + std::string(protocol::FrameTypeName(frame.type)) +
                             " frame from host on stream " + std::to_string(frame.stream)));
  }
}

void Server::SendHello() {
  protocol::msg::Hello hello;
  hello.protocol = protocol::kProtocolVersion;
  hello.agent = "codebox-agent/0.1.0";
  hello.pid = ::getpid();
  Send(FrameType::kHello, 0, protocol::msg::EncodeHello(hello));
}

void Server::HandleHello(const protocol::Frame& frame) {
  if (frame.type != FrameType::kHello) {
    Fatal(2, ProtocolError("expected a hello frame first, got " +
                           std::string(protocol::FrameTypeName(frame.type))));
    return;
  }
  auto hello = protocol::ParseControl(frame.payload);
  if (!hello.ok()) {
    Fatal(2, hello.status().WithContext("malformed hello from host"));
    return;
  }
  auto decoded = protocol::msg::DecodeHello(*hello);
  if (!decoded.ok() || decoded->protocol != protocol::kProtocolVersion) {
    Fatal(2, ProtocolError("host speaks protocol " +
                           (decoded.ok() ? std::to_string(decoded->protocol) : std::string("?")) +
                           ", this agent speaks " + std::to_string(protocol::kProtocolVersion)));
    return;
  }
  if (decoded->guest && guest_setup_) {
    // A clone that could not be made unique must not run anything: the host gets the error.
    if (Status st = guest_setup_(*decoded->guest); !st.ok()) {
      Fatal(1, st.WithContext("guest setup"));
      return;
    }
    // A vm box restored from a template: its first hello went to the host that made the
    // template, so this host has not seen one.
    if (decoded->guest->resend_hello) SendHello();
  }
  hello_received_ = true;
}

void Server::HandleControl(uint32_t stream, const Json& request) {
  auto op = protocol::GetString(request, "op");
  if (!op.ok()) {
    SendError(stream, InvalidArgument("request without a string \"op\""));
    return;
  }
  if (stream == 0) {
    SendError(0, InvalidArgument("request \"" + *op + "\" on stream 0; use a new stream id"));
    return;
  }
  // An ack is the one request sent on an open stream (its egress stream) rather than a new one.
  if (*op == "ack") return HandleEgressAck(stream, request);
  if (streams_.count(stream) || uploads_.count(stream) || downloads_.count(stream) ||
      egress_.count(stream)) {
    SendError(stream, InvalidArgument("stream " + std::to_string(stream) + " is already in use"));
    return;
  }
  auto decoded = protocol::msg::DecodeRequest(request);
  if (!decoded.ok()) {
    Status bad = InvalidArgument(decoded.status().message());
    if (*op == "write_file") {
      // The host is already sending the data: the error is sent when it ends.
      uploads_[stream].error = bad;
      return;
    }
    return SendError(stream, bad);
  }
  namespace m = protocol::msg;
  if (auto* exec = std::get_if<m::Exec>(&*decoded)) return StartExec(stream, *exec);
  if (auto* write = std::get_if<m::WriteFile>(&*decoded)) return StartWrite(stream, *write);
  if (auto* read = std::get_if<m::ReadFile>(&*decoded)) return StartRead(stream, *read);
  if (auto* kill = std::get_if<m::Kill>(&*decoded)) return HandleKill(stream, *kill);
  if (auto* resize = std::get_if<m::Resize>(&*decoded)) return HandleResize(stream, *resize);
  if (std::holds_alternative<m::Shutdown>(*decoded)) return HandleShutdown(stream);
  if (std::holds_alternative<m::AwaitHello>(*decoded)) return HandleAwaitHello(stream);
  if (auto* cancel = std::get_if<m::Cancel>(&*decoded)) return HandleCancel(stream, *cancel);
  if (auto* list = std::get_if<m::ListDir>(&*decoded)) return SendListing(stream, list->path);
  if (std::holds_alternative<m::EgressAccept>(*decoded)) return StartEgress(stream);
  if (auto* attach = std::get_if<m::Attach>(&*decoded)) return HandleAttach(stream, *attach);
  if (std::holds_alternative<m::ListProcesses>(*decoded)) return SendProcessList(stream);
  if (auto* signal = std::get_if<m::SignalProcess>(&*decoded)) {
    return HandleSignalProcess(stream, *signal);
  }
  if (auto* mkdir = std::get_if<m::MakeDir>(&*decoded)) {
    Status st = agent::MakeDir(mkdir->path, mkdir->mode, mkdir->parents, mkdir->owner);
    if (st.ok() && mkdir->owner) {
      st = agent::ChownDir(mkdir->path, mkdir->owner->uid, mkdir->owner->gid);
    }
    return st.ok() ? SendEvent(stream, m::Done{}) : SendError(stream, st);
  }
  if (auto* remove = std::get_if<m::Remove>(&*decoded)) {
    Status st = agent::Remove(remove->path);
    return st.ok() ? SendEvent(stream, m::Done{}) : SendError(stream, st);
  }
  SendError(stream, InvalidArgument("unknown op \"" + *op + "\""));
}

void Server::SendListing(uint32_t stream, const std::string& path) {
  auto listing = agent::ListDir(path);
  if (!listing.ok()) return SendError(stream, listing.status());
  // Back through the codec: what goes out is exactly what the host will accept.
  auto event = protocol::msg::DecodeEvent(*listing);
  if (!event.ok() || !std::holds_alternative<protocol::msg::Entries>(*event)) {
    return SendError(stream, Internal("list_dir " + path + ": " + event.status().message()));
  }
  // Pages well under the frame limit, so a directory of any size can be listed.
  for (const std::string& page : protocol::msg::EncodeEntriesPages(
           std::get<protocol::msg::Entries>(*event).entries, protocol::kDataChunk)) {
    Send(FrameType::kControl, stream, page);
  }
}

void Server::StartWrite(uint32_t stream, const protocol::msg::WriteFile& request) {
  Upload& upload = uploads_[stream];
  auto writer = FileWriter::Open(request.path, request.mode, request.parents, request.owner);
  if (!writer.ok()) {
    upload.error = writer.status();
    return;  // the error is sent when the data ends, as the host is already sending it
  }
  upload.writer.emplace(std::move(*writer));
}

void Server::HandleData(uint32_t stream, std::string_view payload) {
  if (HandleEgressData(stream, payload)) return;
  auto it = uploads_.find(stream);
  if (it == uploads_.end()) return;  // a write_file that already failed and was answered
  Upload& upload = it->second;
  if (!payload.empty()) {
    if (upload.error.ok()) {
      upload.error = upload.writer->Write(payload);
      if (!upload.error.ok()) upload.writer.reset();  // removes the temp file
    }
    return;
  }
  Status st = upload.error.ok() ? upload.writer->Finish() : upload.error;
  uploads_.erase(it);
  st.ok() ? SendEvent(stream, protocol::msg::Done{}) : SendError(stream, st);
}

void Server::StartRead(uint32_t stream, const protocol::msg::ReadFile& request) {
  auto file = OpenForRead(request.path);
  if (!file.ok()) return SendError(stream, file.status());
  SendEvent(stream, protocol::msg::File{file->size, file->mode});
  downloads_.emplace(stream, std::move(file->fd));
}

void Server::PumpDownloads() {
  for (auto it = downloads_.begin(); it != downloads_.end() && !OutputBackedUp();) {
    ssize_t n = ::read(it->second.get(), read_buf_.data(), read_buf_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) {
      Send(FrameType::kData, it->first, std::string_view(read_buf_.data(), static_cast<size_t>(n)));
      ++it;
      continue;
    }
    if (n == 0) {
      Send(FrameType::kData, it->first, {});
    } else {
      SendError(it->first, base::ErrnoStatus("read_file: read"));
    }
    it = downloads_.erase(it);
  }
}

void Server::HandleAwaitHello(uint32_t stream) {
  // Only a vm guest is saved as a template, and only with nothing running: a clone must not
  // find a process of the template's host (nor its streams).
  if (!guest_setup_) {
    return SendError(stream, InvalidArgument("await_hello: only a vm box's agent is a template"));
  }
  if (AnyRunning() || !streams_.empty() || !uploads_.empty() || !downloads_.empty() ||
      !egress_.empty()) {
    return SendError(stream, InvalidArgument("await_hello: requests are still running"));
  }
  execs_.clear();  // no clone lists the warm-up's processes
  // Nothing of the warm-up may live on in every clone: a process it left behind (a daemon of the
  // image's python3) is ended and reaped before the template is saved.
  KillEverything();
  for (auto deadline = Clock::now() + std::chrono::seconds(1); Clock::now() < deadline;) {
    pid_t pid = ::waitpid(-1, nullptr, WNOHANG);
    if (pid < 0) break;  // ECHILD: none left
    if (pid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  SendEvent(stream, protocol::msg::Done{});
  hello_received_ = false;
}

void Server::HandleShutdown(uint32_t stream) {
  shutdown_stream_ = stream;
  shutdown_deadline_ = Clock::now() + std::chrono::seconds(1);
  KillEverything();
}

}  // namespace codebox::agent
