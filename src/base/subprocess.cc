#include "base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <string_view>

#include "base/io.h"

namespace codebox::base {
namespace {

// The child runs on a stack the parent frees: AddressSanitizer must not poison it.
#define CODEBOX_NO_ASAN __attribute__((no_sanitize_address))

// What the child does is prepared here, in the parent: the child shares our memory and may
// not allocate. It writes back only `err` and `failed_step`.
struct ChildPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  const char* cwd;  // nullptr: stay
  const std::pair<int, int>* fds;
  int* moved;  // scratch, one per fd
  size_t fd_count;
  int max_target;
  bool target_is_std[3];
  bool new_session;
  int death_signal;
  pid_t parent;
  uint64_t max_file_bytes;
  int net_namespace_fd;
  int err = 0;
  const char* failed_step = nullptr;
};

constexpr char kEnterCwd[] = "enter its working directory";

[[noreturn]] CODEBOX_NO_ASAN void ChildFail(ChildPlan* p, const char* step) {
  p->err = errno;
  p->failed_step = step;
  ::_exit(127);
}

// Runs in the child, on its own stack, between clone(CLONE_VM | CLONE_VFORK) and execve: the
// parent thread waits, every signal is blocked, and only system calls are made here.
CODEBOX_NO_ASAN int ChildMain(void* arg) {
  ChildPlan* p = static_cast<ChildPlan*>(arg);
  if (p->net_namespace_fd >= 0 && ::setns(p->net_namespace_fd, CLONE_NEWNET) != 0) {
    ChildFail(p, "enter its network namespace");
  }
  if (p->death_signal != 0) {
    if (::prctl(PR_SET_PDEATHSIG, p->death_signal) != 0)
      ChildFail(p, "set its parent-death signal");
    // The parent may have died before prctl: then the signal will never come.
    if (::getppid() != p->parent) {
      errno = ESRCH;
      ChildFail(p, "see its parent");
    }
  }
  if (p->new_session && ::setsid() < 0) ChildFail(p, "start a session");
  // Handlers would run our code in the child; an ignored signal stays ignored across exec.
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction sa;
    __builtin_memset(&sa, 0, sizeof sa);
    sa.sa_handler = (sig == SIGXFSZ && p->max_file_bytes > 0) ? SIG_IGN : SIG_DFL;
    ::sigaction(sig, &sa, nullptr);  // fails for glibc's own signals, which exec resets
  }
  if (p->max_file_bytes > 0) {
    struct rlimit lim = {p->max_file_bytes, p->max_file_bytes};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ChildFail(p, "set its file size limit");
  }
  // First every source above every target, so that no dup2 below overwrites a source.
  for (size_t i = 0; i < p->fd_count; ++i) {
    p->moved[i] = ::fcntl(p->fds[i].first, F_DUPFD_CLOEXEC, p->max_target + 1);
    if (p->moved[i] < 0) ChildFail(p, "pass it an fd");
  }
  for (size_t i = 0; i < p->fd_count; ++i) {
    if (::dup2(p->moved[i], p->fds[i].second) < 0) ChildFail(p, "pass it an fd");
  }
  for (int target = 0; target <= 2; ++target) {
    if (p->target_is_std[target]) continue;
    int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0 || ::dup2(null_fd, target) < 0) ChildFail(p, "open /dev/null");
    if (null_fd != target) ::close(null_fd);
  }
  for (int fd = 3; fd <= p->max_target; ++fd) {
    bool keep = false;
    for (size_t i = 0; i < p->fd_count; ++i) keep = keep || p->fds[i].second == fd;
    if (!keep) ::close(fd);
  }
  if (::syscall(SYS_close_range, static_cast<unsigned>(p->max_target) + 1, ~0U, 0U) != 0) {
    struct rlimit lim;
    int limit = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < (1u << 20)
                    ? static_cast<int>(lim.rlim_cur)
                    : (1 << 20);
    for (int fd = p->max_target + 1; fd < limit; ++fd) ::close(fd);
  }
  if (p->cwd != nullptr && ::chdir(p->cwd) != 0) ChildFail(p, kEnterCwd);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(p->path, p->argv, p->envp);
  ChildFail(p, nullptr);
}

std::string PathOf(const std::vector<std::string>& env) {
  for (const std::string& e : env) {
    if (e.starts_with("PATH=")) return e.substr(5);
  }
  return kToolPath;
}

