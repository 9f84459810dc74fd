#include "agent/exec.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "agent/guest_limits.h"
#include "agent/proc.h"
#include "base/io.h"

namespace codebox::agent {

Status CheckExec(const protocol::msg::Exec& request) {
  if (request.argv.empty()) return InvalidArgument("exec: \"argv\" is empty");
  for (size_t i = 0; i < request.argv.size(); ++i) {
    // execve would silently cut the string at the NUL.
    if (request.argv[i].find('\0') != std::string::npos) {
      return InvalidArgument("exec: argv[" + std::to_string(i) + "] contains a NUL byte");
    }
  }
  for (const auto& [name, value] : request.env) {
    if (name.empty() || name.find('=') != std::string::npos ||
        name.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
      return InvalidArgument("exec: bad \"env\" entry \"" + name.substr(0, 64) + "\"");
    }
  }
  if (request.cwd.find('\0') != std::string::npos) {
    return InvalidArgument("exec: \"cwd\" contains a NUL byte");
  }
  return Status::Ok();
}

std::vector<std::string> EnvironmentStrings(const protocol::msg::Exec& request) {
  std::vector<std::string> env;
  env.reserve(request.env.size());
  for (const auto& [name, value] : request.env) env.push_back(name + "=" + value);
  return env;
}

int ExecFailureStatus(int err) {
  // As shells: no such program is 127; a program that is there but cannot run is 126.
  return err == ENOENT || err == ENOTDIR ? 127 : 126;
}

Status SetTerminalSize(int master, protocol::msg::TerminalSize size) {
  winsize ws{};
  ws.ws_row = size.rows;
  ws.ws_col = size.cols;
  if (::ioctl(master, TIOCSWINSZ, &ws) != 0) return base::ErrnoStatus("set terminal size");
  return Status::Ok();
}

namespace {

struct Pipe {
  base::UniqueFd read;
  base::UniqueFd write;
};

StatusOr<Pipe> MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return base::ErrnoStatus("pipe2");
  return Pipe{base::UniqueFd(fds[0]), base::UniqueFd(fds[1])};
}

// A pseudo-terminal pair: the master for the agent, the slave for the child.
struct Pty {
  base::UniqueFd master;
  base::UniqueFd slave;
};

StatusOr<Pty> MakePty(protocol::msg::TerminalSize size) {
  Pty pty;
  pty.master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pty.master.valid()) return base::ErrnoStatus("open a pseudo-terminal (/dev/ptmx)");
  if (::unlockpt(pty.master.get()) != 0) return base::ErrnoStatus("unlockpt");
  // The slave through its master, not through a path in /dev/pts that code in the box may
  // have replaced.
  pty.slave.reset(::ioctl(pty.master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pty.slave.valid()) return base::ErrnoStatus("open the pseudo-terminal's slave");
  RETURN_IF_ERROR(SetTerminalSize(pty.master.get(), size));
  return pty;
}

// Only async-signal-safe calls from here on: the child of fork().
[[noreturn]] void FailInChild(const char* what, const char* name, int err, int status) {
  const char* reason = ::strerror(err);  // glibc's strerror is safe enough after fork here:
                                         // the agent is single-threaded.
  const char* parts[] = {"codebox-agent: ", what, " ", name, ": ", reason, "\n"};
  for (const char* p : parts) (void)!::write(STDERR_FILENO, p, ::strlen(p));
  ::_exit(status);
}

// What the child writes on the switch report when it cannot become the exec's user.
enum class SwitchStep : int32_t { kGroups = 1, kGid = 2, kUid = 3 };
struct SwitchReport {
  SwitchStep step;
  int32_t err;
};

[[noreturn]] void FailSwitch(int report_fd, SwitchStep step) {
  SwitchReport report{step, errno};
  (void)!::write(report_fd, &report, sizeof report);  // a pipe: all of it or nothing
  ::_exit(127);
}

// Only async-signal-safe calls. Groups first, then the gid, then the uid: each later step
// takes away the privilege the earlier ones need. All three ids of each kind (real, effective,
// saved) are set, so nothing the program runs can switch back.
void BecomeUser(const protocol::msg::User& user, pid_t agent, int report_fd) {
  // Where the box's user namespace denies setgroups (a jail's), EPERM is fine only when there
  // is nothing to drop: the supervisor dropped every group before the box was made, so no
  // group that maps to box root (or to anything) follows the exec.
  if (::setgroups(0, nullptr) != 0 && !(errno == EPERM && ::getgroups(0, nullptr) == 0)) {
    FailSwitch(report_fd, SwitchStep::kGroups);
  }
  if (::setresgid(user.gid, user.gid, user.gid) != 0) FailSwitch(report_fd, SwitchStep::kGid);
  if (::setresuid(user.uid, user.uid, user.uid) != 0) FailSwitch(report_fd, SwitchStep::kUid);
  // A credential change clears the parent-death signal: set it again, and make sure the
  // agent did not die before it was set.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != agent) ::_exit(127);
  ::close(report_fd);  // nothing written: the switch worked
}

[[noreturn]] void RunChild(const protocol::msg::Exec& spec, char* const* argv, char* const* envp,
                           int in_fd, int out_fd, int err_fd, pid_t agent, int report_fd) {
  ::setsid();
  // If the agent dies (killed, crashed), its direct children die with it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (spec.tty) {
    // The session leader takes the terminal (in_fd, out_fd and err_fd are its slave) as its
    // controlling terminal, so Ctrl-C typed there signals the foreground program. The slave
    // belongs to the exec's user (best effort), as login(1) gives a user their terminal.
    if (::ioctl(in_fd, TIOCSCTTY, 0) != 0) ::_exit(127);
    if (spec.user) (void)!::fchown(in_fd, spec.user->uid, spec.user->gid);
  }
  // dup2 clears FD_CLOEXEC on the targets; the pipe originals are O_CLOEXEC.
  if (::dup2(in_fd, STDIN_FILENO) < 0 || ::dup2(out_fd, STDOUT_FILENO) < 0 ||
      ::dup2(err_fd, STDERR_FILENO) < 0) {
    ::_exit(127);
  }
  // Into the box's limits (a vm guest's cgroup), before anything of the program runs.
  if (!JoinExecCgroup()) FailInChild("join", "the box's cgroup", errno, 127);
  // The agent blocks signals for its signalfd and ignores SIGPIPE (ignored dispositions
  // survive exec); the program gets the defaults.
  ::signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Before the chdir: the directory must be one the user may enter.
  if (spec.user) BecomeUser(*spec.user, agent, report_fd);
  if (::chdir(spec.cwd.c_str()) != 0) FailInChild("chdir", spec.cwd.c_str(), errno, 127);
  // execvp looks argv[0] up in the PATH of `environ`, which must be the exec's own.
  environ = const_cast<char**>(envp);
  ::execvp(argv[0], argv);
  const int err = errno;
  FailInChild("exec", argv[0], err, ExecFailureStatus(err));
}

}  // namespace

