#include "vm/keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/fs.h"
#include "base/io.h"
#include "base/subprocess.h"
#include "base/unique_fd.h"
#include "vm/qemu.h"

namespace codebox::vm {
namespace {

void Say(const std::string& line) { (void)base::WriteAll(kKeeperStatusFd, line + "\n"); }

void KillAndReap(pid_t pid, int* wstatus) {
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, wstatus, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

int RunKeeper(pid_t parent, const std::string& run_dir, char** qemu_argv, char** envp) {
  ::signal(SIGPIPE, SIG_IGN);
  // A restore's state file, when the library passed one (looked at before this opens any fd).
  const bool has_state = ::fcntl(kQemuStateFd, F_GETFD) >= 0;
  // Own session: a ^C for the caller's process group must not end the box before the caller has
  // cleaned up (it may catch SIGINT). QEMU inherits it.
  ::setsid();
  base::UniqueFd parent_pidfd(static_cast<int>(::syscall(SYS_pidfd_open, parent, 0)));
  if (!parent_pidfd.valid()) {
    Say(std::string("error pidfd_open of the owner: ") + std::strerror(errno));
    return 1;
  }
  // Opened, then checked: if the owner died before, we are not its child any more.
  if (::getppid() != parent) {
    (void)base::RemoveTree(run_dir);
    return 1;
  }
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  base::UniqueFd sig_fd(::signalfd(-1, &chld, SFD_CLOEXEC));
  if (!sig_fd.valid()) {
    Say(std::string("error keeper setup: ") + std::strerror(errno));
    return 1;
  }
  base::Command qemu_command;
  for (char** arg = qemu_argv; *arg != nullptr; ++arg) qemu_command.argv.push_back(*arg);
  qemu_command.env.clear();
  for (char** var = envp; *var != nullptr; ++var) qemu_command.env.push_back(*var);
  // QEMU's log (1, 2) and its sockets. Not the status socket: the library must see EOF when we
  // go, not when QEMU goes.
  qemu_command.fds = {{1, 1}, {2, 2}, {kQemuAgentFd, kQemuAgentFd}, {kQemuQmpFd, kQemuQmpFd}};
  if (has_state) qemu_command.fds.push_back({kQemuStateFd, kQemuStateFd});
  // Correct here, unlike in the library: we are single-threaded.
  qemu_command.parent_death_signal = SIGKILL;
  // The log cap the library set on us holds for QEMU too: its writes fail, it is not killed.
  struct rlimit fsize;
  if (::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY) {
    qemu_command.max_file_bytes = fsize.rlim_cur;
  }
  auto started = base::Spawn(qemu_command);
  if (!started.ok()) {
    Say("error " + started.status().message());
    return 1;
  }
  const pid_t qemu = *started;
  // Only QEMU holds the box's socket ends now: the library sees EOF when QEMU dies.
  ::close(kQemuAgentFd);
  ::close(kQemuQmpFd);
  if (has_state) ::close(kQemuStateFd);
  Say("qemu " + std::to_string(qemu));

  for (;;) {
    pollfd fds[3] = {
        {sig_fd.get(), POLLIN, 0}, {parent_pidfd.get(), POLLIN, 0}, {kKeeperStatusFd, POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) {
      signalfd_siginfo si;
      (void)!::read(sig_fd.get(), &si, sizeof si);
      int wstatus = 0;
      if (::waitpid(qemu, &wstatus, WNOHANG) == qemu) {
        Say("exit " + std::to_string(wstatus));
        return 0;
      }
    }
    if (fds[1].revents != 0) {
      // The owner is gone without Destroy: nobody else will clean up.
      KillAndReap(qemu, nullptr);
      (void)base::RemoveTree(run_dir);
      return 0;
    }
    if (fds[2].revents != 0) {
      char cmd[64];
      ssize_t got = ::recv(kKeeperStatusFd, cmd, sizeof cmd, MSG_DONTWAIT);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      // "k", or EOF / an error (the library let go of the box): QEMU goes now.
      int wstatus = 0;
      KillAndReap(qemu, &wstatus);
      Say("exit " + std::to_string(wstatus));
      if (got <= 0) {
        // A dying owner's fds close before its pidfd fires: if it is exiting, nobody else will
        // remove the run directory.
        pollfd owner = {parent_pidfd.get(), POLLIN, 0};
        if (::poll(&owner, 1, 1000) > 0) (void)base::RemoveTree(run_dir);
      }
      return 0;
    }
  }
  KillAndReap(qemu, nullptr);
  return 1;
}

}  // namespace codebox::vm