constexpr size_t kMaxLineBytes = 4096;

// One of the child's output pipes, as read here.
struct Stream {
  UniqueFd fd;
  bool capture;         // into RunResult::out; else lines
  std::string partial;  // a line not yet ended
};

void EmitLine(std::string line, const RunOptions& options, RunResult& result) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  result.tail.push_back(line);
  while (result.tail.size() > options.tail_lines) result.tail.pop_front();
  if (options.on_line) options.on_line(line);
}

void Consume(Stream& s, std::string_view data, bool flush, const RunOptions& options,
             RunResult& result) {
  if (s.capture) {
    size_t room = options.max_output_bytes - std::min(options.max_output_bytes, result.out.size());
    result.out.append(data.substr(0, room));
    if (data.size() > room) result.out_truncated = true;
    return;
  }
  s.partial.append(data);
  size_t start = 0;
  for (;;) {
    size_t nl = s.partial.find('\n', start);
    if (nl == std::string::npos && s.partial.size() - start < kMaxLineBytes) break;
    size_t len = nl == std::string::npos ? kMaxLineBytes : std::min(nl - start, kMaxLineBytes);
    EmitLine(s.partial.substr(start, len), options, result);
    start += len + (nl == start + len ? 1 : 0);  // a longer line goes on as the next piece
  }
  s.partial.erase(0, start);
  if (flush && !s.partial.empty()) {
    EmitLine(std::move(s.partial), options, result);
    s.partial.clear();
  }
}

// Reads what the pipe holds now. False once it is at EOF (or broken).
bool Drain(Stream& s, const RunOptions& options, RunResult& result) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(s.fd.get(), buf, sizeof buf);
    if (n > 0) {
      Consume(s, std::string_view(buf, static_cast<size_t>(n)), false, options, result);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return n < 0 && errno == EAGAIN;
    }
  }
}

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::vector<std::string> ToolEnvironment() {
  return {std::string("PATH=") + kToolPath, "LC_ALL=C", "LANG=C"};
}

