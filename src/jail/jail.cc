// The library side of the jail driver: validates the config, plans the paths it must be able
// to clean up alone, spawns codebox-jail (posix_spawn: no code of ours runs between fork and
// exec in a possibly multithreaded caller), and talks to it over the control socket.
#include "jail/jail.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
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

std::string StagingParentPath() {
  return ::geteuid() == 0 ? "/run/codebox-jail" : "/tmp/codebox-jail-" + std::to_string(::geteuid());
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
  return Status::Ok();
}

// fds 3, 4 and 5 of the child are assigned with dup2; a source already sitting on one of them
// would be clobbered by another dup2, so each is moved above them first.
StatusOr<UniqueFd> DupHigh(int fd) {
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  if (high < 0) return ErrnoStatus("dup");
  return UniqueFd(high);
}

StatusOr<pid_t> Spawn(const std::string& binary, const std::vector<std::string>& args, int agent_fd,
                      int control_fd, int agent_image_fd, int stdout_fd) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  if (agent_fd >= 0) posix_spawn_file_actions_adddup2(&fa, agent_fd, kSupervisorAgentFd);
  if (control_fd >= 0) posix_spawn_file_actions_adddup2(&fa, control_fd, kSupervisorControlFd);
  if (agent_image_fd >= 0) {
    posix_spawn_file_actions_adddup2(&fa, agent_image_fd, kSupervisorAgentImageFd);
  }
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(&fa, stdout_fd, 1);
  } else {
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  }
  // stderr stays the caller's, for diagnostics; every other fd of the caller is closed.
  posix_spawn_file_actions_addclosefrom_np(&fa, kSupervisorAgentImageFd + 1);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  // Own session: a ^C meant for the caller's process group does not skip the caller's cleanup.
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>("codebox-jail"));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char* envp[] = {nullptr};  // nothing of the caller's environment
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, binary.c_str(), &fa, &attr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return ErrnoStatus("spawn " + binary, rc);
  return pid;
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
  ASSIGN_OR_RETURN(UniqueFd box_agent, DupHigh(agent_pair.second.get()));
  ASSIGN_OR_RETURN(UniqueFd sup_control, DupHigh(control_pair.second.get()));
  ASSIGN_OR_RETURN(int shared_image, SharedAgentImage(config.agent_path));
  ASSIGN_OR_RETURN(UniqueFd agent_image, DupHigh(shared_image));
  agent_pair.second.reset();
  control_pair.second.reset();
  ASSIGN_OR_RETURN(j.supervisor, Spawn(helper, {"--parent", std::to_string(::getpid())},
                                       box_agent.get(), sup_control.get(), agent_image.get(),
                                       -1));
  j.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, j.supervisor, 0)));
  if (!j.pidfd.valid()) {
    Status st = ErrnoStatus("start jail: pidfd_open");
    ::kill(j.supervisor, SIGKILL);
    ::waitpid(j.supervisor, nullptr, 0);
    j.supervisor = -1;
    return st;
  }
  box_agent.reset();
  sup_control.reset();
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
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("jail probe: pipe");
  UniqueFd rd(fds[0]), wr(fds[1]);
  ASSIGN_OR_RETURN(UniqueFd out, DupHigh(wr.get()));
  wr.reset();
  ASSIGN_OR_RETURN(pid_t pid, Spawn(helper, {"--probe"}, -1, -1, -1, out.get()));
  out.reset();
  std::string text;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(rd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (text.starts_with("ok")) return Status::Ok();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (text.starts_with("error ")) text = text.substr(6);
  return Unavailable("jail: " + (text.empty() ? std::string("probe failed") : text));
}

}  // namespace codebox::jail