StatusOr<SpawnedExec> SpawnExec(const protocol::msg::Exec& spec) {
  Pipe out, err, in;
  Pty pty;
  if (spec.tty) {
    // The terminal is the program's stdin too, whether or not the host streams to it; the
    // agent writes it through a second descriptor of the master.
    ASSIGN_OR_RETURN(pty, MakePty(*spec.tty));
    in.write.reset(::fcntl(pty.master.get(), F_DUPFD_CLOEXEC, 0));
    if (!in.write.valid()) return base::ErrnoStatus("dup the pseudo-terminal");
  } else {
    ASSIGN_OR_RETURN(out, MakePipe());
    ASSIGN_OR_RETURN(err, MakePipe());
    if (spec.stdin_stream) {
      ASSIGN_OR_RETURN(in, MakePipe());
    } else {
      in.read.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      if (!in.read.valid()) return base::ErrnoStatus("open /dev/null");
    }
    // Bigger pipes mean fewer wakeups for chatty programs; failure is harmless.
    ::fcntl(out.write.get(), F_SETPIPE_SZ, 1 << 20);
    ::fcntl(err.write.get(), F_SETPIPE_SZ, 1 << 20);
  }

  // Built before fork so the child only makes async-signal-safe calls.
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::vector<std::string> env = EnvironmentStrings(spec);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  Pipe report;
  if (spec.user) {
    ASSIGN_OR_RETURN(report, MakePipe());
  }

  const pid_t agent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0 && errno == EAGAIN) {
    return Unavailable("fork: the box's process limit is reached (" +
                       std::string(std::strerror(EAGAIN)) + ")");
  }
  if (pid < 0) return base::ErrnoStatus("fork");
  if (pid == 0) {
    if (spec.tty) {
      const int slave = pty.slave.get();
      RunChild(spec, argv.data(), envp.data(), slave, slave, slave, agent, report.write.get());
    }
    RunChild(spec, argv.data(), envp.data(), in.read.get(), out.write.get(), err.write.get(), agent,
             report.write.get());
  }
  SpawnedExec spawned;
  spawned.pid = pid;
  if (spec.user) {
    spawned.switch_report = std::move(report.read);
    RETURN_IF_ERROR(base::SetNonBlocking(spawned.switch_report.get(), true));
  }
  if (spec.tty) {
    // Our copy of the slave closes here, so the master reads EIO once the processes in the
    // box closed theirs. One file description, so non-blocking for both descriptors.
    spawned.stdin_fd = std::move(in.write);
    spawned.stdout_fd = std::move(pty.master);
    RETURN_IF_ERROR(base::SetNonBlocking(spawned.stdout_fd.get(), true));
    return spawned;
  }
  spawned.stdout_fd = std::move(out.read);
  spawned.stderr_fd = std::move(err.read);
  RETURN_IF_ERROR(base::SetNonBlocking(spawned.stdout_fd.get(), true));
  RETURN_IF_ERROR(base::SetNonBlocking(spawned.stderr_fd.get(), true));
  if (spec.stdin_stream) {
    spawned.stdin_fd = std::move(in.write);
    RETURN_IF_ERROR(base::SetNonBlocking(spawned.stdin_fd.get(), true));
  }
  return spawned;
}

std::optional<Status> UserSwitchFailure(int switch_report, const protocol::msg::User& user) {
  SwitchReport report{};
  ssize_t n;
  do {
    n = ::read(switch_report, &report, sizeof report);
  } while (n < 0 && errno == EINTR);
  // Nothing (EOF, or EAGAIN from a child still holding it): the switch worked.
  if (n != static_cast<ssize_t>(sizeof report)) return std::nullopt;
  std::string what;
  switch (report.step) {
    case SwitchStep::kGroups:
      what = "drop the supplementary groups";
      break;
    case SwitchStep::kGid:
      what = "switch to gid " + std::to_string(user.gid);
      break;
    case SwitchStep::kUid:
      what = "switch to uid " + std::to_string(user.uid);
      break;
  }
  std::string message = "exec: cannot " + what + ": " + std::strerror(report.err);
  // EINVAL: an id the box's user namespace does not map.
  if (report.err == EPERM) return PermissionDenied(message);
  if (report.err == EINVAL) return InvalidArgument(message);
  return IoError(message);
}

void SignalExec(pid_t pid, int sig) {
  if (SignalProcess(-pid, sig) != 0) SignalProcess(pid, sig);
}

}  // namespace codebox::agent
