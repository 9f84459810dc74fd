// Machine: one QEMU microvm per box. Start prepares the cached artifacts, starts QEMU as a
// separate process (scrubbed env, only its two sockets and log fds), and waits until the
// agent speaks; Destroy ends QEMU and removes the box's run directory.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

#include "base/io.h"
#include "base/log.h"
#include "vm/accel.h"
#include "vm/disk.h"
#include "vm/fs.h"
#include "vm/initramfs.h"
#include "vm/kernel.h"
#include "vm/process.h"
#include "vm/qemu.h"
#include "vm/vm.h"

namespace codebox::vm {
namespace {

// The guest may write to its console without end; the log is capped (writes past it fail
// inside QEMU and are dropped) so a box cannot fill the host's disk.
constexpr uint64_t kMaxLogBytes = 8ull << 20;
constexpr size_t kConsoleKeepBytes = 64 << 10;

// The last `max_bytes` of a file.
std::string ReadTail(const std::string& path, size_t max_bytes) {
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

std::string DescribeExit(int wstatus) {
  if (WIFEXITED(wstatus)) return "QEMU exited with status " + std::to_string(WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) return "QEMU was killed by signal " + std::to_string(WTERMSIG(wstatus));
  return "QEMU ended";
}

// Run dirs of boxes whose host process died without Destroy: QEMU is gone (its pid file
// names a dead process), so the directory is only litter.
void SweepStaleRunDirs(const std::string& run_root) {
  DIR* dir = ::opendir(run_root.c_str());
  if (dir == nullptr) return;
  time_t now = ::time(nullptr);
  while (struct dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name.rfind("vm-", 0) != 0) continue;
    std::string path = run_root + "/" + name;
    auto pid_text = base::ReadFile(path + "/qemu.pid");
    struct stat st;
    bool stale;
    if (pid_text.ok()) {
      pid_t pid = static_cast<pid_t>(std::atol(pid_text->c_str()));
      stale = pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
    } else {
      // No pid file: being set up right now, or abandoned before QEMU started.
      stale = ::stat(path.c_str(), &st) == 0 && st.st_mtime + 600 < now;
    }
    if (stale) (void)RemoveTree(path);
  }
  ::closedir(dir);
}

}  // namespace

class Machine::Impl {
 public:
  Accelerator accel = Accelerator::kTcg;
  std::string run_dir;
  std::string console_log;
  std::string qemu_log;
  pid_t pid = -1;
  int wstatus = 0;
  base::UniqueFd agent_fd;
  base::UniqueFd qmp_fd;
  std::vector<std::string> limits;
  mutable std::mutex mu;
  bool destroyed = false;
  std::string saved_console;  // kept across Destroy, which removes the log file

  // Non-blocking reap; pid becomes -1 once QEMU is gone. Caller holds mu.
  bool ReapLocked(bool block) {
    if (pid < 0) return true;
    pid_t got;
    do {
      got = ::waitpid(pid, &wstatus, block ? 0 : WNOHANG);
    } while (got < 0 && errno == EINTR);
    if (got == pid || got < 0) {
      pid = -1;
      return true;
    }
    return false;
  }

  std::string Diagnostics() const {
    std::string out;
    std::string qemu = TailLines(ReadTail(qemu_log, 4096), 5);
    if (!qemu.empty()) out += "\nqemu: " + qemu;
    std::string console = ConsoleExcerpt(ReadTail(console_log, kConsoleKeepBytes), 20);
    out += console.empty() ? "\n(guest console is empty)" : "\nguest console:\n" + console;
    return out;
  }

