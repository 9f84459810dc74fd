#include "vm/keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/io.h"
#include "base/unique_fd.h"
#include "vm/fs.h"
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
    (void)RemoveTree(run_dir);
    return 1;
  }
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  base::UniqueFd sig_fd(::signalfd(-1, &chld, SFD_CLOEXEC));
  int err_pipe[2];
  if (!sig_fd.valid() || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    Say(std::string("error keeper setup: ") + std::strerror(errno));
    return 1;
  }
  base::UniqueFd err_read(err_pipe[0]), err_write(err_pipe[1]);
  const pid_t keeper = ::getpid();
  pid_t qemu = ::fork();
  if (qemu < 0) {
    Say(std::string("error fork: ") + std::strerror(errno));
    return 1;
  }
  if (qemu == 0) {
    // Correct here, unlike in the library: we are single-threaded.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != keeper) ::_exit(127);
    ::close(kKeeperStatusFd);  // the library must see EOF when we go, not when
                               // QEMU goes
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE,
             SIG_DFL);  // SIGXFSZ stays ignored: the log cap fails writes instead
    ::execve(qemu_argv[0], qemu_argv, envp);
    int err = errno;
    (void)!::write(err_write.get(), &err, sizeof err);
    ::_exit(127);
  }
  err_write.reset();
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(err_read.get(), &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    ::waitpid(qemu, nullptr, 0);
    Say(std::string("error exec ") + qemu_argv[0] + ": " + std::strerror(exec_errno));
    return 1;
  }
  // Only QEMU holds the box's socket ends now: the library sees EOF when QEMU dies.
  ::close(kQemuAgentFd);
  ::close(kQemuQmpFd);
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
      (void)RemoveTree(run_dir);
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
        if (::poll(&owner, 1, 1000) > 0) (void)RemoveTree(run_dir);
      }
      return 0;
    }
  }
  KillAndReap(qemu, nullptr);
  return 1;
}

}  // namespace codebox::vm
