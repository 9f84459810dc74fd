// The process table half of Server: attaching to a process, listing the table, signalling a
// process by its pid, and the table's bounds (docs/protocol.md, "Processes").
#include <signal.h>

#include <algorithm>
#include <vector>

#include "agent/server.h"

namespace codebox::agent {

using protocol::FrameType;

void Server::HandleAttach(uint32_t stream, const protocol::msg::Attach& request) {
  auto it = execs_.find(request.pid);
  if (it == execs_.end()) {
    return SendError(stream, NotFound("attach: no process " + std::to_string(request.pid) +
                                          " in the table (it never ran here, or ended long ago)"));
  }
  Exec& exec = it->second;
  Attacher a;
  a.stream = stream;
  a.output = request.output;
  if (a.output) {
    // Everything the rings hold is replayed; what fell out before is counted as dropped.
    a.out_cursor = a.dropped_out = exec.out_ring.start();
    a.err_cursor = a.dropped_err = exec.err_ring.start();
  } else {
    a.out_cursor = exec.out_ring.total();
    a.err_cursor = exec.err_ring.total();
  }
  exec.attachers.push_back(a);
  streams_[stream] = exec.pid;
  PumpAttachers();
}

bool Server::Detach(uint32_t stream) {
  Exec* exec = ExecOfStream(stream);
  if (exec == nullptr) return false;
  auto a = std::find_if(exec->attachers.begin(), exec->attachers.end(),
                        [stream](const Attacher& x) { return x.stream == stream; });
  if (a == exec->attachers.end()) return false;
  exec->attachers.erase(a);
  streams_.erase(stream);
  SendEvent(stream, protocol::msg::Done{});
  return true;
}

void Server::PumpAttachers() {
  for (auto& [pid, exec] : execs_) {
    for (auto a = exec.attachers.begin(); a != exec.attachers.end();) {
      if (a->output) {
        for (bool sent = true; sent && !OutputBackedUp();) {
          sent = false;
          for (auto [ring, cursor, dropped, type] :
               {std::tuple(&exec.out_ring, &a->out_cursor, &a->dropped_out, FrameType::kStdout),
                std::tuple(&exec.err_ring, &a->err_cursor, &a->dropped_err, FrameType::kStderr)}) {
            if (*cursor < ring->start()) {  // this attacher fell behind the ring
              *dropped += ring->start() - *cursor;
              *cursor = ring->start();
            }
            std::string_view piece = ring->Peek(*cursor, protocol::kDataChunk);
            if (piece.empty()) continue;
            Send(type, a->stream, piece);
            *cursor += piece.size();
            sent = true;
          }
        }
      }
      const bool caught_up = !a->output || (a->out_cursor == exec.out_ring.total() &&
                                            a->err_cursor == exec.err_ring.total());
      if (!exec.exit || !caught_up || OutputBackedUp()) {
        ++a;
        continue;
      }
      protocol::msg::Exit exit = *exec.exit;
      exit.dropped_stdout = a->dropped_out;
      exit.dropped_stderr = a->dropped_err;
      SendEvent(a->stream, exit);
      streams_.erase(a->stream);
      a = exec.attachers.erase(a);
    }
  }
}

void Server::SendProcessList(uint32_t stream) {
  protocol::msg::Processes list;
  // The newest kMaxListedProcesses, oldest first.
  std::vector<const Exec*> all;
  for (const auto& [pid, exec] : execs_) all.push_back(&exec);
  std::sort(all.begin(), all.end(), [](const Exec* a, const Exec* b) { return a->start < b->start; });
  if (all.size() > protocol::msg::kMaxListedProcesses) {
    all.erase(all.begin(), all.end() - protocol::msg::kMaxListedProcesses);
  }
  for (const Exec* exec : all) {
    protocol::msg::ProcessEntry e;
    e.pid = exec->pid;
    e.argv = exec->listed_argv;
    e.tty = exec->tty;
    e.background = exec->background;
    e.started_unix_ms = exec->started_unix_ms;
    e.running = exec->running();
    e.exit = exec->exit;
    e.stdout_bytes = exec->out_ring.total();
    e.stderr_bytes = exec->err_ring.total();
    e.dropped_stdout = exec->out_ring.start();
    e.dropped_stderr = exec->err_ring.start();
    list.processes.push_back(std::move(e));
  }
  SendEvent(stream, list);
}

void Server::HandleSignalProcess(uint32_t stream, const protocol::msg::SignalProcess& request) {
  auto it = execs_.find(request.pid);
  if (it == execs_.end() || it->second.exited) {
    return SendError(stream, NotFound("signal_process: no running process " +
                                          std::to_string(request.pid) + " in the table"));
  }
  if (request.signal < 0 || request.signal >= NSIG) {
    return SendError(stream, InvalidArgument("signal_process: bad \"signal\""));
  }
  Exec& exec = it->second;
  if (request.tree) {
    // Every process it started, also those that left its process group (as cancel does).
    if (request.signal != SIGKILL) {
      return SendError(stream, InvalidArgument("signal_process: \"tree\" goes with signal 9"));
    }
    KillExecTree(exec);
  } else if (request.signal != 0) {
    if (request.signal == SIGKILL) exec.killed_by_agent = true;
    SignalExec(exec.pid, request.signal);
  }
  SendEvent(stream, protocol::msg::Done{});
}

void Server::ForgetEnded(pid_t pid) {
  auto it = execs_.find(pid);
  if (it == execs_.end()) return;
  // Its attachers that had not caught up end here: their streams must not follow the new
  // process that has its pid.
  for (const Attacher& a : it->second.attachers) {
    SendError(a.stream, NotFound("process " + std::to_string(pid) +
                                 " ended and its pid went to a new process"));
    streams_.erase(a.stream);
  }
  execs_.erase(it);
}

void Server::TrimTable() {
  std::vector<std::pair<Clock::time_point, pid_t>> ended;
  for (const auto& [pid, exec] : execs_) {
    if (!exec.running() && exec.attachers.empty()) ended.emplace_back(exec.exited_at, pid);
  }
  if (ended.size() <= kKeptEnded) return;
  std::sort(ended.begin(), ended.end());
  for (size_t i = 0; i + kKeptEnded < ended.size(); ++i) execs_.erase(ended[i].second);
}

}  // namespace codebox::agent