  Status StopLocked() {
    if (pid > 0) {
      if (qmp_fd.valid()) (void)QmpQuit(qmp_fd.get());
      if (!WaitChild(pid, std::chrono::milliseconds(400), &wstatus)) {
        ::kill(pid, SIGKILL);
        WaitChild(pid, std::chrono::milliseconds(500), &wstatus);
      }
      ReapLocked(/*block=*/true);
    }
    agent_fd.reset();
    qmp_fd.reset();
    return Status::Ok();
  }
};

Machine::Machine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Machine::~Machine() { (void)Destroy(); }

StatusOr<std::unique_ptr<Machine>> Machine::Start(const VmConfig& config) {
  ASSIGN_OR_RETURN(Accelerator accel, ChooseAccelerator(config.allow_emulation));
  if (config.memory_mib < 128) return InvalidArgument("vm driver: memory below 128 MiB");
  if (config.cpus < 1) return InvalidArgument("vm driver: cpus must be at least 1");
  if (config.disk_mib < 1) return InvalidArgument("vm driver: disk must be at least 1 MiB");
  if (::access(config.agent_path.c_str(), R_OK) != 0) {
    return NotFound("vm driver: codebox-agent not found at '" + config.agent_path + "'");
  }
  std::string home = config.home;
  auto kernel = EnsureKernel(home);
  if (!kernel.ok()) return kernel.status().WithContext("start vm box");
  auto initramfs = EnsureInitramfs(home, *kernel, config.agent_path);
  if (!initramfs.ok()) return initramfs.status().WithContext("start vm box: initramfs");
  auto disk = EnsureErofsDisk(home, config.image_tree);
  if (!disk.ok()) return disk.status().WithContext("start vm box: image disk");

  auto impl = std::make_unique<Impl>();
  impl->accel = accel;
  SweepStaleRunDirs(home + "/run");
  auto run_dir = MakeTempDir(home + "/run", "vm-");
  if (!run_dir.ok()) return run_dir.status().WithContext("start vm box");
  ::chmod(run_dir->c_str(), 0700);
  impl->run_dir = *run_dir;
  impl->console_log = impl->run_dir + "/console.log";
  impl->qemu_log = impl->run_dir + "/qemu.log";
  impl->limits = {
      "memory " + std::to_string(config.memory_mib) + " MiB (guest RAM)",
      "cpus " + std::to_string(config.cpus) + " (vCPUs)",
      "disk " + std::to_string(config.disk_mib) + " MiB (guest tmpfs overlay)",
      "network none (no network device)",
  };
  std::unique_ptr<Machine> machine(new Machine(std::move(impl)));
  Impl& m = *machine->impl_;

  QemuLaunch launch;
  launch.qemu = QemuBinary();
  launch.accel = accel;
  launch.kernel = kernel->vmlinuz;
  launch.initramfs = *initramfs;
  launch.disk = *disk;
  launch.console_log = m.console_log;
  launch.memory_mib = config.memory_mib;
  launch.cpus = config.cpus;
  launch.disk_mib = config.disk_mib;
  launch.tsc_khz = HostTscKhz();

  ASSIGN_OR_RETURN(auto agent_pair, base::SocketPair());
  ASSIGN_OR_RETURN(auto qmp_pair, base::SocketPair());
  base::UniqueFd log(::open(m.qemu_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!log.valid()) return base::ErrnoStatus("start vm box: open " + m.qemu_log);
  SpawnSpec spec;
  spec.argv = QemuArgv(launch);
  spec.fds = {{log.get(), 1},
              {log.get(), 2},
              {agent_pair.second.get(), kQemuAgentFd},
              {qmp_pair.second.get(), kQemuQmpFd}};
  spec.max_file_bytes = kMaxLogBytes;
  auto pid = Spawn(spec);
  if (!pid.ok()) return pid.status().WithContext("start vm box: qemu");
  m.pid = *pid;
  (void)base::WriteFile(m.run_dir + "/qemu.pid", std::to_string(m.pid) + "\n");
  m.agent_fd = std::move(agent_pair.first);
  m.qmp_fd = std::move(qmp_pair.first);
  CODEBOX_LOG(kDebug, "vm: started qemu pid " << m.pid << " in " << m.run_dir);

  // Ready = the agent's hello has arrived (it speaks first); the bytes stay queued for the
  // protocol client. QEMU's exit closes its socket end, which wakes the poll too.
  auto deadline = std::chrono::steady_clock::now() + config.start_timeout;
  for (;;) {
    struct pollfd p = {m.agent_fd.get(), POLLIN, 0};
    int rc = ::poll(&p, 1, 50);
    if (rc < 0 && errno != EINTR) return base::ErrnoStatus("start vm box: poll");
    char byte;
    bool readable = rc > 0 && ::recv(m.agent_fd.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
    if (readable) break;
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.ReapLocked(/*block=*/false)) {
      return StartFailed("vm box did not start: " + DescribeExit(m.wstatus) + m.Diagnostics());
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string diag = m.Diagnostics();
      (void)m.StopLocked();
      return StartFailed("vm box did not start: the agent was not ready within " +
                         std::to_string(config.start_timeout.count()) + " ms" + diag);
    }
  }
  return machine;
}

base::UniqueFd Machine::TakeAgentFd() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return std::move(impl_->agent_fd);
}

Status Machine::Destroy() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->destroyed) return Status::Ok();
  impl_->destroyed = true;
  Status st = impl_->StopLocked();
  impl_->saved_console = ReadTail(impl_->console_log, kConsoleKeepBytes);
  Status removed = RemoveTree(impl_->run_dir);
  return st.ok() ? removed.WithContext("destroy vm box") : st;
}

std::string Machine::driver_name() const {
  return impl_->accel == Accelerator::kKvm ? "vm/kvm" : "vm/tcg";
}

std::string Machine::ConsoleTail(size_t max_lines) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::string text =
      impl_->destroyed ? impl_->saved_console : ReadTail(impl_->console_log, kConsoleKeepBytes);
  return ConsoleExcerpt(text, max_lines);
}

bool Machine::Alive() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return !impl_->destroyed && !impl_->ReapLocked(/*block=*/false);
}

Status Machine::ExitStatus() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->destroyed) return BoxCrashed("vm box was destroyed");
  if (!impl_->ReapLocked(/*block=*/false)) return Status::Ok();
  return BoxCrashed("vm box ended: " + DescribeExit(impl_->wstatus) + impl_->Diagnostics());
}

const std::vector<std::string>& Machine::limits() const { return impl_->limits; }

int Machine::qemu_pid() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->pid;
}

}  // namespace codebox::vm
