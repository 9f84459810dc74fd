#include "cli/line_reader.h"

#include <fcntl.h>
#include <histedit.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cwchar>
#include <utility>

#include "base/fs.h"
#include "base/io.h"

namespace codebox::cli {
namespace {

// Where the SIGINT handler writes: the cell pipe while a cell runs, else the prompt pipe.
std::atomic<int> g_prompt_fd{-1};
std::atomic<int> g_cell_fd{-1};
std::atomic<bool> g_cell_running{false};

void OnSigint(int) {
  const int saved = errno;
  const int fd = g_cell_running.load() ? g_cell_fd.load() : g_prompt_fd.load();
  if (fd >= 0) {
    const char b = 'i';
    [[maybe_unused]] ssize_t n = ::write(fd, &b, 1);  // non-blocking: a full pipe is plenty
  }
  errno = saved;
}

void Drain(int fd) {
  char buf[64];
  while (::read(fd, buf, sizeof buf) > 0) {
  }
}

StatusOr<std::pair<base::UniqueFd, base::UniqueFd>> Pipe(bool nonblocking_read) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return base::ErrnoStatus("pipe");
  base::UniqueFd r(fds[0]), w(fds[1]);
  RETURN_IF_ERROR(base::SetNonBlocking(w.get(), true));  // the signal handler must never block
  if (nonblocking_read) RETURN_IF_ERROR(base::SetNonBlocking(r.get(), true));
  return std::make_pair(std::move(r), std::move(w));
}

enum class Wait { kReady, kInterrupted };

// Blocks until `fd` has input (or EOF or an error, for read to report) or Ctrl-C was pressed.
Wait WaitForInput(int fd, int interrupt_fd) {
  pollfd p[2] = {{fd, POLLIN, 0}, {interrupt_fd, POLLIN, 0}};
  for (;;) {
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return Wait::kReady;
    }
    if (p[1].revents != 0) {
      Drain(interrupt_fd);
      return Wait::kInterrupted;
    }
    if (p[0].revents != 0) return Wait::kReady;
  }
}

// Lines from a pipe or file, no prompts: `echo 'x = 1' | codebox repl`.
class PlainReader : public LineReader {
 public:
  explicit PlainReader(int interrupt_fd) : interrupt_fd_(interrupt_fd) {}

  Event Read(const std::string&, std::string* line) override {
    for (;;) {
      if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        *line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return Event::kLine;
      }
      if (eof_) {
        if (buffer_.empty()) return Event::kEnd;
        *line = std::move(buffer_);
        buffer_.clear();
        return Event::kLine;
      }
      if (WaitForInput(STDIN_FILENO, interrupt_fd_) == Wait::kInterrupted) {
        return Event::kInterrupted;
      }
      char chunk[4096];
      ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        eof_ = true;
      } else {
        buffer_.append(chunk, static_cast<size_t>(n));
      }
    }
  }
  void Remember(const std::string&) override {}

 private:
  int interrupt_fd_;
  std::string buffer_;
  bool eof_ = false;
};

// libedit (BSD-licensed; GNU readline's GPL would bind the binary), through its own API:
// its readline emulation cannot tell Ctrl-C at the prompt from the end of input.
class EditLineReader : public LineReader {
 public:
  EditLineReader(const std::string& history_path, int interrupt_fd)
      : history_path_(history_path), interrupt_fd_(interrupt_fd) {
    el_ = el_init("codebox", stdin, stdout, stderr);
    history_ = history_init();
    if (el_ == nullptr || history_ == nullptr) return;  // ok() says so
    HistEvent ev;
    history(history_, &ev, H_SETSIZE, kReplHistoryLines);
    history(history_, &ev, H_SETUNIQUE, 1);
    el_set(el_, EL_CLIENTDATA, this);
    el_set(el_, EL_EDITOR, "emacs");
    el_set(el_, EL_PROMPT, &EditLineReader::Prompt);
    el_set(el_, EL_HIST, history, history_);
    el_set(el_, EL_GETCFN, &EditLineReader::GetChar);
    // Where the terminal hands ^C over as a character instead of a signal.
    // The wide call: libedit keeps these pointers (static strings here), where the narrow
    // el_set copies them and never frees the copies (LeakSanitizer in the repl's test).
    el_wset(el_, EL_ADDFN, L"codebox-interrupt", L"abandon the line", &EditLineReader::OnCtrlC);
    el_set(el_, EL_BIND, "^C", "codebox-interrupt", nullptr);
    el_source(el_, nullptr);  // the user's ~/.editrc, as other libedit programs read it
    if (!history_path_.empty()) {
      const std::string dir = history_path_.substr(0, history_path_.rfind('/'));
      if (Status st = base::MakeDirs(dir, 0700); !st.ok()) {
        problem_ = "no history: " + st.message();
        history_path_.clear();
      } else if (::access(history_path_.c_str(), F_OK) == 0 &&
                 history(history_, &ev, H_LOAD, history_path_.c_str()) < 0) {
        problem_ = "no history: cannot read " + history_path_ + " (remove it to start afresh)";
        history_path_.clear();  // never overwrite what we could not read
      }
    }
  }
  ~EditLineReader() override {
    if (el_ != nullptr) el_end(el_);
    if (history_ != nullptr) history_end(history_);
  }

