#include "box/local_process.h"

#include <csignal>

namespace codebox::box {

StatusOr<ExecResult> LocalProcess::Wait() {
  auto result = running_->Wait();
  if (!result.ok()) return host_.explain(result.status(), what_);
  if (host_.after_exit) host_.after_exit();
  // The cgroup's count is the authoritative word on OOM kills in a jail.
  if (result->signal == SIGKILL && !result->timed_out && host_.oom_kill_count() > oom_before_) {
    result->out_of_memory = true;
  }
  result->driver = host_.driver;
  return result;
}

ProcessInfo ProcessInfoOf(const protocol::msg::ProcessEntry& entry) {
  ProcessInfo info;
  info.pid = entry.pid;
  info.argv = entry.argv;
  info.tty = entry.tty;
  info.background = entry.background;
  info.started = std::chrono::system_clock::time_point(
      std::chrono::milliseconds(entry.started_unix_ms));
  info.running = entry.running;
  if (entry.exit) {
    ExecResult r;
    r.exit_code = entry.exit->exit_code;
    r.signal = entry.exit->signal;
    r.timed_out = entry.exit->timed_out;
    r.out_of_memory = entry.exit->out_of_memory;
    r.duration = std::chrono::milliseconds(entry.exit->duration_ms);
    info.exit = std::move(r);
  }
  info.stdout_bytes = entry.stdout_bytes;
  info.stderr_bytes = entry.stderr_bytes;
  info.dropped_stdout = entry.dropped_stdout;
  info.dropped_stderr = entry.dropped_stderr;
  return info;
}

}  // namespace codebox::box
