// Machine: one QEMU microvm per box. Start prepares the cached artifacts, starts QEMU under its
// codebox-vm-keeper (keeper.h: QEMU dies with the owner process; scrubbed env, only its two
// sockets and log fds), and waits until the agent speaks; Destroy ends QEMU and removes the
// box's run directory.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
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
#include <thread>

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
#include "protocol/frame.h"
#include "protocol/message.h"
#include "protocol/messages.h"
#include "vm/qemu.h"
#include "vm/snapshot.h"
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

constexpr auto kKeeperReportTimeout = std::chrono::seconds(10);

}  // namespace

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

Machine::Machine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Machine::~Machine() { (void)Destroy(); }

namespace {

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

std::string Millis(std::chrono::steady_clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
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

Status Machine::RestoreState(std::chrono::milliseconds timeout, bool park) {
  Impl& m = *impl_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  Status st = QmpRun(m.qmp_fd.get(),
                     {R"({"execute":"qmp_capabilities"})", kQmpIgnoreShared,
                      R"({"execute":"migrate-incoming","arguments":{"uri":"fd:)" +
                          std::to_string(kQemuStateFd) + R"("}})"},
                     timeout)
                  .status();
  // {"status": "inmigrate"} until the state is in; then "paused", since the template was saved
  // stopped. A parked machine stays so; the others run now.
  if (st.ok()) st = WaitForStatus("paused", deadline);
  if (st.ok()) {
    m.parked = true;
    if (park) return Status::Ok();
    st = Resume(timeout);
    if (st.ok()) return Status::Ok();
  }
  std::lock_guard<std::mutex> lock(m.mu);
  std::string why = m.ReapLocked(/*block=*/true) ? m.DescribeEnd() : st.message();
  std::string diag = m.Diagnostics();
  (void)m.StopLocked();
  return StartFailed("restore: " + why + diag);
}

