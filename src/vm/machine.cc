// Machine: one QEMU microvm per box. Start prepares the cached artifacts, starts QEMU under its
// codebox-vm-keeper (keeper.h: QEMU dies with the owner process; scrubbed env, only its two
// sockets and log fds), and waits until the agent speaks; Destroy ends QEMU and removes the
// box's run directory.
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

#include "base/fs.h"
#include "base/io.h"
#include "base/log.h"
#include "base/owner.h"
#include "base/paths.h"
#include "base/subprocess.h"
#include "base/text.h"
#include "vm/accel.h"
#include "vm/disk.h"
#include "vm/initramfs.h"
#include "vm/keeper.h"
#include "vm/kernel.h"
#include "vm/machine_impl.h"
#include "vm/qemu.h"
#include "vm/vm.h"

namespace codebox::vm {

Machine::Machine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Machine::~Machine() { (void)Destroy(); }

namespace {

constexpr auto kKeeperReportTimeout = std::chrono::seconds(10);

// Everything a machine of `config` is made of, prepared (cached) once: the QEMU arguments but
// the per-box paths.
StatusOr<QemuLaunch> PrepareLaunch(const VmConfig& config, Accelerator accel) {
  if (config.memory_mib < 128) return InvalidArgument("vm driver: memory below 128 MiB");
  if (config.cpus < 1) return InvalidArgument("vm driver: cpus must be at least 1");
  if (config.disk_mib < 1) return InvalidArgument("vm driver: disk must be at least 1 MiB");
  if (::access(config.agent_path.c_str(), R_OK) != 0) {
    return NotFound("vm driver: codebox-agent not found at '" + config.agent_path + "'");
  }
  auto kernel = EnsureKernel(config.home);
  if (!kernel.ok()) return kernel.status().WithContext("start vm box");
  auto initramfs = EnsureInitramfs(config.home, *kernel, config.agent_path);
  if (!initramfs.ok()) return initramfs.status().WithContext("start vm box: initramfs");
  auto disk = EnsureErofsDisk(config.home, config.image_tree);
  if (!disk.ok()) return disk.status().WithContext("start vm box: image disk");
  QemuLaunch launch;
  launch.qemu = QemuBinary();
  if (!launch.qemu.empty() && launch.qemu[0] != '/') {
    char* abs = ::realpath(launch.qemu.c_str(), nullptr);
    launch.qemu = abs != nullptr ? abs : "";
    std::free(abs);
  }
  if (launch.qemu.empty()) return NotFound("start vm box: qemu-system-x86_64 not found");
  launch.accel = accel;
  launch.kernel = kernel->vmlinuz;
  launch.initramfs = *initramfs;
  launch.disk = *disk;
  launch.memory_mib = config.memory_mib;
  launch.cpus = config.cpus;
  launch.disk_mib = config.disk_mib;
  launch.tsc_khz = HostTscKhz();
  return launch;
}

}  // namespace

StatusOr<std::unique_ptr<Machine>> Machine::Launch(const VmConfig& config, QemuLaunch launch,
                                                   int state_fd) {
  auto impl = std::make_unique<Impl>();
  impl->accel = launch.accel;
  std::string keeper_path = base::FindHelperBinary("codebox-vm-keeper");
  if (keeper_path.empty()) {
    return NotFound("start vm box: " + base::HelperNotFoundMessage("codebox-vm-keeper"));
  }
  // The owner tag in the name lets `codebox gc` tell a dead owner's run dir
  // (base/owner.h).
  auto run_dir = base::MakeTempDir(config.home + "/run", "vm-" + base::OwnerTag() + "-");
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
  launch.console_log = m.console_log;

  ASSIGN_OR_RETURN(auto agent_pair, base::SocketPair());
  ASSIGN_OR_RETURN(auto qmp_pair, base::SocketPair());
  ASSIGN_OR_RETURN(auto keeper_pair, base::SocketPair());
  base::UniqueFd log(::open(m.qemu_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!log.valid()) return base::ErrnoStatus("start vm box: open " + m.qemu_log);
  base::Command keeper_command(
      {keeper_path, "--parent", std::to_string(::getpid()), "--run-dir", m.run_dir, "--"});
  for (auto& arg : QemuArgv(launch)) keeper_command.argv.push_back(std::move(arg));
  keeper_command.fds = {{log.get(), 1},
                        {log.get(), 2},
                        {agent_pair.second.get(), kQemuAgentFd},
                        {qmp_pair.second.get(), kQemuQmpFd},
                        {keeper_pair.second.get(), kKeeperStatusFd}};
  if (state_fd >= 0) keeper_command.fds.push_back({state_fd, kQemuStateFd});
  keeper_command.max_file_bytes = kMaxLogBytes;  // passed on to QEMU
  // A template machine's QEMU sizes its RAM file (and runs only the agent, never a box's code).
  if (launch.share_memory) keeper_command.max_file_bytes += launch.memory_mib << 20;
  auto keeper = base::Spawn(keeper_command);
  if (!keeper.ok()) return keeper.status().WithContext("start vm box: codebox-vm-keeper");
  m.keeper = *keeper;
  m.keeper_fd = std::move(keeper_pair.first);
  keeper_pair.second.reset();
  agent_pair.second.reset();
  qmp_pair.second.reset();
  m.agent_fd = std::move(agent_pair.first);
  m.qmp_fd = std::move(qmp_pair.first);
  {
    std::lock_guard<std::mutex> lock(m.mu);
    auto deadline = std::chrono::steady_clock::now() + kKeeperReportTimeout;
    while (m.pid < 0 && !m.ended && std::chrono::steady_clock::now() < deadline) {
      m.PumpKeeperLocked(std::chrono::milliseconds(100));
    }
    if (m.ended) return StartFailed("vm box did not start: " + m.DescribeEnd() + m.Diagnostics());
    if (m.pid < 0) return StartFailed("vm box did not start: codebox-vm-keeper did not report");
  }
  CODEBOX_LOG(kDebug,
              "vm: started qemu pid " << m.pid << " (keeper " << m.keeper << ") in " << m.run_dir);
  return machine;
}

Status Machine::WaitForAgent(std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  // Ready = the agent's hello has arrived (it speaks first); the bytes stay queued for the
  // protocol client. QEMU's exit closes its socket end, which wakes the poll too.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    struct pollfd p = {m.agent_fd.get(), POLLIN, 0};
    int rc = ::poll(&p, 1, 50);
    if (rc < 0 && errno != EINTR) return base::ErrnoStatus("start vm box: poll");
    char byte;
    bool readable = rc > 0 && ::recv(m.agent_fd.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
    if (readable) return Status::Ok();
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.ReapLocked(/*block=*/false)) {
      return StartFailed("vm box did not start: " + m.DescribeEnd() + m.Diagnostics());
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string diag = m.Diagnostics();
      (void)m.StopLocked();
      return StartFailed("vm box did not start: the agent was not ready within " +
                         std::to_string(timeout.count()) + " ms" + diag);
    }
  }
}

StatusOr<std::unique_ptr<Machine>> Machine::Start(const VmConfig& config) {
  return StartMachine(config, /*park=*/false);
}

StatusOr<std::unique_ptr<Machine>> Machine::StartParked(const VmConfig& config) {
  return StartMachine(config, /*park=*/true);
}

StatusOr<std::unique_ptr<Machine>> Machine::StartMachine(const VmConfig& config, bool park) {
  ASSIGN_OR_RETURN(Accelerator accel, ChooseAccelerator(config.allow_emulation));
  ASSIGN_OR_RETURN(QemuLaunch launch, PrepareLaunch(config, accel));
  std::string warning;
  if (config.snapshot) {
    auto started = std::chrono::steady_clock::now();
    auto restored = Restore(config, launch, park);
    if (restored.ok()) {
      CODEBOX_LOG(kDebug, "vm: restored from template " << (*restored)->impl_->template_key
                                                        << " in "
                                                        << Millis(std::chrono::steady_clock::now() -
                                                                  started));
      return restored;
    }
    if (!config.snapshot_fallback) {
      return Status(restored.status().code(),
                    "vm box: no restore from a template (" + restored.status().message() +
                        "), and --no-fallback forbids a cold boot");
    }
    warning = "started by a cold boot: restoring from a template failed: " +
              base::TailLines(restored.status().message(), 3);
    CODEBOX_LOG(kWarn, "vm: " << warning);
  }
  ASSIGN_OR_RETURN(auto machine, Launch(config, launch, -1));
  RETURN_IF_ERROR(machine->WaitForAgent(config.start_timeout));
  machine->impl_->warning = std::move(warning);
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
  Status removed = base::RemoveTree(impl_->run_dir);
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

const std::vector<std::string>& Machine::limits() const { return impl_->limits; }

const std::string& Machine::template_key() const { return impl_->template_key; }
const std::string& Machine::warning() const { return impl_->warning; }

int Machine::qemu_pid() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->pid;
}

}  // namespace codebox::vm
