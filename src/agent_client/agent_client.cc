#include "agent_client/agent_client.h"

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

#include "agent_client/agent_connection.h"
#include "base/deadline.h"
#include "base/io.h"
#include "base/log.h"
#include "protocol/frame.h"
#include "protocol/message.h"
#include "protocol/messages.h"

namespace codebox::protocol {

AgentClient::AgentClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AgentClient::~AgentClient() = default;

Status AgentClient::connection_status() const { return impl_->connection_status(); }

void AgentClient::set_idle_timeout(std::chrono::milliseconds idle) { impl_->set_idle(idle); }

// Filled on the reader thread; read by the caller only after the request finished (or was
// abandoned, which waits for the handler to be out).
struct RunningExec::State {
  uint64_t limit = 0;
  bool tty = false;  // the agent may send stdout only; set before the stream opens, never changed
  bool attach = false;          // an attach stream: `done` means detached; set before it opens
  std::atomic<int32_t> pid{0};  // from `started` (exec) or the request (attach)
  bool output_seen = false;     // a frame after which `started` may no longer come
  bool keep_output = true;
  std::function<void(std::string_view)> on_stdout, on_stderr;
  ExecResult result;
  uint64_t sent_out = 0, sent_err = 0;  // bytes given to each stream (kept or called back)
  bool host_truncated = false;
};

namespace {

// The agent refuses ids past kMaxId too; this says so before anything is sent.
Status CheckUser(const std::optional<msg::User>& user, const char* what) {
  if (!user) return Status::Ok();
  for (uint32_t id : {user->uid, user->gid}) {
    if (id > msg::kMaxId) {
      return InvalidArgument(std::string(what) + ": id " + std::to_string(id) +
                             " is the kernel's \"unchanged\", not an id one can run as");
    }
  }
  return Status::Ok();
}

// The agent refuses sizes out of range too; this says so before anything is sent.
Status CheckTerminalSize(msg::TerminalSize size, const char* what) {
  if (size.rows < 1 || size.rows > msg::kMaxTerminalSide || size.cols < 1 ||
      size.cols > msg::kMaxTerminalSide) {
    return InvalidArgument(std::string(what) + ": a terminal of " + std::to_string(size.rows) +
                           " rows and " + std::to_string(size.cols) + " columns; each must be 1.." +
                           std::to_string(msg::kMaxTerminalSide));
  }
  return Status::Ok();
}

Status CheckExecRequest(const msg::Exec& request) {
  if (request.argv.empty()) return InvalidArgument("exec: empty argv");
  if (request.tty) RETURN_IF_ERROR(CheckTerminalSize(*request.tty, "exec: tty"));
  RETURN_IF_ERROR(CheckUser(request.user, "exec: user"));
  for (size_t i = 0; i < request.argv.size(); ++i) {
    // execve would cut the string at the NUL, silently dropping the rest.
    if (request.argv[i].find('\0') != std::string::npos) {
      return InvalidArgument("exec: argv[" + std::to_string(i) + "] contains a NUL byte");
    }
  }
  if (request.cwd.find('\0') != std::string::npos) {
    return InvalidArgument("exec: the working directory contains a NUL byte");
  }
  if (request.timeout.count() <= 0) {
    return InvalidArgument("exec: a timeout of " + std::to_string(request.timeout.count()) +
                           " ms (at least 1 ms, or kNoTimeout for none)");
  }
  for (const auto& [name, value] : request.env) {
    if (name.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
      return InvalidArgument("exec: environment variable contains a NUL byte");
    }
  }
  return Status::Ok();
}

FrameHandler ExecHandler(std::shared_ptr<RunningExec::State> state) {
  return [state](const Frame& frame, const msg::Event* event) -> Verdict {
    if (event != nullptr && std::holds_alternative<msg::Started>(*event)) {
      // Once, first, and only on the exec's own stream.
      if (state->attach || state->output_seen || state->pid.load() != 0) {
        return Unexpected(frame, event, "exec");
      }
      state->pid = std::get<msg::Started>(*event).pid;
      return Continue();
    }
    state->output_seen = true;
    if (event != nullptr && state->attach && std::holds_alternative<msg::Done>(*event)) {
      return Done(FailedPrecondition("detached from process " + std::to_string(state->pid)));
    }
    if (frame.type == FrameType::kStderr && state->tty) {
      // A terminal has one output stream: the agent made this up.
      return {Verdict::kViolation, ProtocolError(Violation("stderr on tty exec stream " +
                                                           std::to_string(frame.stream)))};
    }
    if (frame.type == FrameType::kStdout || frame.type == FrameType::kStderr) {
      const bool out = frame.type == FrameType::kStdout;
      uint64_t& sent = out ? state->sent_out : state->sent_err;
      // The host's own count: whatever the agent claims, at most `limit` bytes per stream.
      uint64_t room = state->limit - std::min<uint64_t>(sent, state->limit);
      size_t keep = static_cast<size_t>(std::min<uint64_t>(room, frame.payload.size()));
      if (keep < frame.payload.size()) state->host_truncated = true;
      if (keep == 0) return Continue();
      std::string_view piece(frame.payload.data(), keep);
      sent += keep;
      if (state->keep_output) {
        (out ? state->result.stdout_data : state->result.stderr_data).append(piece);
      }
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
      r.dropped_stdout = e.dropped_stdout;
      r.dropped_stderr = e.dropped_stderr;
      return Done();
    }
    return Unexpected(frame, event, "exec");
  };
}

// The exec message of `request` (checked by CheckExecRequest): stdin is a stream when there
// is stdin data or it stays open; the limits are held to what the protocol carries.
msg::Exec ExecMessage(const ExecRequest& request) {
  msg::Exec exec = request.exec;
  exec.stdin_stream = request.stdin_data.has_value() || request.exec.stdin_stream;
  exec.output_limit = std::min<uint64_t>(exec.output_limit, std::numeric_limits<int64_t>::max());
  exec.ring_bytes = std::min(exec.ring_bytes, msg::kMaxRingBytes);
  return exec;
}

}  // namespace

StatusOr<ExecResult> AgentClient::Exec(const ExecRequest& request) {
  ASSIGN_OR_RETURN(std::unique_ptr<RunningExec> running, StartExec(request));
  return running->Wait();
}

StatusOr<std::unique_ptr<RunningExec>> AgentClient::StartExec(const ExecRequest& request) {
  RETURN_IF_ERROR(CheckExecRequest(request.exec));
  if (request.exec.background) {
    return InvalidArgument("exec: a background process is started with StartBackground");
  }
  msg::Exec exec = ExecMessage(request);
  std::string what = "exec " + request.exec.argv[0].substr(0, 256);
  // Encoded once: measured here, sent below.
  const std::string encoded = msg::EncodeRequest(exec);
  if (encoded.size() > kMaxPayload) {
    return InvalidArgument(what + ": exec request is " + std::to_string(encoded.size()) +
                           " bytes encoded; argv and environment may take at most " +
                           std::to_string(kMaxPayload) + " bytes in all (JSON-encoded)");
  }

  auto state = std::make_shared<RunningExec::State>();
  state->limit = exec.output_limit;
  state->keep_output = request.keep_output;
  state->tty = exec.tty.has_value();
  state->on_stdout = request.on_stdout;
  state->on_stderr = request.on_stderr;
  uint32_t stream = impl_->NewStream();
  auto pending = impl_->Register(stream, ExecHandler(state));
  if (!pending.ok()) return pending.status().WithContext(what);
  // From here the handle owns the stream: a failure below abandons it in its destructor.
  std::unique_ptr<RunningExec> running(
      new RunningExec(impl_.get(), stream, what, exec.timeout, state, *pending));
  Status st = impl_->Send(FrameType::kControl, stream, encoded);
  if (st.ok() && request.stdin_data) st = running->WriteStdin(*request.stdin_data);
  if (st.ok() && request.stdin_data && !request.exec.stdin_stream) st = running->CloseStdin();
  if (!st.ok()) return st.WithContext(what);
  return running;
}

StatusOr<int32_t> AgentClient::StartBackground(const ExecRequest& request) {
  RETURN_IF_ERROR(CheckExecRequest(request.exec));
  const std::string what = "start " + request.exec.argv[0].substr(0, 256);
  if (request.stdin_data)
    return InvalidArgument(what + ": a background process takes no stdin data");
  msg::Exec exec = ExecMessage(request);
  exec.background = true;
  if (msg::EncodeRequest(exec).size() > kMaxPayload) {
    return InvalidArgument(what + ": argv and environment take more than " +
                           std::to_string(kMaxPayload) + " bytes (JSON-encoded)");
  }
  int32_t pid = 0;
  auto on_frame = [&pid](const Frame& frame, const msg::Event* event) -> Verdict {
    if (event != nullptr && std::holds_alternative<msg::Started>(*event)) {
      pid = std::get<msg::Started>(*event).pid;
      return Done();
    }
    return Unexpected(frame, event, "background exec");
  };
  RETURN_IF_ERROR(impl_->Call(exec, on_frame, IdleWait(impl_->idle()), nullptr).WithContext(what));
  return pid;
}

StatusOr<std::unique_ptr<RunningExec>> AgentClient::Attach(const AttachRequest& request) {
  const std::string what = "attach to process " + std::to_string(request.pid);
  if (request.pid <= 0) return InvalidArgument(what + ": no such pid");
  auto state = std::make_shared<RunningExec::State>();
  state->limit = request.output_limit;
  state->keep_output = request.keep_output;
  state->attach = true;
  state->pid = request.pid;
  state->on_stdout = request.on_stdout;
  state->on_stderr = request.on_stderr;
  uint32_t stream = impl_->NewStream();
  auto pending = impl_->Register(stream, ExecHandler(state));
  if (!pending.ok()) return pending.status().WithContext(what);
  std::unique_ptr<RunningExec> running(
      new RunningExec(impl_.get(), stream, what, kNoTimeout, state, *pending));
  Status st = impl_->Send(FrameType::kControl, stream,
                          msg::EncodeRequest(msg::Attach{request.pid, request.output}));
  if (!st.ok()) return st.WithContext(what);
  return running;
}

StatusOr<std::vector<msg::ProcessEntry>> AgentClient::ListProcesses() {
  std::vector<msg::ProcessEntry> list;
  auto on_frame = [&list](const Frame& frame, const msg::Event* event) -> Verdict {
    if (event != nullptr && std::holds_alternative<msg::Processes>(*event)) {
      list = std::get<msg::Processes>(*event).processes;
      return Done();
    }
    return Unexpected(frame, event, "list_processes");
  };
  RETURN_IF_ERROR(impl_->Call(msg::ListProcesses{}, on_frame, IdleWait(impl_->idle()), nullptr)
                      .WithContext("list processes"));
  return list;
}

Status AgentClient::SignalProcess(int32_t pid, int sig, bool tree) {
  const std::string what = "signal " + std::to_string(sig) + " to process " + std::to_string(pid);
  if (pid <= 0) return InvalidArgument(what + ": no such pid");
  if (sig < 0 || sig > msg::kMaxSignal) return InvalidArgument(what + ": no such signal");
  return impl_
      ->Call(msg::SignalProcess{pid, sig, tree}, ExpectDone("signal_process"),
             IdleWait(impl_->idle()), nullptr)
      .WithContext(what);
}

RunningExec::RunningExec(AgentClient::Impl* client, uint32_t stream, std::string what,
                         std::chrono::milliseconds timeout, std::shared_ptr<State> state,
                         std::shared_ptr<Pending> pending)
    : client_(client),
      stream_(stream),
      what_(std::move(what)),
      timeout_(timeout),
      state_(std::move(state)),
      pending_(std::move(pending)) {}

RunningExec::~RunningExec() {
  if (waited_) return;
  // An attacher that leaves detaches (the agent answers done); an exec's handle cancels.
  client_->Abandon(stream_);
}

bool RunningExec::attached() const { return state_->attach; }

int32_t RunningExec::pid() const { return state_->pid.load(); }

void RunningExec::Detach() {
  if (attached()) client_->SendCancel(stream_);
}

Status RunningExec::WriteStdin(std::string_view data) {
  for (size_t off = 0; off < data.size(); off += kDataChunk) {
    RETURN_IF_ERROR(client_->Send(FrameType::kStdin, stream_, data.substr(off, kDataChunk)));
  }
  return Status::Ok();
}

Status RunningExec::CloseStdin() { return client_->Send(FrameType::kStdin, stream_, {}); }

Status RunningExec::Signal(int sig) {
  msg::Kill kill;
  kill.target = stream_;
  kill.signal = sig;
  return client_->Call(kill, ExpectDone("kill"), IdleWait(client_->idle()), nullptr)
      .WithContext(what_ + ": signal " + std::to_string(sig));
}

Status RunningExec::Resize(msg::TerminalSize size) {
  const std::string what = what_ + ": resize";
  // An attached handle does not know how its process was started: the agent says whether it
  // has a terminal.
  if (!state_->tty && !attached()) {
    return InvalidArgument(what + ": the exec has no terminal (ExecRequest::tty)");
  }
  RETURN_IF_ERROR(CheckTerminalSize(size, what.c_str()));
  return client_
      ->Call(msg::Resize{stream_, size}, ExpectDone("resize"), IdleWait(client_->idle()), nullptr)
      .WithContext(what);
}

void RunningExec::Kill() {
  if (!attached()) return client_->SendCancel(stream_);
  // The attach stream's cancel would only detach.
  client_->SendAndForget(msg::SignalProcess{state_->pid.load(), 9, /*tree=*/true});
}

StatusOr<ExecResult> RunningExec::Wait() {
  // The agent enforces the timeout; the host waits for it plus a grace, and while the exec
  // is silent asks the agent every idle period whether it still runs (kill, signal 0).
  WaitPolicy policy;
  policy.deadline = base::DeadlineAfter(Clock::now() + kExecGrace, timeout_);
  bool ended_on_agent = false;
  Status st;
  while (st.ok()) {
    client_->Touch(pending_);
    policy.idle = client_->idle();
    bool idle_passed = false;
    st = client_->Wait(stream_, pending_, policy, &idle_passed);
    if (st.ok() || !idle_passed) break;
    if (ended_on_agent) {
      st = DeadlineExceeded("agent said the exec on stream " + std::to_string(stream_) +
                            " had ended but sent no exit");
      break;
    }
    msg::Kill probe;
    probe.target = stream_;
    probe.signal = 0;
    Status alive = client_->Call(probe, ExpectDone("kill"), IdleWait(client_->idle()), nullptr);
    if (alive.ok()) {
      st = Status::Ok();  // it runs: wait another idle period
    } else if (alive.code() == StatusCode::kNotFound) {
      ended_on_agent = true;  // its exit may be on the way: one more idle period
      st = Status::Ok();
    } else {
      st = alive.WithContext("agent did not answer whether the exec still runs");
    }
  }
  waited_ = true;
  if (!st.ok()) {
    client_->Abandon(stream_);
    return st.WithContext(what_);
  }
  return std::move(state_->result);
}

Status AgentClient::WriteFile(const std::string& box_path, std::string_view data, uint32_t mode) {
  auto send_data = [this, data](uint32_t stream) -> Status {
    for (size_t off = 0; off < data.size(); off += kDataChunk) {
      RETURN_IF_ERROR(impl_->Send(FrameType::kData, stream, data.substr(off, kDataChunk)));
    }
    return impl_->Send(FrameType::kData, stream, {});
  };
  return impl_
      ->Call(msg::WriteFile{box_path, mode & 07777, true, file_owner_}, ExpectDone("write_file"),
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
      ->Call(msg::WriteFile{box_path, static_cast<uint32_t>(st.st_mode & 07777), true, file_owner_},
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

Status AgentClient::MakeDir(const std::string& box_path, uint32_t mode,
                            std::optional<msg::User> owner) {
  if (!owner) owner = file_owner_;
  RETURN_IF_ERROR(CheckUser(owner, "owner").WithContext("mkdir " + box_path));
  return impl_
      ->Call(msg::MakeDir{box_path, mode & 07777, true, owner}, ExpectDone("mkdir"),
             IdleWait(impl_->idle()), nullptr)
      .WithContext("mkdir " + box_path);
}

Status AgentClient::Remove(const std::string& box_path) {
  return impl_->Call(msg::Remove{box_path}, ExpectDone("remove"), IdleWait(impl_->idle()), nullptr)
      .WithContext("remove " + box_path);
}

Status AgentClient::Shutdown(std::chrono::milliseconds wait) {
  return impl_
      ->Call(msg::Shutdown{}, ExpectDone("shutdown"), DeadlineWait(Clock::now() + wait), nullptr)
      .WithContext("shutdown");
}

}  // namespace codebox::protocol
