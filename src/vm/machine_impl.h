// Machine's state, shared by machine.cc (start, stop) and machine_snapshot.cc (templates,
// restores, parked machines). Internal to src/vm.
#ifndef CODEBOX_VM_MACHINE_IMPL_H_
#define CODEBOX_VM_MACHINE_IMPL_H_

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "base/text.h"
#include "base/unique_fd.h"
#include "vm/qemu.h"
#include "vm/vm.h"

namespace codebox::vm {

// The guest may write to its console without end; the log is capped (writes past it fail
// inside QEMU and are dropped) so a box cannot fill the host's disk.
constexpr uint64_t kMaxLogBytes = 8ull << 20;
constexpr size_t kConsoleKeepBytes = 64 << 10;

// The last `max_bytes` of a file.
inline std::string ReadTail(const std::string& path, size_t max_bytes) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return "";
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return "";
  off_t start = st.st_size > static_cast<off_t>(max_bytes) ? st.st_size - max_bytes : 0;
  std::string data(static_cast<size_t>(st.st_size - start), '\0');
  ssize_t n = ::pread(fd.get(), data.data(), data.size(), start);
  data.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return data;
}

inline std::string DescribeExit(int wstatus) {
  if (WIFEXITED(wstatus)) return "QEMU exited with status " + std::to_string(WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) return "QEMU was killed by signal " + std::to_string(WTERMSIG(wstatus));
  return "QEMU ended";
}

class Machine::Impl {
 public:
  Accelerator accel = Accelerator::kTcg;
  std::string run_dir;
  std::string console_log;
  std::string qemu_log;
  pid_t keeper = -1;  // codebox-vm-keeper, our child; QEMU is its child (keeper.h)
  base::UniqueFd keeper_fd;
  std::string keeper_buf;
  std::string keeper_error;  // "error ..." from the keeper
  pid_t pid = -1;            // QEMU's, as the keeper reported it; -1 once it ended
  bool ended = false;        // QEMU ended (reported), or the keeper is gone
  bool keeper_lost = false;  // the keeper went without reporting QEMU's end
  int wstatus = 0;
  base::UniqueFd agent_fd;
  base::UniqueFd qmp_fd;
  std::vector<std::string> limits;
  mutable std::mutex mu;
  bool destroyed = false;
  std::string saved_console;  // kept across Destroy, which removes the log file
  std::string template_key;   // the template it was restored from; "" when booted
  std::string warning;        // why it was booted although a restore was asked for
  bool parked = false;        // restored and paused: Resume() runs it

  // Reads the keeper's lines for up to `timeout`; true once QEMU has ended. Caller holds mu.
  bool PumpKeeperLocked(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!ended) {
      if (!keeper_fd.valid()) {
        MarkKeeperGone();
        break;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      struct pollfd p = {keeper_fd.get(), POLLIN, 0};
      int rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0) break;
      char buf[256];
      ssize_t n = ::recv(keeper_fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        MarkKeeperGone();
        break;
      }
      keeper_buf.append(buf, static_cast<size_t>(n));
      for (size_t nl; !ended && (nl = keeper_buf.find('\n')) != std::string::npos;) {
        std::string line = keeper_buf.substr(0, nl);
        keeper_buf.erase(0, nl + 1);
        if (line.starts_with("qemu ")) {
          pid = static_cast<pid_t>(std::atol(line.c_str() + 5));
        } else if (line.starts_with("exit ")) {
          wstatus = std::atoi(line.c_str() + 5);
          ended = true;
          pid = -1;
        } else if (line.starts_with("error ")) {
          keeper_error = line.substr(6, 400);
          MarkKeeperGone();
        }
      }
      if (keeper_buf.size() > 4096) keeper_buf.clear();  // not a keeper of ours
    }
    if (ended) ReapKeeper(std::chrono::milliseconds(500));
    return ended;
  }

  void MarkKeeperGone() {
    if (!ended) keeper_lost = keeper_error.empty();
    ended = true;
    pid = -1;
  }

  // The keeper exits right after its last line; SIGKILL if it does not (QEMU then gets its
  // PR_SET_PDEATHSIG).
  void ReapKeeper(std::chrono::milliseconds timeout) {
    if (keeper < 0) return;
    int ignored;
    if (!WaitChild(keeper, timeout, &ignored)) {
      ::kill(keeper, SIGKILL);
      WaitChild(keeper, std::chrono::milliseconds(1000), &ignored);
    }
    keeper = -1;
  }

  bool ReapLocked(bool block) {
    return PumpKeeperLocked(block ? std::chrono::milliseconds(2000) : std::chrono::milliseconds(0));
  }

  std::string DescribeEnd() const {
    if (!keeper_error.empty()) return "QEMU did not start: " + keeper_error;
    if (keeper_lost) return "the codebox-vm-keeper process of the box ended (QEMU with it)";
    return DescribeExit(wstatus);
  }

  std::string Diagnostics() const {
    std::string out;
    std::string qemu = base::TailLines(ReadTail(qemu_log, 4096), 5);
    if (!qemu.empty()) out += "\nqemu: " + qemu;
    std::string console = ConsoleExcerpt(ReadTail(console_log, kConsoleKeepBytes), 20);
    out += console.empty() ? "\n(guest console is empty)" : "\nguest console:\n" + console;
    return out;
  }

  Status StopLocked() {
    if (!ended) {
      if (qmp_fd.valid()) (void)QmpQuit(qmp_fd.get());
      if (!PumpKeeperLocked(std::chrono::milliseconds(400))) {
        // The keeper SIGKILLs QEMU and reports; failing that, the keeper itself goes.
        if (keeper_fd.valid()) (void)::send(keeper_fd.get(), "k", 1, MSG_NOSIGNAL);
        if (!PumpKeeperLocked(std::chrono::milliseconds(500))) {
          if (keeper > 0) ::kill(keeper, SIGKILL);
          (void)PumpKeeperLocked(std::chrono::milliseconds(500));
        }
      }
    }
    ReapKeeper(std::chrono::milliseconds(500));
    keeper_fd.reset();
    agent_fd.reset();
    qmp_fd.reset();
    return Status::Ok();
  }
};

inline std::string Millis(std::chrono::steady_clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

}  // namespace codebox::vm

#endif  // CODEBOX_VM_MACHINE_IMPL_H_