Status Machine::WaitForStatus(const std::string& status,
                              std::chrono::steady_clock::time_point deadline) {
  const std::string want = "\"status\": \"" + status + "\"";
  for (;;) {
    auto left = std::max(std::chrono::milliseconds(1),
                         std::chrono::ceil<std::chrono::milliseconds>(
                             deadline - std::chrono::steady_clock::now()));
    ASSIGN_OR_RETURN(std::string reply,
                     QmpRun(impl_->qmp_fd.get(), {R"({"execute":"query-status"})"}, left));
    if (reply.find(want) != std::string::npos) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceeded("the restored machine was not " + status + " in time (" +
                              base::TerminalSafe(reply, 200) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Status Machine::Resume(std::chrono::milliseconds timeout) {
  if (!impl_->parked) return Status::Ok();
  auto deadline = std::chrono::steady_clock::now() + timeout;
  RETURN_IF_ERROR(QmpRun(impl_->qmp_fd.get(), {R"({"execute":"cont"})"}, timeout).status());
  // The host's hello must not come before the guest runs: bytes the device took while its
  // state was still loading would be lost, and a paused guest answers nothing.
  RETURN_IF_ERROR(WaitForStatus("running", deadline));
  impl_->parked = false;
  return Status::Ok();
}

StatusOr<std::string> Machine::SaveState(const std::string& state_path,
                                         std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  // The template's host speaks to the agent (warm-up below); a clone's host gets a hello of its
  // own (GuestSetup::resend_hello).
  protocol::FrameDecoder decoder;
  auto next_frame = [&]() -> StatusOr<protocol::Frame> {
    for (;;) {
      auto frame = decoder.Next();
      if (!frame.ok()) return frame.status().WithContext("template: from the agent");
      if (frame->has_value()) return std::move(**frame);
      struct pollfd p = {m.agent_fd.get(), POLLIN, 0};
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                               std::chrono::steady_clock::now());
      if (left.count() <= 0) return DeadlineExceeded("template: the agent did not answer in time");
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(m.agent_fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) {
        return BoxCrashed("template: the agent's connection closed");
      }
      if (n > 0) decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  };
  // Waits for the event that ends `stream` (output frames on the way are dropped).
  auto terminal_event = [&](uint32_t stream) -> StatusOr<protocol::msg::Event> {
    for (;;) {
      ASSIGN_OR_RETURN(protocol::Frame frame, next_frame());
      if (frame.stream != stream || frame.type != protocol::FrameType::kControl) continue;
      return protocol::msg::DecodeEventPayload(frame.payload);
    }
  };
  ASSIGN_OR_RETURN(protocol::Frame hello, next_frame());
  if (hello.type != protocol::FrameType::kHello) {
    return ProtocolError("template: the agent did not begin with its hello");
  }
  protocol::msg::Hello ours;
  ours.protocol = protocol::kProtocolVersion;
  ours.client = "codebox/0.1.0 (template)";
  std::string out = protocol::EncodeFrame(protocol::FrameType::kHello, 0,
                                          protocol::msg::EncodeHello(ours));
  // Run Python once, so the template's page cache holds the interpreter and its standard
  // library: every clone's first Python then reads none of it from the disk (about 0.25 s of
  // a first run under tcg). An image without python3 just fails the exec; nothing else runs.
  // No process outlives it, and none keeps random state (the clone's RNG is reseeded anyway).
  protocol::msg::Exec warm;
  warm.argv = {"python3", "-c", "import json, os, re, subprocess"};
  warm.env = {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
              {"HOME", "/root"},
              {"LANG", "C.UTF-8"}};
  warm.timeout_ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  warm.output_limit = 4096;
  out += protocol::EncodeFrame(protocol::FrameType::kControl, 1, protocol::msg::EncodeRequest(warm));
  RETURN_IF_ERROR(base::WriteAll(m.agent_fd.get(), out).WithContext("template: warm-up"));
  ASSIGN_OR_RETURN(protocol::msg::Event warmed, terminal_event(1));
  if (!std::holds_alternative<protocol::msg::Exit>(warmed)) {
    CODEBOX_LOG(kInfo, "vm: template without a warm Python (the image has none?)");
  }
  RETURN_IF_ERROR(base::WriteAll(m.agent_fd.get(),
                                 protocol::EncodeFrame(protocol::FrameType::kControl, 3,
                                                       protocol::msg::EncodeRequest(
                                                           protocol::msg::AwaitHello{})))
                      .WithContext("template: await_hello"));
  ASSIGN_OR_RETURN(protocol::msg::Event waiting, terminal_event(3));
  if (!std::holds_alternative<protocol::msg::Done>(waiting)) {
    return ProtocolError("template: the agent refused to wait for a new hello");
  }
  if (decoder.HasPartialFrame()) return ProtocolError("template: the agent sent more than asked");
  base::UniqueFd state(::open(state_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!state.valid()) return base::ErrnoStatus("template: open " + state_path);
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                                  std::chrono::steady_clock::now()));
  };
  RETURN_IF_ERROR(QmpRun(m.qmp_fd.get(),
                         {R"({"execute":"qmp_capabilities"})", R"({"execute":"stop"})",
                          kQmpIgnoreShared},
                         left())
                      .status()
                      .WithContext("template: stop"));
  RETURN_IF_ERROR(QmpRun(m.qmp_fd.get(),
                         {R"({"execute":"getfd","arguments":{"fdname":"state"}})"}, left(),
                         {state.get()})
                      .status()
                      .WithContext("template: pass the state file"));
  RETURN_IF_ERROR(
      QmpRun(m.qmp_fd.get(), {R"({"execute":"migrate","arguments":{"uri":"fd:state"}})"}, left())
          .status()
          .WithContext("template: save"));
  for (;;) {
    ASSIGN_OR_RETURN(std::string reply,
                     QmpRun(m.qmp_fd.get(), {R"({"execute":"query-migrate"})"}, left()));
    if (reply.find("\"completed\"") != std::string::npos) return reply;
    if (reply.find("\"failed\"") != std::string::npos) {
      return Internal("template: QEMU could not save the machine: " +
                      base::TerminalSafe(reply, 300));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceeded("template: saving took longer than " +
                              std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

namespace {

// Holds <root>/<key>.lock: one process makes a template, the others wait and then use it.
class TemplateLock {
 public:
  static StatusOr<TemplateLock> Take(const std::string& key, std::chrono::milliseconds timeout) {
    std::string root = TemplateRoot();
    ::mkdir(root.c_str(), 0700);
    std::string path = root + "/" + key + ".lock";
    base::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!fd.valid()) return base::ErrnoStatus("template: open " + path);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) return base::ErrnoStatus("template: lock " + path);
      if (std::chrono::steady_clock::now() >= deadline) {
        return DeadlineExceeded("template: another process has been making " + key + " for " +
                                std::to_string(timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return TemplateLock(std::move(fd));
  }

 private:
  explicit TemplateLock(base::UniqueFd fd) : fd_(std::move(fd)) {}
  base::UniqueFd fd_;  // closing it unlocks
};

}  // namespace

StatusOr<TemplateInfo> Machine::MakeTemplate(const VmConfig& config, const QemuLaunch& launch,
                                             const std::string& key) {
  ASSIGN_OR_RETURN(TemplateLock lock, TemplateLock::Take(key, config.start_timeout));
  auto found = FindTemplate(key);
  if (found.ok() || found.status().code() != StatusCode::kNotFound) return found;
  PruneTemplates();
  auto started = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::string dir, base::MakeTempDir(TemplateRoot(), ".making-" + key + "-"));
  QemuLaunch shared = launch;
  shared.memory_file = dir + "/memory";
  shared.share_memory = true;
  auto made = [&]() -> Status {
    ASSIGN_OR_RETURN(auto machine, Launch(config, shared, -1));
    RETURN_IF_ERROR(machine->WaitForAgent(config.start_timeout));
    RETURN_IF_ERROR(machine->SaveState(dir + "/state", config.start_timeout).status());
    return machine->Destroy();
  }();
  if (!made.ok()) {
    (void)base::RemoveTree(dir);
    return made.WithContext("make vm template");
  }
  TemplateInfo info;
  info.key = key;
  info.home = config.home;
  info.image_tree = config.image_tree;
  info.accel = launch.accel == Accelerator::kKvm ? "kvm" : "tcg";
  info.memory_mib = config.memory_mib;
  info.cpus = config.cpus;
  info.disk_mib = config.disk_mib;
  RETURN_IF_ERROR(CommitTemplate(dir, info).WithContext("make vm template"));
  auto made_info = FindTemplate(key);
  CODEBOX_LOG(kInfo, "vm: made template " << key << " for " << config.image_tree << " in "
                                          << Millis(std::chrono::steady_clock::now() - started)
                                          << " (state "
                                          << (made_info.ok() ? made_info->state_bytes : 0)
                                          << " bytes)");
  return made_info;
}

StatusOr<std::unique_ptr<Machine>> Machine::Restore(const VmConfig& config,
                                                    const QemuLaunch& launch, bool park) {
  ASSIGN_OR_RETURN(std::string key, TemplateKey(launch));
  auto found = FindTemplate(key);
  if (!found.ok() && found.status().code() == StatusCode::kNotFound) {
    found = MakeTemplate(config, launch, key);
  } else if (!found.ok()) {
    // Damaged: gone, so that the next box makes it anew; this one boots.
    (void)RemoveTemplate(key);
  }
  if (!found.ok()) return found.status();
  std::string state_path = found->dir + "/state";
  base::UniqueFd state(::open(state_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!state.valid()) return base::ErrnoStatus("restore: open " + state_path);
  QemuLaunch clone = launch;
  clone.memory_file = found->dir + "/memory";
  clone.share_memory = false;
  clone.incoming = true;
  ASSIGN_OR_RETURN(auto machine, Launch(config, clone, state.get()));
  state.reset();
  Status restored = machine->RestoreState(config.start_timeout, park);
  if (!restored.ok()) {
    // A template QEMU cannot load is no use to the next box either.
    (void)RemoveTemplate(key);
    return restored;
  }
  machine->impl_->template_key = key;
  TouchTemplate(*found);
  return machine;
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
