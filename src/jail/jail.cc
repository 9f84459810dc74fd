// The library side of the jail driver: validates the config, plans the paths it must be able
// to clean up alone, spawns codebox-jail (base/subprocess.h: safe in a multithreaded caller),
// and talks to it over the control socket.
#include "jail/jail.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>

#include "base/io.h"
#include "base/log.h"
#include "base/owner.h"
#include "base/paths.h"
#include "base/subprocess.h"
#include "jail/agent_image.h"
#include "jail/cgroups.h"
#include "jail/control.h"
#include "jail/mounts.h"

namespace codebox::jail {
namespace {

using base::ErrnoStatus;
using base::UniqueFd;

constexpr auto kStartTimeout = std::chrono::seconds(20);
constexpr auto kDestroyTimeout = std::chrono::seconds(5);

// "<pid>-<start>-<n>-<random>": the owner tag lets `codebox gc` and the next process tell a
// dead owner's leftovers (staging dir, cgroups) from a live one's (base/owner.h).
std::string NewId() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  char buf[64];
  std::snprintf(buf, sizeof buf, "-%llu-%08x",
                static_cast<unsigned long long>(counter.fetch_add(1)), rd());
  return base::OwnerTag() + buf;
}

}  // namespace

bool CanMapUser() { return ::geteuid() == 0; }

std::string StagingParentPath() {
  return ::geteuid() == 0 ? "/run/codebox-jail"
                          : "/tmp/codebox-jail-" + std::to_string(::geteuid());
}

namespace {

// Where staging directories go: a directory only we can write (it holds mount points).
StatusOr<std::string> StagingParent() {
  std::string dir = StagingParentPath();
  // 0711: box root (an unprivileged id on the host) must traverse it to mount on its child.
  if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + dir);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return ErrnoStatus("stat " + dir);
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    return PermissionDenied(dir + " is not a directory owned by us (refusing to use it)");
  }
  if ((st.st_mode & 0777) != 0711 && ::chmod(dir.c_str(), 0711) != 0) {
    return ErrnoStatus("chmod " + dir);
  }
  return dir;
}

Status Validate(const JailConfig& c) {
  for (const std::string* s : {&c.rootfs, &c.agent_path, &c.workdir, &c.hostname}) {
    if (s->find('\n') != std::string::npos || s->find('\0') != std::string::npos) {
      return InvalidArgument("jail config: newline or NUL in '" + *s + "'");
    }
  }
  struct stat st {};
  if (c.rootfs.empty() || c.rootfs[0] != '/' || ::stat(c.rootfs.c_str(), &st) != 0 ||
      !S_ISDIR(st.st_mode)) {
    return NotFound("jail: image rootfs '" + c.rootfs + "' is not a directory (absolute path)");
  }
  if (c.agent_path.empty() || c.agent_path[0] != '/' || ::access(c.agent_path.c_str(), X_OK)) {
    return NotFound("jail: agent binary '" + c.agent_path +
                    "' is not an executable (absolute path)");
  }
  RETURN_IF_ERROR(mounts::ValidateWorkdir(c.workdir));
  if (c.hostname.empty() || c.hostname.size() > 64) {
    return InvalidArgument("jail: hostname must have 1-64 characters");
  }
  if (c.memory_bytes < (8ull << 20)) return InvalidArgument("jail: memory below 8 MiB");
  if (c.disk_bytes < (1ull << 20)) return InvalidArgument("jail: disk below 1 MiB");
  if (c.max_processes < 2) return InvalidArgument("jail: max_processes below 2");
  if (c.max_open_files < 16) return InvalidArgument("jail: max_open_files below 16");
  if (!(c.cpus > 0.0) || c.cpus > 4096) return InvalidArgument("jail: cpus out of range");
  if (c.user && !CanMapUser()) {
    return InvalidArgument("jail: a user besides root (" + std::to_string(c.user->uid) + ":" +
                           std::to_string(c.user->gid) +
                           ") needs root on the host: only one id can be mapped otherwise");
  }
  if (c.user && (c.user->uid > 0xfffffffe || c.user->gid > 0xfffffffe)) {
    return InvalidArgument("jail: user ids are at most 4294967294");
  }
  return Status::Ok();
}

