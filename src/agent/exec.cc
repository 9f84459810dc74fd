#include "agent/exec.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/io.h"

namespace codebox::agent {

StatusOr<ExecSpec> ParseExecSpec(const protocol::msg::Exec& request) {
  ExecSpec spec;
  if (request.argv.empty()) return InvalidArgument("exec: \"argv\" is empty");
  for (size_t i = 0; i < request.argv.size(); ++i) {
    // execve would silently cut the string at the NUL.
    if (request.argv[i].find('\0') != std::string::npos) {
      return InvalidArgument("exec: argv[" + std::to_string(i) + "] contains a NUL byte");
    }
  }
  spec.argv = request.argv;
  for (const auto& [name, value] : request.env) {
    if (name.empty() || name.find('=') != std::string::npos ||
        name.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
      return InvalidArgument("exec: bad \"env\" entry \"" + name.substr(0, 64) + "\"");
    }
    spec.env.push_back(name + "=" + value);
  }
  if (request.cwd.find('\0') != std::string::npos) {
    return InvalidArgument("exec: \"cwd\" contains a NUL byte");
  }
  spec.cwd = request.cwd;
  spec.stdin_stream = request.stdin_stream;
  spec.timeout_ms = request.timeout_ms;
  spec.output_limit = request.output_limit;
  return spec;
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

// Only async-signal-safe calls from here on: the child of fork().
[[noreturn]] void FailInChild(const char* what, const char* name, int err) {
  const char* reason = ::strerror(err);  // glibc's strerror is safe enough after fork here:
                                         // the agent is single-threaded.
  const char* parts[] = {"codebox-agent: ", what, " ", name, ": ", reason, "\n"};
  for (const char* p : parts) (void)!::write(STDERR_FILENO, p, ::strlen(p));
  ::_exit(127);
}

[[noreturn]] void RunChild(const ExecSpec& spec, char* const* argv, char* const* envp, int in_fd,
                           int out_fd, int err_fd) {
  ::setsid();
  // If the agent dies (killed, crashed), its direct children die with it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // dup2 clears FD_CLOEXEC on the targets; the pipe originals are O_CLOEXEC.
  if (::dup2(in_fd, STDIN_FILENO) < 0 || ::dup2(out_fd, STDOUT_FILENO) < 0 ||
      ::dup2(err_fd, STDERR_FILENO) < 0) {
    ::_exit(127);
  }
  // The agent blocks signals for its signalfd and ignores SIGPIPE (ignored dispositions
  // survive exec); the program gets the defaults.
  ::signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (::chdir(spec.cwd.c_str()) != 0) FailInChild("chdir", spec.cwd.c_str(), errno);
  // execvp looks argv[0] up in the PATH of `environ`, which must be the exec's own.
  environ = const_cast<char**>(envp);
  ::execvp(argv[0], argv);
  FailInChild("exec", argv[0], errno);
}

}  // namespace

StatusOr<SpawnedExec> SpawnExec(const ExecSpec& spec) {
  ASSIGN_OR_RETURN(Pipe out, MakePipe());
  ASSIGN_OR_RETURN(Pipe err, MakePipe());
  Pipe in;
  if (spec.stdin_stream) {
    ASSIGN_OR_RETURN(in, MakePipe());
  } else {
    in.read.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!in.read.valid()) return base::ErrnoStatus("open /dev/null");
  }
  // Bigger pipes mean fewer wakeups for chatty programs; failure is harmless.
  ::fcntl(out.write.get(), F_SETPIPE_SZ, 1 << 20);
  ::fcntl(err.write.get(), F_SETPIPE_SZ, 1 << 20);

  // Built before fork so the child only makes async-signal-safe calls.
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0 && errno == EAGAIN) {
    return Unavailable("fork: the box's process limit is reached (" +
                       std::string(std::strerror(EAGAIN)) + ")");
  }
  if (pid < 0) return base::ErrnoStatus("fork");
  if (pid == 0) {
    RunChild(spec, argv.data(), envp.data(), in.read.get(), out.write.get(), err.write.get());
  }
  SpawnedExec spawned;
  spawned.pid = pid;
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

}  // namespace codebox::agent
