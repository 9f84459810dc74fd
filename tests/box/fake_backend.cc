#include "fake_backend.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>
#include <vector>

#include "agent/proc.h"
#include "agent/server.h"
#include "base/io.h"

namespace codebox::testing {
namespace {

using protocol::Frame;

// Forks a child of the test process that serves `fd` with the agent's own Server, as
// codebox-agent --fd does when it is not PID 1 (so it never signals outside its own tree).
StatusOr<pid_t> ForkAgent(base::UniqueFd fd) {
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return base::ErrnoStatus("fork the in-process agent");
  if (pid != 0) return pid;
  // The child: only the forking thread exists here; it never returns into the test.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  // Copies of other connections' fds would keep them open after their agents die.
  // As codebox-agent's main does, the connection must not leak into the programs it runs.
  if (::dup2(fd.get(), 3) < 0 || !base::SetCloseOnExec(3, true).ok()) ::_exit(1);
  ::close_range(4, ~0U, 0);
  (void)fd.release();
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  int code = agent::Server(base::UniqueFd(3), /*is_init=*/false).Run();
  ::_exit(code);
}

// Ends the agent and every process it started, as the end of a real box does (the programs
// of its execs run in sessions of their own and would outlive it). The agent is stopped first
// so that it cannot start more while its tree is killed.
void KillAgentTree(pid_t agent) {
  ::kill(agent, SIGSTOP);
  agent::KillMatching([agent](const agent::ProcInfo& p, const std::vector<agent::ProcInfo>& all) {
    return agent::DescendsFrom(p.pid, agent, all);
  });
  ::kill(agent, SIGKILL);
}

class FakeBackend final : public box::Backend {
 public:
  FakeBackend(std::shared_ptr<FakeBoxState> state, Tamper tamper)
      : state_(std::move(state)), tamper_(std::move(tamper)) {}

  Status Start() {
    ASSIGN_OR_RETURN(auto agent_pair, base::SocketPair());
    if (tamper_) {
      ASSIGN_OR_RETURN(auto host_pair, base::SocketPair());
      host_fd_ = std::move(host_pair.first);
      relay_host_ = std::move(host_pair.second);
      relay_agent_ = std::move(agent_pair.first);
      stop_.reset(::eventfd(0, EFD_CLOEXEC));
      if (!stop_.valid()) return base::ErrnoStatus("eventfd");
    } else {
      host_fd_ = std::move(agent_pair.first);
    }
    ASSIGN_OR_RETURN(pid_, ForkAgent(std::move(agent_pair.second)));
    state_->agent_pid = pid_;
    if (tamper_) relay_ = std::thread([this] { Relay(); });
    return Status::Ok();
  }

  ~FakeBackend() override { End(); }

  base::UniqueFd TakeAgentFd() override { return std::move(host_fd_); }
  Status Destroy() override {
    ++state_->destroy_calls;
    End();
    return Status::Ok();
  }
  uint64_t OomKillCount() const override { return state_->oom_kills; }
  std::string Diagnostics() const override { return state_->diagnostics(); }
  BoxInfo Info() const override {
    BoxInfo info;
    info.driver = "fake";
    info.limits = {"none: in-process agent"};
    return info;
  }

 private:
  // Stops the relay (hanging up on the host) and kills the agent; safe to call again and
  // from several threads. The relay stops first: it may signal the agent until then.
  void End() {
    std::lock_guard<std::mutex> lock(end_mu_);
    if (relay_.joinable()) {
      uint64_t one = 1;
      (void)!::write(stop_.get(), &one, sizeof one);
      relay_.join();
      HangUp();
    }
    if (pid_ > 0) {
      KillAgentTree(pid_);
      int status;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      pid_ = -1;
    }
  }

