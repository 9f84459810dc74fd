#include "interpreter/resident_python.h"

#include <utility>

namespace codebox::interpreter {

ResidentPython::~ResidentPython() {
  if (!waiter_.joinable()) return;
  Kill();
  waiter_.join();
}

Status ResidentPython::Start(ResidentSpec spec) {
  protocol::ExecRequest request;
  protocol::msg::Exec& exec = request.exec;
  exec.argv = {"python3", "-c", spec.source};
  exec.env = std::move(spec.env);
  exec.cwd = std::move(spec.cwd);
  exec.user = std::move(spec.user);
  exec.stdin_stream = true;
  exec.timeout = kNoTimeout;    // the owner enforces its deadlines and kills it
  request.keep_output = false;  // the owner keeps what it needs
  exec.output_limit = spec.output_limit;
  request.on_stdout = std::move(spec.on_stdout);
  request.on_stderr = std::move(spec.on_stderr);
  on_exit_ = std::move(spec.on_exit);
  if (spec.oom_kill_count) oom_at_start_ = spec.oom_kill_count();
  ASSIGN_OR_RETURN(exec_, spec.agent->StartExec(request));
  waiter_ = std::thread([this] {
    StatusOr<ExecResult> exit = exec_->Wait();
    exited_ = true;
    if (on_exit_) on_exit_(std::move(exit));
  });
  return Status::Ok();
}

Status ResidentPython::WriteStdin(std::string_view bytes) { return exec_->WriteStdin(bytes); }

Status ResidentPython::CloseStdin() { return exec_->CloseStdin(); }

Status ResidentPython::Signal(int sig) { return exec_->Signal(sig); }

void ResidentPython::Kill() {
  if (exec_ && !exited_) exec_->Kill();
}

void ResidentPython::Join() {
  if (waiter_.joinable()) waiter_.join();
}

std::string SecondsText(std::chrono::milliseconds ms) {
  std::string s = std::to_string(ms.count() / 1000.0);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s + " s";
}

}  // namespace codebox::interpreter
