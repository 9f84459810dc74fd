#include "agent_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "agent/proc.h"
#include "base/io.h"

namespace codebox::testing {

StatusOr<std::unique_ptr<AgentProcess>> AgentProcess::Start() {
  auto agent = std::make_unique<AgentProcess>();
  ASSIGN_OR_RETURN(auto pair, base::SocketPair());
  char path[] = "/tmp/codebox-agent-test-stderr-XXXXXX";
  base::UniqueFd err(::mkostemp(path, O_CLOEXEC));
  if (!err.valid()) return base::ErrnoStatus("mkstemp");
  agent->stderr_path_ = path;
  int child_fd = pair.second.get();
  int err_fd = err.get();
  pid_t pid = ::fork();
  if (pid < 0) return base::ErrnoStatus("fork");
  if (pid == 0) {
    // dup2 onto fd 3 clears close-on-exec; only async-signal-safe calls here.
    if (::dup2(child_fd, 3) < 0 || ::dup2(err_fd, STDERR_FILENO) < 0) ::_exit(126);
    ::execl(CODEBOX_AGENT_PATH, "codebox-agent", "--fd", "3", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  agent->pid_ = pid;
  agent->host_fd_ = std::move(pair.first);
  return agent;
}

AgentProcess::~AgentProcess() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
  }
  if (!stderr_path_.empty()) ::unlink(stderr_path_.c_str());
}

StatusOr<std::unique_ptr<protocol::AgentClient>> AgentProcess::Connect() {
  return protocol::AgentClient::Connect(TakeHostFd(), std::chrono::seconds(5));
}

int AgentProcess::WaitExit(int timeout_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

std::string AgentProcess::StderrText() const {
  auto text = base::ReadFile(stderr_path_);
  return text.ok() ? *text : "";
}

int AgentProcess::CountDescendants() const {
  auto all = agent::ListProcesses();
  int n = 0;
  for (const auto& p : all) {
    if (agent::DescendsFrom(p.pid, pid_, all)) ++n;
  }
  return n;
}

}  // namespace codebox::testing
