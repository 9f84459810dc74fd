#include "agent/exec.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/io.h"

namespace codebox::agent {

using protocol::Json;

StatusOr<ExecSpec> ParseExecSpec(const Json& request) {
  ExecSpec spec;
  auto argv = request.find("argv");
  if (argv == request.end() || !argv->is_array() || argv->empty()) {
    return InvalidArgument("exec: \"argv\" must be a non-empty array of strings");
  }
  for (const Json& a : *argv) {
    if (!a.is_string()) return InvalidArgument("exec: \"argv\" must hold only strings");
    spec.argv.push_back(a.get<std::string>());
  }
  auto env = request.find("env");
  if (env != request.end() && !env->is_null()) {
    if (!env->is_object()) return InvalidArgument("exec: \"env\" must be an object of strings");
    for (auto it = env->begin(); it != env->end(); ++it) {
      if (!it.value().is_string() || it.key().empty() || it.key().find('=') != std::string::npos) {
        return InvalidArgument("exec: bad \"env\" entry \"" + it.key() + "\"");
      }
      spec.env.push_back(it.key() + "=" + it.value().get<std::string>());
    }
  }
  auto cwd = request.find("cwd");
  if (cwd != request.end() && !cwd->is_null()) {
    if (!cwd->is_string()) return InvalidArgument("exec: \"cwd\" is not a string");
    spec.cwd = cwd->get<std::string>();
  }
  auto stdin_mode = request.find("stdin");
  if (stdin_mode != request.end() && !stdin_mode->is_null()) {
    if (*stdin_mode == "stream") {
      spec.stdin_stream = true;
    } else if (*stdin_mode != "none") {
      return InvalidArgument("exec: \"stdin\" must be \"stream\" or \"none\"");
    }
  }
  auto timeout = protocol::GetInt(request, "timeout_ms", 0);
  if (!timeout.ok() || *timeout < 0) return InvalidArgument("exec: bad \"timeout_ms\"");
  spec.timeout_ms = *timeout;
  auto limit = protocol::GetInt(request, "output_limit", static_cast<int64_t>(spec.output_limit));
  if (!limit.ok() || *limit < 0) return InvalidArgument("exec: bad \"output_limit\"");
  spec.output_limit = static_cast<uint64_t>(*limit);
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
