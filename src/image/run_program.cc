#include "image/run_program.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "base/io.h"
#include "base/unique_fd.h"

namespace codebox::image {
namespace {

// Splits buffered output into lines; keeps a partial last line for the next read.
void TakeLines(std::string& buffer, bool flush, const ProgramOptions& options,
               ProgramResult& result) {
  size_t start = 0;
  while (true) {
    size_t nl = buffer.find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = buffer.substr(start, nl - start);
    start = nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    result.tail.push_back(line);
    if (result.tail.size() > options.tail_lines) result.tail.pop_front();
    if (options.on_line) options.on_line(line);
  }
  buffer.erase(0, start);
  if (flush && !buffer.empty()) {
    buffer.push_back('\n');
    TakeLines(buffer, false, options, result);
  }
}

}  // namespace

std::string ProgramResult::Describe() const {
  std::string s = signal != 0 ? "killed by signal " + std::to_string(signal)
                              : "exited with status " + std::to_string(exit_code);
  if (!tail.empty()) {
    s += "; last output:";
    for (const std::string& line : tail) s += "\n    " + line;
  }
  return s;
}

StatusOr<ProgramResult> RunProgram(const std::vector<std::string>& argv,
                                   const ProgramOptions& options) {
  if (argv.empty()) return InvalidArgument("run program: empty argv");
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return base::ErrnoStatus("pipe");
  base::UniqueFd out_read(out_pipe[0]), out_write(out_pipe[1]);
  base::UniqueFd err_read, err_write;
  if (options.capture_stdout) {
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) return base::ErrnoStatus("pipe");
    err_read.reset(err_pipe[0]);
    err_write.reset(err_pipe[1]);
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_write.valid() ? err_write.get() : out_write.get(),
                                   2);
  // The child starts with default signal dispositions and an empty mask whatever ours are.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> c_argv, c_env;
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  for (const std::string& e : options.env) c_env.push_back(const_cast<char*>(e.c_str()));
  c_env.push_back(nullptr);

  pid_t pid = -1;
  // posix_spawnp searches the PATH of this process, not the child's env, which is what we want.
  int rc = ::posix_spawnp(&pid, argv[0].c_str(), &actions, &attr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return base::ErrnoStatus("start " + argv[0], rc);
  out_write.reset();
  err_write.reset();

  ProgramResult result;
  std::string out_buffer, err_buffer;
  std::vector<pollfd> fds;
  bool out_open = true, err_open = err_read.valid();
  char chunk[16384];
  while (out_open || err_open) {
    fds.clear();
    if (out_open) fds.push_back({out_read.get(), POLLIN, 0});
    if (err_open) fds.push_back({err_read.get(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      ssize_t n = ::read(p.fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      bool is_out = p.fd == out_read.get();
      if (n <= 0) {
        (is_out ? out_open : err_open) = false;
        continue;
      }
      if (is_out && options.capture_stdout) {
        result.output.append(chunk, static_cast<size_t>(n));
        continue;
      }
      std::string& buffer = is_out ? out_buffer : err_buffer;
      buffer.append(chunk, static_cast<size_t>(n));
      TakeLines(buffer, false, options, result);
    }
  }
  TakeLines(out_buffer, true, options, result);
  TakeLines(err_buffer, true, options, result);

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return base::ErrnoStatus("wait for " + argv[0]);
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace codebox::image
