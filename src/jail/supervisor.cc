#include "jail/supervisor.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "base/io.h"
#include "jail/cgroups.h"
#include "jail/control.h"
#include "jail/log_relay.h"
#include "jail/mounts.h"
#include "jail/namespaces.h"
#include "jail/privileges.h"
#include "jail/rlimits.h"
#include "jail/seccomp_filter.h"

namespace codebox::jail::supervisor {
namespace {

using base::ErrnoStatus;
using base::UniqueFd;

constexpr size_t kMaxRelayedLog = 1 << 20;  // agent stderr passed on, then dropped

struct Pipe {
  UniqueFd read, write;
};

StatusOr<Pipe> MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// The child reports a failed step as text on a CLOEXEC pipe; a successful execve closes the
// pipe with nothing written.
[[noreturn]] void ChildFail(int err_fd, const Status& st) {
  std::string m = st.message();
  (void)!::write(err_fd, m.data(), m.size());
  ::_exit(127);
}

// Waits for the parent's go (id maps written, cgroups joined). EOF means the parent died.
void WaitForGo(int go_fd) {
  char b;
  ssize_t n;
  do {
    n = ::read(go_fd, &b, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) ::_exit(126);
}

void ResetSignals() {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Ignored dispositions survive execve; the agent must start with defaults.
  ::signal(SIGPIPE, SIG_DFL);
}

// The child: becomes PID 1 of the box, builds its world, drops everything, execs the agent.
[[noreturn]] void ChildMain(const SupervisorConfig& c, const rlimits::Plan& rl, int go_fd,
                            int err_fd, int log_fd) {
  // Our parent is the single-threaded supervisor, so this really is "the supervisor died".
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ResetSignals();
  WaitForGo(go_fd);  // the id maps are written
  auto step = [&](const Status& st, const char* what) {
    if (!st.ok()) ChildFail(err_fd, st.WithContext(what));
  };
  step(privileges::BecomeBoxRoot(c.jail.user), "become box root");
  // Changing our uid cleared the parent-death signal (the kernel does so on every credential
  // change): set it again, or a SIGKILLed supervisor would leave the box running.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  step(ns::SetHostname(c.jail.hostname), "uts namespace");
  step(ns::BringUpLoopback(), "network namespace");
  step(mounts::BuildRootAndPivot(c), "build root");
  step(rlimits::Apply(rl), "rlimits");
  // The parent moves us into the box's cgroups while we built the root (a cgroup v1 move
  // waits ~10 ms for an RCU grace period); nothing of the box runs before it is done.
  WaitForGo(go_fd);
  ::close(go_fd);
  // Now that we are in the box's cgroups, they become our cgroup root.
  if (::unshare(CLONE_NEWCGROUP) != 0) ChildFail(err_fd, ErrnoStatus("cgroup namespace"));
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(null_fd, 1) < 0 || ::dup2(log_fd, 2) < 0) {
    ChildFail(err_fd, ErrnoStatus("stdio"));
  }
  // The agent gets 0-2 and its socket (3); everything else closes at execve.
  if (::syscall(SYS_close_range, 4u, ~0u, CLOSE_RANGE_CLOEXEC) != 0) {
    ChildFail(err_fd, ErrnoStatus("close_range"));
  }
  step(privileges::DropAll(), "drop privileges");
  step(seccomp::Install(), "seccomp");
  if (c.jail.user) step(privileges::HandUserToAgent(*c.jail.user), "box user");
  std::string fd = std::to_string(kAgentFd);
  char* argv[] = {const_cast<char*>("codebox-agent"), const_cast<char*>("--fd"), fd.data(),
                  nullptr};
  char* envp[] = {const_cast<char*>("PATH=/usr/local/bin:/usr/bin:/bin"), nullptr};
  // The library's sealed, execute-only memfd copy of the agent (agent_image.h): no mount in
  // the box names its host path, and nothing can change the bytes PID 1 runs.
  ::syscall(SYS_execveat, kSupervisorAgentImageFd, "", argv, envp, AT_EMPTY_PATH);
  ChildFail(err_fd, ErrnoStatus("exec agent"));
}

struct Box {
  pid_t pid = -1;
  cgroups::Plan cgroups;
  UniqueFd log;  // read end of the agent's stderr
};

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

Status StartBox(const SupervisorConfig& c, Box* box, ReadyMessage* ready) {
  ns::HostIds ids = ns::ChooseHostIds(c.jail.user);
  // Supplementary groups survive into a user namespace and, with setgroups denied, could
  // never be dropped there: root's group 0 must not follow box root.
  if (::geteuid() == 0 && ::setgroups(0, nullptr) != 0) {
    return ErrnoStatus("drop supplementary groups");
  }
  box->cgroups = cgroups::DecodeDirs(c.cgroup_version, c.cgroup_dirs);
  cgroups::Applied applied = cgroups::Create(box->cgroups, c.jail);
  rlimits::Plan rl = rlimits::MakePlan(c.jail, applied.memory, applied.pids);
  ready->limits = applied.limits;
  ready->limits.push_back("disk " + std::to_string(c.jail.disk_bytes >> 20) +
                          " MiB (tmpfs size; /tmp, /var/tmp, /root, /data, " + c.jail.workdir +
                          ", /dev/shm share it)");
  for (const auto& d : rl.descriptions) ready->limits.push_back(d);
  ready->limits.push_back("network: none (loopback only, own network namespace)");
  ready->limits_not_enforced = applied.not_enforced;
  if (!applied.memory) {
    ready->limits_not_enforced.push_back(
        "memory: no memory cgroup, so no limit on the box's total memory (only RLIMIT_AS per "
        "process) and no OOM accounting");
  }
  if (!applied.cpu) ready->limits_not_enforced.push_back("cpu share: no cpu cgroup");

  ASSIGN_OR_RETURN(Pipe go, MakePipe());
  ASSIGN_OR_RETURN(Pipe err, MakePipe());
  ASSIGN_OR_RETURN(Pipe log, MakePipe());
  ASSIGN_OR_RETURN(pid_t pid, ns::CloneChild(ns::CloneFlags()));
  if (pid == 0) ChildMain(c, rl, go.read.get(), err.write.get(), log.write.get());
  box->pid = pid;
  go.read.reset();
  err.write.reset();
  log.write.reset();
  // The box end of the agent socket now lives only in the box: when the agent dies the host
  // sees EOF at once.
  ::close(kSupervisorAgentFd);
  ::close(kSupervisorAgentImageFd);
  box->log = std::move(log.read);

  RETURN_IF_ERROR(ns::WriteIdMaps(pid, ids).WithContext("user namespace"));
  RETURN_IF_ERROR(base::WriteAll(go.write.get(), "g").WithContext("release child"));
  Status joined = cgroups::Join(box->cgroups, pid);
  // A child that failed meanwhile has closed its end: its own error is the one to report.
  if (joined.ok()) (void)base::WriteAll(go.write.get(), "j");
  go.write.reset();
  std::string failure = ReadAll(err.read.get());
  if (!failure.empty()) return StartFailed(failure);
  RETURN_IF_ERROR(joined);
  ready->box_pid = pid;
  return Status::Ok();
}

// Until the box ends, the library says destroy, or the library's process is gone.
int Watch(Box& box, int parent_pidfd, int sig_fd) {
  LogRelay relay(kMaxRelayedLog);
  auto relay_out = [](const std::string& text) {
    if (!text.empty()) (void)base::WriteAll(2, text);
  };
  for (;;) {
    pollfd fds[4] = {{kSupervisorControlFd, POLLIN, 0},
                     {sig_fd, POLLIN, 0},
                     {parent_pidfd, POLLIN, 0},
                     {box.log.valid() ? box.log.get() : -1, POLLIN, 0}};
    if (::poll(fds, 4, -1) < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (fds[3].revents != 0) {
      char buf[4096];
      ssize_t n = ::read(box.log.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        relay_out(relay.Finish());
        box.log.reset();
      } else {
        relay_out(relay.Feed(std::string_view(buf, static_cast<size_t>(n))));
      }
    }
    if (fds[1].revents != 0) {
      signalfd_siginfo si;
      (void)!::read(sig_fd, &si, sizeof si);
      int status = 0;
      if (::waitpid(box.pid, &status, WNOHANG) == box.pid) {
        box.pid = -1;
        return status;
      }
    }
    if (fds[2].revents != 0) return -1;
    if (fds[0].revents != 0) {
      // "destroy", EOF or an error: the library wants the box gone either way.
      (void)RecvPacket(kSupervisorControlFd, std::chrono::milliseconds(0));
      return -1;
    }
  }
}

void KillBox(Box& box) {
  if (box.pid > 0) {
    // SIGKILL to PID 1 of a pid namespace kills every process in it; the wait returns once
    // they are all gone.
    ::kill(box.pid, SIGKILL);
    while (::waitpid(box.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    box.pid = -1;
  }
  (void)cgroups::KillAndRemove(box.cgroups);
}

}  // namespace

int RunBox(pid_t parent) {
  ::signal(SIGPIPE, SIG_IGN);
  UniqueFd parent_pidfd(static_cast<int>(::syscall(SYS_pidfd_open, parent, 0)));
  // Opened, then checked: if the library died before, we are not its child any more.
  if (!parent_pidfd.valid() || ::getppid() != parent) return 1;
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  UniqueFd sig_fd(::signalfd(-1, &chld, SFD_CLOEXEC));
  if (!sig_fd.valid()) return 1;

  auto packet = RecvPacket(kSupervisorControlFd, std::chrono::seconds(30));
  if (!packet.ok()) return 1;
  ReadyMessage ready;
  Box box;
  auto config = DecodeConfig(*packet);
  Status st = config.ok() ? StartBox(*config, &box, &ready) : config.status();
  if (!st.ok()) {
    ready.ok = false;
    ready.error = st.message();
    KillBox(box);
    if (config.ok()) ::rmdir(config->staging_dir.c_str());
    (void)SendPacket(kSupervisorControlFd, EncodeReady(ready));
    return 1;
  }
  ready.ok = true;
  (void)SendPacket(kSupervisorControlFd, EncodeReady(ready));
  int status = Watch(box, parent_pidfd.get(), sig_fd.get());
  KillBox(box);
  // Empty once the box's mount namespace is gone. Removed here because the library may be gone
  // (SIGKILLed) and will not do it; it tolerates ENOENT when it is alive.
  ::rmdir(config->staging_dir.c_str());
  (void)SendPacket(kSupervisorControlFd, "exited=" + std::to_string(status) + "\n");
  return 0;
}

int Probe() {
  auto report = [](const Status& st) {
    std::string line = st.ok() ? "ok\n" : "error " + st.message() + "\n";
    (void)!::write(1, line.data(), line.size());
    return st.ok() ? 0 : 1;
  };
  auto go = MakePipe();
  auto err = MakePipe();
  if (!go.ok() || !err.ok()) return report(go.ok() ? err.status() : go.status());
  ns::HostIds ids = ns::ChooseHostIds();
  if (::geteuid() == 0) (void)::setgroups(0, nullptr);
  auto pid = ns::CloneChild(ns::CloneFlags() | CLONE_NEWCGROUP);
  if (!pid.ok()) return report(pid.status());
  if (*pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    WaitForGo(go->read.get());
    int e = err->write.get();
    if (!privileges::BecomeBoxRoot().ok()) ChildFail(e, ErrnoStatus("become box root"));
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      ChildFail(e, ErrnoStatus("mount in a user namespace"));
    }
    if (::mount("probe", "/tmp", "tmpfs", 0, "size=4k") != 0) ChildFail(e, ErrnoStatus("tmpfs"));
    mount_attr ma{};
    ma.attr_set = MOUNT_ATTR_RDONLY;
    if (::syscall(SYS_mount_setattr, AT_FDCWD, "/tmp", 0, &ma, sizeof ma) != 0) {
      ChildFail(e, ErrnoStatus("mount_setattr (needs Linux 5.12+)"));
    }
    if (::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) ChildFail(e, ErrnoStatus("seccomp"));
    ::_exit(0);
  }
  go->read.reset();
  err->write.reset();
  Status st = ns::WriteIdMaps(*pid, ids).WithContext("user namespace id maps");
  if (st.ok()) (void)base::WriteAll(go->write.get(), "g");
  go->write.reset();
  std::string failure = ReadAll(err->read.get());
  ::waitpid(*pid, nullptr, 0);
  if (!st.ok()) return report(st);
  if (!failure.empty()) return report(Unavailable(failure));
  return report(Status::Ok());
}

}  // namespace codebox::jail::supervisor
