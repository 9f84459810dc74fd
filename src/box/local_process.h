// LocalProcess: a Process (codebox/box.h) of a box this process runs, on an agent exec. What
// makes its result the same as Box::Exec's (the OOM verdict of the box's cgroup, the driver,
// the box's words for a crash, removing the program file it was sent) is the box's, handed in
// as a ProcessHost; Box::Exec itself is Start + Wait.
#ifndef CODEBOX_BOX_LOCAL_PROCESS_H_
#define CODEBOX_BOX_LOCAL_PROCESS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "agent_client/agent_client.h"
#include "codebox/box.h"

namespace codebox::box {

// What a LocalProcess needs of its box; every function outlives the process (the box does).
struct ProcessHost {
  // The box's OOM kill count (the cgroup's word in a jail).
  std::function<uint64_t()> oom_kill_count;
  // Adds what the driver knows to a failure of the box (a crash, the box's end).
  std::function<Status(Status, const std::string& what)> explain;
  std::string driver;  // ExecResult::driver
  // Called once the program ended normally (the program file the box sent is removed).
  std::function<void()> after_exit;
};

// A handle on an attach stream (Box::Attach, a background Box::Start) detaches when it goes;
// one on the exec's own stream kills it.
class LocalProcess final : public Process {
 public:
  // `running` has been started; `oom_before` is the box's OOM count from just before.
  LocalProcess(std::unique_ptr<protocol::RunningExec> running, std::string what,
               uint64_t oom_before, ProcessHost host)
      : running_(std::move(running)),
        what_(std::move(what)),
        oom_before_(oom_before),
        host_(std::move(host)) {}

  Status WriteStdin(std::string_view data) override {
    return host_.explain(running_->WriteStdin(data), what_ + ": stdin");
  }
  Status CloseStdin() override { return host_.explain(running_->CloseStdin(), what_ + ": stdin"); }
  Status Resize(TerminalSize size) override {
    return host_.explain(running_->Resize({size.rows, size.cols}), "");
  }
  Status Signal(int sig) override { return host_.explain(running_->Signal(sig), ""); }
  Status Kill() override {
    running_->Kill();
    return Status::Ok();
  }
  int pid() const override { return running_->pid(); }
  void Detach() override { running_->Detach(); }
  StatusOr<ExecResult> Wait() override;

 private:
  std::unique_ptr<protocol::RunningExec> running_;
  const std::string what_;
  const uint64_t oom_before_;
  ProcessHost host_;
};

// What the agent's table says of one process, in the public words.
ProcessInfo ProcessInfoOf(const protocol::msg::ProcessEntry& entry);

}  // namespace codebox::box

#endif  // CODEBOX_BOX_LOCAL_PROCESS_H_
