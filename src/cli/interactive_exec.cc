#include "cli/interactive_exec.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <thread>

#include "base/io.h"
#include "base/unique_fd.h"
#include "cli/box_flags.h"
#include "codebox/option_schema.h"

namespace codebox::cli {
namespace {

// The write end of the pipe the signal handlers write to; -1 while none is installed.
volatile sig_atomic_t g_signal_fd = -1;

// Async-signal-safe: the loop, not the handler, does the work (on whichever thread it lands).
void OnSignal(int sig) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(sig);
  (void)!::write(g_signal_fd, &byte, 1);
  errno = saved;
}

// SIGWINCH: the window changed. SIGINT, SIGQUIT: passed on to the program. SIGTERM, SIGHUP:
// the session ends (and the terminal is restored on the way out).
constexpr int kSignals[] = {SIGWINCH, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGPIPE};

// Signals as bytes on a pipe, for the loop to poll (the self-pipe trick). The handlers this
// process had come back when it is destroyed.
class SignalPipe {
 public:
  SignalPipe() = default;
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;
  ~SignalPipe() {
    if (!installed_) return;
    for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    g_signal_fd = -1;
  }

  Status Install() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return base::ErrnoStatus("pipe");
    read_.reset(fds[0]);
    write_.reset(fds[1]);
    g_signal_fd = write_.get();
    struct sigaction sa = {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < std::size(kSignals); ++i) {
      // A closed stdout must be an error of the write, not the end of this process (and of
      // the terminal's restoring).
      struct sigaction ignore = {};
      ignore.sa_handler = SIG_IGN;
      ::sigaction(kSignals[i], kSignals[i] == SIGPIPE ? &ignore : &sa, &old_[i]);
    }
    installed_ = true;
    return Status::Ok();
  }

  int fd() const { return read_.get(); }
  // The next signal that came, or 0 when none is waiting.
  int Next() {
    unsigned char byte = 0;
    return ::read(read_.get(), &byte, 1) == 1 ? byte : 0;
  }

 private:
  base::UniqueFd read_, write_;
  struct sigaction old_[std::size(kSignals)] = {};
  bool installed_ = false;
};

// This process's terminal in raw mode (no echo, no line editing, no signals from keys: every
// byte goes to the box), restored by Restore() or the destructor, whichever comes first.
class RawTerminal {
 public:
  RawTerminal() = default;
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  ~RawTerminal() { Restore(); }

  Status Enter(int fd) {
    if (::tcgetattr(fd, &saved_) != 0) return base::ErrnoStatus("read the terminal's settings");
    termios raw = saved_;
    ::cfmakeraw(&raw);
    if (::tcsetattr(fd, TCSANOW, &raw) != 0) return base::ErrnoStatus("set the terminal raw");
    fd_ = fd;
    return Status::Ok();
  }
  void Restore() {
    if (fd_ < 0) return;
    ::tcsetattr(fd_, TCSADRAIN, &saved_);
    fd_ = -1;
  }

 private:
  termios saved_ = {};
  int fd_ = -1;
};

// The window's size, within what a box's terminal may be; 24x80 when it is not known.
TerminalSize WindowSize(int fd) {
  winsize ws = {};
  if (::ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0) return {};
  auto clamp = [](unsigned short v) { return static_cast<uint16_t>(std::min(v, uint16_t{10000})); };
  return TerminalSize{clamp(ws.ws_row), clamp(ws.ws_col)};
}

// Output of the box, written as it comes (from the agent connection's thread). A write that
// fails (stdout closed) drops the rest: the program's own end decides the result.
void Write(int fd, std::string_view data) { (void)base::WriteAll(fd, data); }

// Says plainly when a limit ended or cut the program.
void ReportLimits(const ExecResult& r) {
  if (r.timed_out) {
    std::fprintf(stderr, "codebox: timed out after %.1f s (--timeout to change)\n",
                 r.duration.count() / 1000.0);
  } else if (r.out_of_memory) {
    std::fprintf(stderr, "codebox: killed: out of memory (--memory to change)\n");
  }
  if (r.output_truncated) {
    std::fprintf(stderr,
                 "codebox: the output passed the box's limit and the rest was dropped "
                 "(--output-limit-bytes to change)\n");
  }
}

}  // namespace