constexpr auto kProbeTimeout = std::chrono::seconds(30);

// codebox-jail with fds 3-5 as given (-1: none), stdin /dev/null, our stderr for its
// diagnostics, an empty environment, and its own session: a ^C meant for the caller's process
// group does not skip the caller's cleanup.
base::Command SupervisorCommand(const std::string& binary, const std::vector<std::string>& args,
                                int agent_fd, int control_fd, int agent_image_fd) {
  base::Command command({"codebox-jail"});
  command.argv.insert(command.argv.end(), args.begin(), args.end());
  command.program = binary;
  command.env.clear();
  for (auto [fd, target] :
       {std::pair{agent_fd, kSupervisorAgentFd}, std::pair{control_fd, kSupervisorControlFd},
        std::pair{agent_image_fd, kSupervisorAgentImageFd}}) {
    if (fd >= 0) command.fds.emplace_back(fd, target);
  }
  if (::fcntl(STDERR_FILENO, F_GETFD) >= 0) command.fds.emplace_back(STDERR_FILENO, STDERR_FILENO);
  command.new_session = true;
  return command;
}

// Waits for `pid` (whose pidfd we hold) up to `timeout`, then SIGKILLs it. Reaps it unless
// the caller reaps children itself (SIGCHLD ignored: ECHILD).
void WaitOrKill(pid_t pid, int pidfd, std::chrono::milliseconds timeout) {
  pollfd pfd{pidfd, POLLIN, 0};
  int r;
  do {
    r = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
  } while (r < 0 && errno == EINTR);
  if (r <= 0) ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

class Jail::Impl {
 public:
  UniqueFd agent_fd;
  UniqueFd control;
  UniqueFd pidfd;  // the supervisor's: immune to pid reuse
  pid_t supervisor = -1;
  cgroups::Plan cgroups;
  std::string staging_dir;
  std::vector<std::string> limits, not_enforced;
  mutable std::mutex mu;
  mutable uint64_t last_oom = 0;
  bool destroyed = false;

  Status DestroyLocked() {
    if (destroyed) return Status::Ok();
    destroyed = true;
    Status result;
    if (supervisor > 0) {
      if (control.valid()) (void)SendPacket(control.get(), "destroy\n");
      WaitOrKill(supervisor, pidfd.get(), kDestroyTimeout);
      supervisor = -1;
    }
    last_oom = std::max(last_oom, cgroups::OomKillCount(cgroups));
    // The supervisor removes these itself; this is for a supervisor that was SIGKILLed.
    Status cg = cgroups::KillAndRemove(cgroups);
    if (!cg.ok()) result = cg.WithContext("destroy jail");
    if (!staging_dir.empty() && ::rmdir(staging_dir.c_str()) != 0 && errno != ENOENT &&
        result.ok()) {
      result = ErrnoStatus("destroy jail: remove " + staging_dir);
    }
    control.reset();
    pidfd.reset();
    agent_fd.reset();
    return result;
  }
};

StatusOr<std::unique_ptr<Jail>> Jail::Start(const JailConfig& config) {
  RETURN_IF_ERROR(Validate(config).WithContext("start jail"));
  std::string helper = base::FindHelperBinary("codebox-jail");
  if (helper.empty()) {
    return NotFound("start jail: " + base::HelperNotFoundMessage("codebox-jail"));
  }
  auto impl = std::make_unique<Impl>();
  std::string id = NewId();
  ASSIGN_OR_RETURN(std::string parent, StagingParent());
  impl->staging_dir = parent + "/" + id;
  if (::mkdir(impl->staging_dir.c_str(), 0700) != 0) {
    return ErrnoStatus("start jail: mkdir " + impl->staging_dir);
  }
  impl->cgroups = cgroups::MakePlan(id);
  std::unique_ptr<Jail> jail(new Jail(std::move(impl)));
  Impl& j = *jail->impl_;

  SupervisorConfig sc;
  sc.jail = config;
  sc.id = id;
  sc.staging_dir = j.staging_dir;
  sc.cgroup_version = j.cgroups.version;
  sc.cgroup_dirs = cgroups::EncodeDirs(j.cgroups);

  ASSIGN_OR_RETURN(auto agent_pair, base::SocketPair());
  ASSIGN_OR_RETURN(auto control_pair, SeqPacketPair());
  ASSIGN_OR_RETURN(int shared_image, SharedAgentImage(config.agent_path));
  ASSIGN_OR_RETURN(j.supervisor,
                   base::Spawn(SupervisorCommand(helper, {"--parent", std::to_string(::getpid())},
                                                 agent_pair.second.get(), control_pair.second.get(),
                                                 shared_image)));
  j.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, j.supervisor, 0)));
  if (!j.pidfd.valid()) {
    Status st = ErrnoStatus("start jail: pidfd_open");
    ::kill(j.supervisor, SIGKILL);
    ::waitpid(j.supervisor, nullptr, 0);
    j.supervisor = -1;
    return st;
  }
  agent_pair.second.reset();
  control_pair.second.reset();
  j.control = std::move(control_pair.first);
  j.agent_fd = std::move(agent_pair.first);

  RETURN_IF_ERROR(SendPacket(j.control.get(), EncodeConfig(sc)).WithContext("start jail"));
  auto answer = RecvPacket(j.control.get(), kStartTimeout);
  if (!answer.ok()) {
    return StartFailed("start jail: supervisor did not report: " + answer.status().message());
  }
  ASSIGN_OR_RETURN(ReadyMessage ready, DecodeReady(*answer));
  if (!ready.ok) return StartFailed("start jail: " + ready.error);
  j.limits = std::move(ready.limits);
  j.not_enforced = std::move(ready.limits_not_enforced);
  CODEBOX_LOG(kDebug, "jail " << id << " up: agent pid " << ready.box_pid);
  return jail;
}