std::string FindProgram(const std::string& name, const std::string& search_path) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  size_t start = 0;
  while (start <= search_path.size()) {
    size_t end = search_path.find(':', start);
    if (end == std::string::npos) end = search_path.size();
    std::string dir = search_path.substr(start, end - start);
    std::string candidate = dir + "/" + name;
    // An empty entry would mean the working directory: never that.
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

StatusOr<pid_t> Spawn(const Command& command) {
  if (command.argv.empty()) return InvalidArgument("run a program: empty argv");
  const std::string& name = command.program.empty() ? command.argv[0] : command.program;
  std::string path = name;
  if (name.find('/') == std::string::npos) {
    std::string search = PathOf(command.env);
    path = FindProgram(name, search);
    if (path.empty()) return NotFound("could not run " + name + ": not found in " + search);
  }

  ChildPlan plan{};
  std::set<int> targets;
  plan.max_target = 2;
  for (const auto& [from, to] : command.fds) {
    if (to < 0 || !targets.insert(to).second) {
      return InvalidArgument("could not run " + path + ": fd " + std::to_string(to) +
                             " is given twice or is negative");
    }
    if (::fcntl(from, F_GETFD) < 0) {
      return ErrnoStatus("could not run " + path + ": fd " + std::to_string(from) + " to pass as " +
                         std::to_string(to));
    }
    plan.max_target = std::max(plan.max_target, to);
    if (to <= 2) plan.target_is_std[to] = true;
  }
  std::vector<char*> argv = CStrings(command.argv), envp = CStrings(command.env);
  std::vector<int> moved(command.fds.size());
  plan.path = path.c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.cwd = command.cwd.empty() ? nullptr : command.cwd.c_str();
  plan.fds = command.fds.data();
  plan.moved = moved.data();
  plan.fd_count = command.fds.size();
  plan.new_session = command.new_session;
  plan.death_signal = command.parent_death_signal;
  plan.parent = ::getpid();
  plan.max_file_bytes = command.max_file_bytes;
  plan.net_namespace_fd = command.net_namespace_fd;

  constexpr size_t kStackBytes = 256 << 10;
  void* stack = ::mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
  if (stack == MAP_FAILED) return ErrnoStatus("could not run " + path + ": child stack");
  // Blocked until the child has reset every handler: none of ours may run in the child.
  sigset_t all, saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  pid_t pid = ::clone(ChildMain, static_cast<char*>(stack) + kStackBytes,
                      CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
  int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  ::munmap(stack, kStackBytes);
  if (pid < 0) return ErrnoStatus("could not run " + path + ": clone", clone_errno);
  if (plan.failed_step != nullptr || plan.err != 0) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    std::string what = "could not run " + path;
    if (plan.failed_step != nullptr) what += std::string(": could not ") + plan.failed_step;
    if (plan.failed_step == kEnterCwd) what += " " + command.cwd;
    return ErrnoStatus(what, plan.err);
  }
  return pid;
}

std::string RunResult::Describe() const {
  std::string s =
      timed_out ? "killed after its deadline of " +
                      (timeout.count() % 1000 == 0 ? std::to_string(timeout.count() / 1000) + " s"
                                                   : std::to_string(timeout.count()) + " ms")
      : signal != 0 ? "killed by signal " + std::to_string(signal)
                    : "exited with status " + std::to_string(exit_code);
  if (!tail.empty()) {
    s += "; last output:";
    for (const std::string& line : tail) s += "\n    " + line;
  }
  return s;
}

StatusOr<RunResult> Run(const Command& command, const RunOptions& options) {
  Command cmd = command;
  bool maps_out = false, maps_err = false;
  for (const auto& m : cmd.fds) {
    maps_out = maps_out || m.second == 1;
    maps_err = maps_err || m.second == 2;
  }
  std::vector<Stream> streams;
  std::vector<UniqueFd> write_ends;
  auto add_pipe = [&](bool capture) -> StatusOr<int> {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("run a program: pipe");
    streams.push_back({UniqueFd(p[0]), capture, {}});
    write_ends.emplace_back(p[1]);
    RETURN_IF_ERROR(SetNonBlocking(p[0], true));
    return p[1];
  };
  int out_w = -1;
  if (!maps_out) {
    ASSIGN_OR_RETURN(out_w, add_pipe(options.capture_stdout));
    cmd.fds.emplace_back(out_w, 1);
  }
  if (!maps_err) {
    if (out_w >= 0 && !options.capture_stdout) {
      cmd.fds.emplace_back(out_w, 2);  // one pipe keeps the two streams' lines in order
    } else {
      ASSIGN_OR_RETURN(int err_w, add_pipe(false));
      cmd.fds.emplace_back(err_w, 2);
    }
  }
  ASSIGN_OR_RETURN(pid_t pid, Spawn(cmd));
  write_ends.clear();
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));

  RunResult result;
  result.program = cmd.argv[0];
  result.timeout = options.timeout;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  bool exited = false;
  while (!exited && (!streams.empty() || pidfd.valid())) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      if (cmd.new_session) ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      break;
    }
    std::vector<pollfd> pfds;
    for (const Stream& s : streams) pfds.push_back({s.fd.get(), POLLIN, 0});
    if (pidfd.valid()) pfds.push_back({pidfd.get(), POLLIN, 0});
    int timeout_ms = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
    if (::poll(pfds.data(), pfds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("run " + result.program + ": poll");
    }
    // Exited: what it wrote is in the pipes now; a descendant holding them is not waited for.
    exited = pidfd.valid() && pfds.back().revents != 0;
    for (size_t i = streams.size(); i-- > 0;) {
      if (pfds[i].revents == 0 && !exited) continue;
      if (!Drain(streams[i], options, result) || exited) {
        Consume(streams[i], {}, true, options, result);
        streams.erase(streams.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  }
  for (Stream& s : streams) Consume(s, {}, true, options, result);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno == ECHILD) {
      return Internal("run " + result.program +
                      ": its exit status is lost (SIGCHLD is ignored in this process; it must not "
                      "be for codebox to tell success from failure)");
    }
    if (errno != EINTR) return ErrnoStatus("run " + result.program + ": collect its exit status");
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

StatusOr<RunResult> RunChecked(const Command& command, const RunOptions& options) {
  ASSIGN_OR_RETURN(RunResult result, Run(command, options));
  if (!result.ok()) return IoError(result.program + " " + result.Describe());
  if (result.out_truncated) {
    return LimitExceeded(result.program + " wrote more than " +
                         std::to_string(options.max_output_bytes) + " bytes to stdout");
  }
  return result;
}

}  // namespace codebox::base
