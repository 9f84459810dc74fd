// The exec half of Server: starting processes, moving their bytes, timeouts, reaping.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "agent/proc.h"
#include "agent/server.h"
#include "base/deadline.h"
#include "base/io.h"
#include "base/log.h"
#include "base/text.h"

namespace codebox::agent {

using protocol::FrameType;
using protocol::Json;

void Server::StartExec(uint32_t stream, const protocol::msg::Exec& request) {
  if (Status st = CheckExec(request); !st.ok()) return SendError(stream, st);
  Exec exec;
  exec.oom_kills_before = ReadOomKillCount();
  exec.start = Clock::now();
  auto spawned = SpawnExec(request);
  // The processes an earlier exec's kill left may still count against the box's process
  // limit until they are reaped: reap, and try again for a moment (bounded: 200 ms).
  for (int retry = 0;
       retry < 20 && !spawned.ok() && spawned.status().code() == StatusCode::kUnavailable;
       ++retry) {
    ReapChildren();
    ::usleep(10'000);
    spawned = SpawnExec(request);
  }
  if (!spawned.ok()) return SendError(stream, spawned.status().WithContext("exec"));
  exec.pid = spawned->pid;
  exec.in = std::move(spawned->stdin_fd);
  exec.out = std::move(spawned->stdout_fd);
  exec.err = std::move(spawned->stderr_fd);
  exec.tty = request.tty.has_value();
  exec.user = request.user;
  exec.switch_report = std::move(spawned->switch_report);
  exec.output_limit = request.output_limit;
  exec.background = request.background;
  exec.out_ring = OutputRing(request.ring_bytes);
  exec.err_ring = OutputRing(request.ring_bytes);
  exec.started_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  for (size_t i = 0; i < request.argv.size() && i < protocol::msg::kMaxListedArgs; ++i) {
    exec.listed_argv.push_back(ListedArg(request.argv[i]));
  }
  // The wire allows up to INT64_MAX ms; a limit the clock cannot reach is none.
  exec.deadline = base::DeadlineAfter(exec.start, request.timeout);
  SendEvent(stream, protocol::msg::Started{exec.pid});
  // A background process belongs to no stream: `started` was its stream's last word.
  if (!exec.background) {
    exec.stream = stream;
    streams_[stream] = exec.pid;
  }
  // A pid is unique among live processes; one of an ended entry may be reused.
  ForgetEnded(exec.pid);
  execs_.emplace(exec.pid, std::move(exec));
}

std::string Server::ListedArg(std::string_view arg) {
  // The longest prefix of at most kMaxListedArgBytes that is valid UTF-8: the JSON encoder
  // would turn a cut character (or any invalid byte) into U+FFFD, three bytes, and the host
  // refuses a listed argument past the bound.
  size_t cut = std::min(arg.size(), protocol::msg::kMaxListedArgBytes);
  while (cut > 0 && !base::IsValidUtf8(arg.substr(0, cut))) --cut;
  return std::string(arg.substr(0, cut));
}

Server::Exec* Server::ExecOfStream(uint32_t stream) {
  auto s = streams_.find(stream);
  if (s == streams_.end()) return nullptr;
  auto it = execs_.find(s->second);
  return it == execs_.end() ? nullptr : &it->second;
}

bool Server::AnyRunning() const {
  return std::any_of(execs_.begin(), execs_.end(),
                     [](const auto& entry) { return entry.second.running(); });
}

void Server::HandleStdin(uint32_t stream, std::string_view payload) {
  Exec* found = ExecOfStream(stream);
  // Stdin for an exec that ended (or never asked for it, or closed it) has nowhere to go.
  if (found == nullptr || !found->in.valid() || found->stdin_close_requested) return;
  Exec& exec = *found;
  if (payload.empty()) {
    // A terminal is not closed by its user's end of input: what they type is Ctrl-D, the
    // terminal's VEOF (end of file, at the start of a line, for a program that reads lines).
    // The terminal itself stays, so the program's output still comes.
    termios t;
    if (exec.tty && ::tcgetattr(exec.in.get(), &t) == 0 && t.c_cc[VEOF] != _POSIX_VDISABLE) {
      exec.stdin_pending.push_back(static_cast<char>(t.c_cc[VEOF]));
    }
    exec.stdin_close_requested = true;
  } else {
    exec.stdin_pending.append(payload);
  }
  PumpStdin(exec);
}

void Server::PumpStdin(Exec& exec) {
  while (!exec.stdin_pending.empty()) {
    ssize_t n = ::write(exec.in.get(), exec.stdin_pending.data(), exec.stdin_pending.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      // EPIPE: the program closed its stdin; what is left is dropped, as a pipe would.
      exec.stdin_pending.clear();
      exec.in.reset();
      return;
    }
    exec.stdin_pending.erase(0, static_cast<size_t>(n));
  }
  // A terminal's master stays open until the exec is reported: closing one of its descriptors
  // while the program ran sometimes hung the terminal up under load (the program got SIGHUP
  // in AgentTtyTest); VEOF is how a terminal's input ends.
  if (exec.stdin_close_requested && !exec.tty) exec.in.reset();
}

void Server::DrainPipe(Exec& exec, base::UniqueFd& fd, FrameType type) {
  // A background process's output goes to its rings only: it is read whatever the host does.
  if (!fd.valid() || (exec.stream && OutputBackedUp())) return;
  ssize_t n;
  do {
    n = ::read(fd.get(), read_buf_.data(), read_buf_.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EAGAIN) return;
  if (n <= 0) {
    // End of file, or EIO from a terminal's master: every process closed the terminal.
    fd.reset();
    return;
  }
  bool ended = false;
  if (!exec.tty) n = CompleteLine(fd.get(), static_cast<size_t>(n), &ended);
  const bool is_out = type == FrameType::kStdout;
  (is_out ? exec.out_ring : exec.err_ring)
      .Append(std::string_view(read_buf_.data(), static_cast<size_t>(n)));
  if (ended) fd.reset();
  if (!exec.stream) return;
  uint64_t& sent = is_out ? exec.sent_out : exec.sent_err;
  uint64_t room = exec.output_limit - std::min(sent, exec.output_limit);
  uint64_t keep = std::min<uint64_t>(room, static_cast<uint64_t>(n));
  // Past the limit the bytes are still read (so the program never blocks) and dropped.
  if (keep < static_cast<uint64_t>(n)) exec.truncated = true;
  if (keep > 0) {
    Send(type, *exec.stream, std::string_view(read_buf_.data(), static_cast<size_t>(keep)));
    sent += keep;
  }
}

ssize_t Server::CompleteLine(int fd, size_t have, bool* ended) {
  auto deadline = Clock::now() + kLineWait;
  while (have < read_buf_.size() && read_buf_[have - 1] != '\n') {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    struct pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    ssize_t n = ::read(fd, read_buf_.data() + have, read_buf_.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;  // EAGAIN: a spurious wake-up; what there is goes now
    if (n == 0) {
      *ended = true;
      break;
    }
    have += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(have);
}

void Server::HandleSignals() {
  signalfd_siginfo info;
  bool child = false;
  while (::read(signal_fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) {
      child = true;
    } else if (is_init_ && info.ssi_pid != 0) {
      // PID 1, signalled by a process of the box (the box's user may, through its saved id):
      // hostile, and ignored. Passed on, it would reach every exec, root's too.
      CODEBOX_LOG(kInfo, "codebox-agent: signal " << sig << " from box process " << info.ssi_pid
                                                  << " ignored");
    } else if (is_init_) {
      // PID 1, signalled from outside the box (its sender in no pid of the box's namespace:
      // the supervisor, the guest kernel): the box is being asked to stop; pass it on, the
      // host decides what follows.
      for (auto& [pid, exec] : execs_) {
        if (!exec.exited) SignalExec(exec.pid, sig);
      }
    } else {
      CODEBOX_LOG(kInfo, "codebox-agent: signal " << sig << ", ending every process");
      quit_ = true;
    }
  }
  // Signals coalesce, so reap everything that is ready whatever the count said.
  if (child) ReapChildren();
}

void Server::ReapChildren() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    // Orphans reparented to the agent (subreaper or PID 1) are reaped and forgotten.
    auto it = execs_.find(pid);
    if (it != execs_.end() && !it->second.exited) {
      it->second.exited = true;
      it->second.wait_status = status;
      it->second.exited_at = Clock::now();
    }
  }
}

void Server::KillExecTree(Exec& exec) {
  exec.killed_by_agent = true;
  if (!exec.exited) SignalExec(exec.pid, SIGKILL);
  // Processes of the other running execs (background ones too) stay: their sessions and
  // process groups, and the leaders themselves, are spared.
  std::set<pid_t> others;
  for (const auto& [pid, other] : execs_) {
    if (pid != exec.pid && !other.exited) others.insert(other.pid);
  }
  const pid_t self = ::getpid();
  KillMatching([&](const ProcInfo& p, const std::vector<ProcInfo>& all) {
    if (others.count(p.pid) || others.count(p.session) || others.count(p.pgrp)) return false;
    if (p.session == exec.pid || p.pgrp == exec.pid) return true;
    if (!exec.exited && DescendsFrom(p.pid, exec.pid, all)) return true;
    // An orphan of the agent whose exec is gone: it escaped (setsid + double fork).
    if (p.ppid == self) return true;
    return DescendsFrom(p.pid, self, all) &&
           !std::any_of(others.begin(), others.end(),
                        [&](pid_t o) { return DescendsFrom(p.pid, o, all); });
  });
}

void Server::KillEverything() {
  for (auto& [pid, exec] : execs_) {
    exec.killed_by_agent = true;
    if (!exec.exited) SignalExec(exec.pid, SIGKILL);
  }
  if (is_init_ && ::getpid() == 1) {
    // PID 1 of its own pid namespace or VM: everything else in it is ours to end (root's at
    // once; the box user's, which kill(-1) as a jail's root does not reach, one by one).
    ::kill(-1, SIGKILL);
    KillMatching([](const ProcInfo&, const std::vector<ProcInfo>&) { return true; });
    return;
  }
  const pid_t self = ::getpid();
  KillMatching([self](const ProcInfo& p, const std::vector<ProcInfo>& all) {
    return DescendsFrom(p.pid, self, all);
  });
}

void Server::CheckDeadlines(Clock::time_point now) {
  for (auto& [pid, exec] : execs_) {
    if (exec.exited || exec.timed_out || !exec.deadline || now < *exec.deadline) continue;
    exec.timed_out = true;
    KillExecTree(exec);
  }
}

void Server::FinishExecs(Clock::time_point now) {
  for (auto it = execs_.begin(); it != execs_.end();) {
    Exec& exec = it->second;
    bool drained = !exec.out.valid() && !exec.err.valid();
    // A background child holding the pipes open must not hold the result back for long.
    if (!exec.running() || !exec.exited || (!drained && now < exec.exited_at + kDrainGrace)) {
      ++it;
      continue;
    }
    // Whatever is already in the pipes belongs to the result (a few reads: a background
    // child that keeps writing must not hold it back).
    for (int round = 0; round < 8 && (exec.out.valid() || exec.err.valid()); ++round) {
      DrainPipe(exec, exec.out, FrameType::kStdout);
      DrainPipe(exec, exec.err, FrameType::kStderr);
    }
    exec.out.reset();
    exec.err.reset();
    exec.in.reset();
    // A child that could not become the exec's user ran nothing: the request failed.
    if (exec.user) {
      if (std::optional<Status> failed = UserSwitchFailure(exec.switch_report.get(), *exec.user)) {
        if (exec.stream) SendError(*exec.stream, *failed);
        for (const Attacher& a : exec.attachers) SendError(a.stream, *failed);
        for (auto s = streams_.begin(); s != streams_.end();) {
          s = s->second == exec.pid ? streams_.erase(s) : std::next(s);
        }
        it = execs_.erase(it);
        continue;
      }
    }
    const int ws = exec.wait_status;
    const bool signaled = WIFSIGNALED(ws);
    const int sig = signaled ? WTERMSIG(ws) : 0;
    const bool oom = signaled && sig == SIGKILL && !exec.killed_by_agent &&
                     ReadOomKillCount() > exec.oom_kills_before;
    auto duration =
        std::chrono::duration_cast<std::chrono::milliseconds>(exec.exited_at - exec.start);
    protocol::msg::Exit exit;
    exit.exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
    exit.signal = sig;
    exit.timed_out = exec.timed_out;
    exit.duration_ms = std::max<int64_t>(0, duration.count());
    exit.out_of_memory = oom;
    exec.exit = exit;
    if (exec.stream) {
      exit.output_truncated = exec.truncated;
      SendEvent(*exec.stream, exit);
      streams_.erase(*exec.stream);
      exec.stream.reset();
    }
    ++it;
  }
  TrimTable();
}

void Server::HandleKill(uint32_t stream, const protocol::msg::Kill& request) {
  if (request.signal < 0 || request.signal >= NSIG) {
    return SendError(stream, InvalidArgument("kill: bad \"signal\""));
  }
  Exec* exec = ExecOfStream(request.target);
  if (exec == nullptr || exec->exited) {
    return SendError(stream,
                     NotFound("kill: no running exec on stream " + std::to_string(request.target)));
  }
  // Signal 0 is the host's liveness probe: "does this exec still run?"
  if (request.signal == 0) return SendEvent(stream, protocol::msg::Done{});
  if (request.signal == SIGKILL) exec->killed_by_agent = true;
  SignalExec(exec->pid, request.signal);
  SendEvent(stream, protocol::msg::Done{});
}

void Server::HandleResize(uint32_t stream, const protocol::msg::Resize& request) {
  Exec* exec = ExecOfStream(request.target);
  // A terminal whose programs all closed it (`out` read EIO) has nobody left to resize for.
  if (exec == nullptr || exec->exited || !exec->out.valid()) {
    return SendError(
        stream, NotFound("resize: no running exec on stream " + std::to_string(request.target)));
  }
  if (!exec->tty) {
    return SendError(
        stream, InvalidArgument("resize: the exec on stream " + std::to_string(request.target) +
                                " has no terminal (it was started without tty)"));
  }
  Status st = SetTerminalSize(exec->out.get(), request.size);
  st.ok() ? SendEvent(stream, protocol::msg::Done{}) : SendError(stream, st);
}

void Server::HandleCancel(uint32_t stream, const protocol::msg::Cancel& request) {
  // Whatever is still queued for the target goes out; the host drops it.
  downloads_.erase(request.target);
  uploads_.erase(request.target);  // the writer removes its temp file
  CancelEgress(request.target);    // the program's connection is reset
  // An attacher leaves; the process runs on. The exec stream's own process is killed.
  if (!Detach(request.target)) {
    Exec* exec = ExecOfStream(request.target);
    if (exec != nullptr && exec->stream == request.target && !exec->exited) KillExecTree(*exec);
  }
  SendEvent(stream, protocol::msg::Done{});
}

}  // namespace codebox::agent