Jail::Jail(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Jail::~Jail() {
  if (impl_) (void)Destroy();
}

base::UniqueFd Jail::TakeAgentFd() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return std::move(impl_->agent_fd);
}

Status Jail::Destroy() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->DestroyLocked();
}

uint64_t Jail::OomKillCount() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->destroyed) {
    impl_->last_oom = std::max(impl_->last_oom, cgroups::OomKillCount(impl_->cgroups));
  }
  return impl_->last_oom;
}

StatusOr<Usage> Jail::Usage() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->destroyed) return FailedPrecondition("the jail was destroyed");
  std::optional<jail::Usage> used = cgroups::ReadUsage(impl_->cgroups);
  if (!used) {
    return Unavailable("this jail has no memory and cpu cgroup to measure its usage");
  }
  return *used;
}

const std::vector<std::string>& Jail::limits() const { return impl_->limits; }
const std::vector<std::string>& Jail::limits_not_enforced() const { return impl_->not_enforced; }

Status ProbeJailSupport() {
  std::string helper = base::FindHelperBinary("codebox-jail");
  if (helper.empty()) return Unavailable("jail: codebox-jail helper not found");
  if (auto max = base::ReadFile("/proc/sys/user/max_user_namespaces");
      max.ok() && std::atoi(max->c_str()) == 0) {
    return Unavailable("jail: user namespaces are disabled (user.max_user_namespaces = 0)");
  }
  if (::geteuid() != 0) {
    if (auto v = base::ReadFile("/proc/sys/kernel/unprivileged_userns_clone");
        v.ok() && std::atoi(v->c_str()) == 0) {
      return Unavailable(
          "jail: unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)");
    }
    if (auto v = base::ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
        v.ok() && std::atoi(v->c_str()) != 0) {
      return Unavailable(
          "jail: AppArmor restricts unprivileged user namespaces "
          "(kernel.apparmor_restrict_unprivileged_userns = 1)");
    }
  }
  // The real test: the helper tries the namespaces and mounts in a child of its own.
  base::RunOptions options;
  options.timeout = kProbeTimeout;
  options.max_output_bytes = 4096;
  ASSIGN_OR_RETURN(base::RunResult probe,
                   base::Run(SupervisorCommand(helper, {"--probe"}, -1, -1, -1), options));
  std::string text = probe.out;
  if (probe.timed_out) return Unavailable("jail: codebox-jail --probe " + probe.Describe());
  if (text.starts_with("ok")) return Status::Ok();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (text.starts_with("error ")) text = text.substr(6);
  return Unavailable("jail: " + (text.empty() ? std::string("probe failed") : text));
}

}  // namespace codebox::jail
