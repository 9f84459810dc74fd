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

}  // namespace codebox::box
