#include "vm/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "base/io.h"
#include "base/unique_fd.h"

namespace codebox::vm {
namespace {

constexpr const char* kPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

bool IsExecutable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

// Everything below runs in the forked child of a possibly multi-threaded parent: only
// async-signal-safe calls until execve.
[[noreturn]] void ChildExec(const char* path, char* const* argv, char* const* envp, const char* cwd,
                            const std::vector<std::pair<int, int>>& fds, int max_target,
                            uint64_t max_file_bytes, int report_fd) {
  auto fail = [report_fd](int err) {
    ssize_t ignored = ::write(report_fd, &err, sizeof err);
    (void)ignored;
    ::_exit(127);
  };
  // Dispositions set to SIG_IGN and the blocked mask survive execve; QEMU must get SIGTERM.
  sigset_t all;
  sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  if (max_file_bytes > 0) {
    // Without this the kernel kills the writer at the limit instead of failing the write.
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {max_file_bytes, max_file_bytes};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) fail(errno);
  }
  // Sources were moved above every target by the parent, so dup2 never clobbers a source.
  for (const auto& [from, to] : fds) {
    if (::dup2(from, to) < 0) fail(errno);
  }
  for (int target = 0; target <= 2; ++target) {
    bool mapped = false;
    for (const auto& m : fds) mapped = mapped || m.second == target;
    if (!mapped) {
      int null_fd = ::open("/dev/null", O_RDWR);
      if (null_fd < 0) fail(errno);
      if (null_fd != target) {
        ::dup2(null_fd, target);
        ::close(null_fd);
      }
    }
  }
  // Close everything else except the exec-status pipe (CLOEXEC, closes on success).
  for (int fd = max_target + 1; fd < report_fd; ++fd) ::close(fd);
  ::syscall(SYS_close_range, static_cast<unsigned>(report_fd) + 1, ~0U, 0U);
  if (cwd != nullptr && ::chdir(cwd) != 0) fail(errno);
  ::execve(path, argv, envp);
  fail(errno);
  ::_exit(127);
}

}  // namespace

std::vector<std::string> ScrubbedEnvironment() {
  return {std::string("PATH=") + kPath, "LC_ALL=C", "LANG=C"};
}

std::string FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return IsExecutable(name) ? name : "";
  std::string dirs = kPath;
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (IsExecutable(candidate)) return candidate;
    start = end + 1;
  }
  return "";
}

std::string ConsoleExcerpt(const std::string& console, size_t max_lines) {
  std::string clean;
  for (char c : console) {
    if (c != '\r') clean.push_back(c);
  }
  std::string tail = TailLines(clean, max_lines);
  size_t panic = clean.find("Kernel panic");
  if (panic == std::string::npos || tail.find("Kernel panic") != std::string::npos) return tail;
  size_t start = clean.rfind('\n', panic);
  start = start == std::string::npos ? 0 : start + 1;
  size_t end = clean.find('\n', panic);
  return clean.substr(start, end == std::string::npos ? std::string::npos : end - start) +
         "\n...\n" + tail;
}

std::string TailLines(const std::string& text, size_t max_lines) {
  size_t end = text.size();
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r')) --end;
  size_t pos = end;
  for (size_t lines = 0; pos > 0; --pos) {
    if (text[pos - 1] == '\n' && ++lines == max_lines) break;
  }
  return text.substr(pos, end - pos);
}

StatusOr<pid_t> Spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) return InvalidArgument("spawn: empty argv");
  std::string path = FindProgram(spec.argv[0]);
  if (path.empty()) return NotFound("spawn: program not found: " + spec.argv[0]);

  // Move every source fd above all targets, so the child's dup2 loop cannot overwrite one.
  int max_target = 2;
  for (const auto& m : spec.fds) max_target = std::max(max_target, m.second);
  std::vector<base::UniqueFd> moved;
  std::vector<std::pair<int, int>> fds;
  for (const auto& [from, to] : spec.fds) {
    int copy = ::fcntl(from, F_DUPFD_CLOEXEC, max_target + 1);
    if (copy < 0) return base::ErrnoStatus("spawn " + spec.argv[0] + ": dup fd");
    moved.emplace_back(copy);
    fds.emplace_back(copy, to);
  }
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return base::ErrnoStatus("spawn: pipe");
  base::UniqueFd report_read(report[0]), report_write(report[1]);
  if (report_write.get() <= max_target) {
    int high = ::fcntl(report_write.get(), F_DUPFD_CLOEXEC, max_target + 1);
    if (high < 0) return base::ErrnoStatus("spawn: dup pipe");
    report_write.reset(high);
  }

  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const char* cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();

  pid_t pid = ::fork();
  if (pid < 0) return base::ErrnoStatus("spawn " + spec.argv[0] + ": fork");
  if (pid == 0) {
    ChildExec(path.c_str(), argv.data(), envp.data(), cwd, fds, max_target, spec.max_file_bytes,
              report_write.get());
  }
  report_write.reset();
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report_read.get(), &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    ::waitpid(pid, nullptr, 0);
    return base::ErrnoStatus("spawn " + path, child_errno);
  }
  return pid;
}

StatusOr<CommandOutput> RunCommand(const std::vector<std::string>& argv, const std::string& cwd) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return base::ErrnoStatus("pipe");
  base::UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return base::ErrnoStatus("pipe");
  base::UniqueFd err_r(err_pipe[0]), err_w(err_pipe[1]);
  SpawnSpec spec;
  spec.argv = argv;
  spec.cwd = cwd;
  spec.fds = {{out_w.get(), 1}, {err_w.get(), 2}};
  ASSIGN_OR_RETURN(pid_t pid, Spawn(spec));
  out_w.reset();
  err_w.reset();

  CommandOutput result;
  struct pollfd pfds[2] = {{out_r.get(), POLLIN, 0}, {err_r.get(), POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  char buf[65536];
  while (open_count > 0) {
    if (::poll(pfds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (pfds[i].fd < 0 || pfds[i].revents == 0) continue;
      ssize_t got = ::read(pfds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        pfds[i].fd = -1;
        --open_count;
      }
    }
  }
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  if (result.exit_code != 0) {
    std::string detail = TailLines(result.err.empty() ? result.out : result.err, 5);
    return IoError(argv[0] + " exited with status " + std::to_string(result.exit_code) +
                   (detail.empty() ? "" : ": " + detail));
  }
  return result;
}

}  // namespace codebox::vm