int ExitStatusOf(const ExecResult& r) {
  if (r.timed_out) return kExitTimedOut;
  if (r.signal != 0) return 128 + r.signal;
  return r.exit_code;
}

bool NamesExecTimeout(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a.rfind("--", 0) != 0) continue;
    OptionMatch match = FindOption(BoxOptionSchema(), a.substr(0, a.find('=')));
    if (match && match.spec->name == "exec_timeout") return true;
  }
  return false;
}

Status CheckInteractive(const InteractiveExec& exec) {
  if (exec.tty && !::isatty(STDIN_FILENO)) {
    return InvalidArgument("the input device is not a TTY (-t needs one; use -i for a pipe)");
  }
  return Status::Ok();
}

int RunInteractive(const std::string& command, Box& box, const std::vector<std::string>& argv,
                   const InteractiveExec& exec) {
  if (Status st = CheckInteractive(exec); !st.ok()) {
    PrintError(command, st);
    return kExitCodeboxError;
  }
  SignalPipe signals;
  int done_fds[2];
  Status setup = signals.Install();
  if (setup.ok() && ::pipe2(done_fds, O_CLOEXEC) != 0) setup = base::ErrnoStatus("pipe");
  if (!setup.ok()) {
    PrintError(command, setup);
    return kExitCodeboxError;
  }
  base::UniqueFd done_read(done_fds[0]), done_write(done_fds[1]);

  ExecOptions options;
  options.timeout = exec.timeout.value_or(kNoTimeout);
  options.on_stdout = [](std::string_view d) { Write(STDOUT_FILENO, d); };
  options.on_stderr = [](std::string_view d) { Write(STDERR_FILENO, d); };
  RawTerminal raw;
  if (exec.tty) {
    const char* term = std::getenv("TERM");
    options.env["TERM"] = term != nullptr && *term != '\0' ? term : "xterm";
    options.tty = WindowSize(STDIN_FILENO);
    // Raw before the start: keys typed meanwhile must not be edited or echoed here.
    if (Status st = raw.Enter(STDIN_FILENO); !st.ok()) {
      PrintError(command, st);
      return kExitCodeboxError;
    }
  }
  auto process = box.Start(argv, options);
  if (!process.ok()) {
    raw.Restore();
    PrintError(command, process.status());
    return kExitCodeboxError;
  }

  StatusOr<ExecResult> result = Internal("the program was not waited for");
  std::thread waiter([&] {
    result = (*process)->Wait();
    (void)!::write(done_write.get(), "x", 1);
  });
  bool stdin_open = true;
  int ended_by = 0;  // SIGTERM or SIGHUP: the session was told to end
  char buf[4096];
  for (;;) {
    pollfd fds[3] = {{done_read.get(), POLLIN, 0},
                     {signals.fd(), POLLIN, 0},
                     {stdin_open ? STDIN_FILENO : -1, POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0 && errno != EINTR) {
      ended_by = SIGTERM;  // cannot wait for anything any more: end it
      (void)(*process)->Signal(SIGKILL);
      break;
    }
    if (fds[0].revents != 0) break;
    if (fds[1].revents != 0) {
      for (int sig = signals.Next(); sig != 0; sig = signals.Next()) {
        if (sig == SIGWINCH && exec.tty) {
          (void)(*process)->Resize(WindowSize(STDIN_FILENO));  // kNotFound once it ended
        } else if (sig == SIGINT || sig == SIGQUIT) {
          (void)(*process)->Signal(sig);
        } else if ((sig == SIGTERM || sig == SIGHUP) && ended_by == 0) {
          ended_by = sig;
          stdin_open = false;
          (void)(*process)->Signal(SIGKILL);  // its exit ends the wait
        }
      }
    }
    if (stdin_open && fds[2].revents != 0) {
      ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      // Bytes go as they come (with -t, Ctrl-C is one of them); the end of input (or a
      // terminal that hung up) ends the program's stdin.
      if (n <= 0 || !(*process)->WriteStdin(std::string_view(buf, static_cast<size_t>(n))).ok()) {
        stdin_open = false;
        (void)(*process)->CloseStdin();
      }
    }
  }
  waiter.join();
  raw.Restore();
  if (ended_by != 0) return 128 + ended_by;
  if (!result.ok()) {
    PrintError(command, result.status());
    return kExitCodeboxError;
  }
  ReportLimits(*result);
  return ExitStatusOf(*result);
}

}  // namespace codebox::cli
