#include "agent_harness.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "agent/proc.h"
#include "base/io.h"

namespace codebox::testing {

StatusOr<std::unique_ptr<AgentProcess>> AgentProcess::Start(std::vector<std::string> extra_args,
                                                            std::optional<AgentIds> run_as) {
  auto agent = std::make_unique<AgentProcess>();
  ASSIGN_OR_RETURN(auto pair, base::SocketPair());
  char path[] = "/tmp/codebox-agent-test-stderr-XXXXXX";
  base::UniqueFd err(::mkostemp(path, O_CLOEXEC));
  if (!err.valid()) return base::ErrnoStatus("mkstemp");
  agent->stderr_path_ = path;
  // Built before fork: the child only calls async-signal-safe functions.
  std::vector<std::string> args = {"codebox-agent", "--fd", "3"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int child_fd = pair.second.get();
  int err_fd = err.get();
  pid_t pid = ::fork();
  if (pid < 0) return base::ErrnoStatus("fork");
  if (pid == 0) {
    // dup2 onto fd 3 clears close-on-exec; only async-signal-safe calls here.
    if (::dup2(child_fd, 3) < 0 || ::dup2(err_fd, STDERR_FILENO) < 0) ::_exit(126);
    if (run_as &&
        (::setgroups(0, nullptr) != 0 || ::setresgid(run_as->gid, run_as->gid, run_as->gid) != 0 ||
         ::setresuid(run_as->uid, run_as->uid, run_as->uid) != 0)) {
      ::_exit(125);
    }
    ::execv(CODEBOX_AGENT_PATH, argv.data());
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

StatusOr<uint16_t> AgentProcess::EgressPort(std::chrono::milliseconds wait) const {
  static constexpr char kLine[] = "codebox-agent: egress port 127.0.0.1:";
  auto end = std::chrono::steady_clock::now() + wait;
  for (;;) {
    std::string text = StderrText();
    size_t at = text.find(kLine);
    size_t eol = at == std::string::npos ? at : text.find('\n', at);
    if (eol != std::string::npos) {
      return static_cast<uint16_t>(std::stoi(text.substr(at + sizeof kLine - 1)));
    }
    if (std::chrono::steady_clock::now() >= end) {
      return DeadlineExceeded("the agent did not announce its egress port; its stderr: " + text);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
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