  bool ok() const { return el_ != nullptr && history_ != nullptr; }

  Event Read(const std::string& prompt, std::string* line) override {
    prompt_ = prompt;
    interrupted_ = false;
    int count = 0;
    const char* text = el_gets(el_, &count);
    if (interrupted_) return Event::kInterrupted;
    if (text == nullptr || count <= 0) return Event::kEnd;
    line->assign(text, static_cast<size_t>(count));
    while (!line->empty() && (line->back() == '\n' || line->back() == '\r')) line->pop_back();
    return Event::kLine;
  }

  void Remember(const std::string& line) override {
    if (line.find_first_not_of(" \t") == std::string::npos) return;
    HistEvent ev;
    history(history_, &ev, H_ENTER, line.c_str());
    if (!history_path_.empty() && history(history_, &ev, H_SAVE, history_path_.c_str()) < 0 &&
        !save_failed_) {
      save_failed_ = true;
      problem_ = "cannot save the history to " + history_path_;
    }
  }

  std::string TakeHistoryProblem() override { return std::exchange(problem_, {}); }

 private:
  static EditLineReader* Self(EditLine* el) {
    void* self = nullptr;
    el_get(el, EL_CLIENTDATA, &self);
    return static_cast<EditLineReader*>(self);
  }
  static char* Prompt(EditLine* el) { return Self(el)->prompt_.data(); }
  static unsigned char OnCtrlC(EditLine* el, int) {
    Self(el)->interrupted_ = true;
    return CC_EOF;
  }
  // One character from the terminal, decoded in the locale's encoding; -1 on Ctrl-C, which
  // makes el_gets return at once.
  static int GetChar(EditLine* el, wchar_t* wc) {
    EditLineReader* self = Self(el);
    mbstate_t state = {};
    for (;;) {
      if (WaitForInput(STDIN_FILENO, self->interrupt_fd_) == Wait::kInterrupted) {
        self->interrupted_ = true;
        errno = EINTR;
        return -1;
      }
      char c;
      ssize_t n = ::read(STDIN_FILENO, &c, 1);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return static_cast<int>(n);
      size_t r = std::mbrtowc(wc, &c, 1, &state);
      if (r == static_cast<size_t>(-2)) continue;  // more bytes of this character to come
      if (r == static_cast<size_t>(-1)) {          // not a character here: skip the byte
        state = {};
        continue;
      }
      return 1;
    }
  }

  EditLine* el_ = nullptr;
  History* history_ = nullptr;
  std::string history_path_;
  int interrupt_fd_;
  std::string prompt_;
  bool interrupted_ = false;
  bool save_failed_ = false;
  std::string problem_;
};

}  // namespace

std::string ReplHistoryPath(const std::string& xdg_state_home, const std::string& home) {
  if (!xdg_state_home.empty() && xdg_state_home[0] == '/') {
    return xdg_state_home + "/codebox/repl_history";
  }
  if (!home.empty()) return home + "/.local/state/codebox/repl_history";
  return {};
}

StatusOr<std::unique_ptr<InterruptRelay>> InterruptRelay::Install(
    std::function<void()> interrupt_cell) {
  std::unique_ptr<InterruptRelay> r(new InterruptRelay());
  r->interrupt_cell_ = std::move(interrupt_cell);
  ASSIGN_OR_RETURN(auto prompt, Pipe(/*nonblocking_read=*/true));
  ASSIGN_OR_RETURN(auto cell, Pipe(/*nonblocking_read=*/false));
  r->prompt_read_ = std::move(prompt.first);
  r->prompt_write_ = std::move(prompt.second);
  r->cell_read_ = std::move(cell.first);
  r->cell_write_ = std::move(cell.second);
  g_prompt_fd = r->prompt_write_.get();
  g_cell_fd = r->cell_write_.get();
  sigset_t sigint;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &sigint, &r->old_mask_);
  r->thread_ = std::thread(&InterruptRelay::CellThread, r.get());
  struct sigaction action = {};
  action.sa_handler = OnSigint;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, &r->old_action_);
  return r;
}

InterruptRelay::~InterruptRelay() {
  ::sigaction(SIGINT, &old_action_, nullptr);
  g_prompt_fd = -1;
  g_cell_fd = -1;
  const char quit = 'q';
  [[maybe_unused]] ssize_t n = ::write(cell_write_.get(), &quit, 1);
  if (thread_.joinable()) thread_.join();
  ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

void InterruptRelay::SetCellRunning(bool running) { g_cell_running = running; }

void InterruptRelay::CellThread() {
  // The one thread that takes SIGINT (everyone else inherited it blocked).
  sigset_t sigint;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  ::pthread_sigmask(SIG_UNBLOCK, &sigint, nullptr);
  for (;;) {
    char b;
    ssize_t n = ::read(cell_read_.get(), &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || b == 'q') return;
    cell_interrupted_ = true;
    interrupt_cell_();
  }
}

std::unique_ptr<LineReader> LineReader::Create(const std::string& history_path, int interrupt_fd) {
  if (::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO)) {
    auto editor = std::make_unique<EditLineReader>(history_path, interrupt_fd);
    if (editor->ok()) return editor;
  }
  return std::make_unique<PlainReader>(interrupt_fd);
}

}  // namespace codebox::cli