  // Moves frames between the host and the agent through tamper_ until either side ends (then
  // the other is hung up on) or End() asks it to stop.
  void Relay() {
    protocol::FrameDecoder from_host, from_agent;
    bool stalled = false;
    std::vector<char> buf(1 << 16);
    for (;;) {
      pollfd fds[3] = {{stop_.get(), POLLIN, 0},
                       {relay_host_.get(), static_cast<short>(stalled ? 0 : POLLIN), 0},
                       {relay_agent_.get(), static_cast<short>(stalled ? 0 : POLLIN), 0}};
      if (::poll(fds, 3, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (fds[0].revents) break;
      for (int side = 1; side <= 2 && !stalled; ++side) {
        if (fds[side].revents == 0) continue;
        const Direction dir = side == 1 ? Direction::kToAgent : Direction::kToHost;
        int from = side == 1 ? relay_host_.get() : relay_agent_.get();
        int to = side == 1 ? relay_agent_.get() : relay_host_.get();
        protocol::FrameDecoder& decoder = side == 1 ? from_host : from_agent;
        ssize_t n = ::read(from, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return HangUp();
        decoder.Feed(std::string_view(buf.data(), static_cast<size_t>(n)));
        for (;;) {
          auto frame = decoder.Next();
          if (!frame.ok()) return HangUp();
          if (!frame->has_value()) break;
          Frame& f = **frame;
          Verdict verdict = tamper_(dir, f);
          if (verdict == Verdict::kForward) {
            std::string encoded = protocol::EncodeFrame(f.type, f.stream, f.payload);
            if (!base::WriteAll(to, encoded).ok()) return HangUp();
          } else if (verdict == Verdict::kKillAgent) {
            KillAgentTree(pid_);  // reaped only after this thread ends
          } else if (verdict == Verdict::kOversize) {
            std::string header = protocol::EncodeFrame(f.type, f.stream, "");
            const uint32_t length = protocol::kMaxPayload + 1;
            for (int i = 0; i < 4; ++i) header[i] = static_cast<char>(length >> (8 * i));  // LE
            if (!base::WriteAll(to, header).ok()) return HangUp();
          } else if (verdict == Verdict::kStall) {
            stalled = true;
            break;
          }
        }
      }
    }
  }
  void HangUp() {
    ::shutdown(relay_host_.get(), SHUT_RDWR);
    ::shutdown(relay_agent_.get(), SHUT_RDWR);
  }

  std::shared_ptr<FakeBoxState> state_;
  Tamper tamper_;
  base::UniqueFd host_fd_, relay_host_, relay_agent_, stop_;
  std::mutex end_mu_;
  pid_t pid_ = -1;
  std::thread relay_;
};

}  // namespace

StatusOr<std::unique_ptr<box::Backend>> FakeEnv::StartBackend(const BoxOptions& options) {
  if (start_error) return *start_error;
  auto backend = std::make_unique<FakeBackend>(state, tamper);
  if (image_config) {
    ASSIGN_OR_RETURN(box::ImageRun run, box::PlanImageRun(options, *image_config, can_switch_user));
    backend->set_image_run(std::move(run));
  }
  RETURN_IF_ERROR(backend->Start());
  return std::unique_ptr<box::Backend>(std::move(backend));
}

std::string RequestOf(const Frame& frame) {
  if (frame.type != protocol::FrameType::kControl) return "";
  auto json = protocol::ParseControl(frame.payload);
  if (!json.ok() || !json->contains("op") || !(*json)["op"].is_string()) return "";
  return (*json)["op"].get<std::string>();
}

std::string EventOf(const Frame& frame) {
  if (frame.type != protocol::FrameType::kControl) return "";
  auto json = protocol::ParseControl(frame.payload);
  if (!json.ok() || !json->contains("event") || !(*json)["event"].is_string()) return "";
  return (*json)["event"].get<std::string>();
}

void EditControl(Frame& frame, const std::function<void(protocol::Json&)>& edit) {
  auto json = protocol::ParseControl(frame.payload);
  if (!json.ok()) return;
  edit(*json);
  frame.payload = protocol::DumpControl(*json);
}

}  // namespace codebox::testing
