#include "cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace codebox::cli {
namespace {

// ASCII, so that it draws the same in every terminal encoding.
constexpr char kSpinner[] = {'|', '/', '-', '\\'};
constexpr auto kSpinnerPeriod = std::chrono::milliseconds(100);

// The status line that log lines go around; guarded by g_log_mu, which LogAround holds
// while it uses the line, so that a line is never used after its destructor unset it.
std::mutex g_log_mu;
StatusLine* g_log_around = nullptr;

int TerminalColumns(std::FILE* out) {
  struct winsize size = {};
  if (::ioctl(::fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

}  // namespace

bool IsStatusTerminal(int fd) {
  if (::isatty(fd) == 0) return false;
  const char* term = std::getenv("TERM");
  return term == nullptr || std::strcmp(term, "dumb") != 0;
}

StatusLine::StatusLine(std::FILE* out, bool enabled, int columns)
    : out_(out), enabled_(enabled), columns_(columns) {}

StatusLine::~StatusLine() {
  {
    std::lock_guard<std::mutex> lock(g_log_mu);
    if (g_log_around == this) g_log_around = nullptr;
    // Another line that shows now still needs the log; it restores the sink when it goes.
    if (routes_log_ && g_log_around == nullptr) base::SetLogSink(previous_sink_);
  }
  Clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (spinner_.joinable()) spinner_.join();
}

void StatusLine::Show(std::string text) {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> lock(g_log_mu);
    g_log_around = this;
    if (!routes_log_) {
      previous_sink_ = base::SetLogSink(&StatusLine::LogAround);
      routes_log_ = true;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (columns_ <= 0) columns_ = TerminalColumns(out_);
  text_ = std::move(text);
  showing_ = true;
  Draw();
  // The thread starts with the first line shown: a status never shown costs nothing.
  if (!spinner_.joinable()) spinner_ = std::thread([this] { Spin(); });
}

void StatusLine::Clear() {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!showing_) return;
  showing_ = false;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
}

void StatusLine::WriteAbove(const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  if (showing_) std::fputs("\r\033[K", out_);
  std::fwrite(text.data(), 1, text.size(), out_);
  if (showing_) Draw();
  std::fflush(out_);
}

void StatusLine::LogAround(base::LogLevel level, const std::string& line) {
  const std::string text = base::FormatLogLine(level, line);
  std::lock_guard<std::mutex> lock(g_log_mu);
  if (g_log_around != nullptr) return g_log_around->WriteAbove(text);
  // The line that routed the log here is gone, another sink was restored over it, or not yet.
  (void)!::write(STDERR_FILENO, text.data(), text.size());
}

void StatusLine::Draw() {
  // A line that wrapped could not be redrawn in place: cut it to the width, with room for the
  // spinner and the cursor after it.
  const size_t room = columns_ > 4 ? static_cast<size_t>(columns_) - 3 : 1;
  std::string shown = text_.size() > room ? text_.substr(0, room) : text_;
  std::fprintf(out_, "\r%s %c\033[K", shown.c_str(), kSpinner[frame_ % 4]);
  std::fflush(out_);
}

void StatusLine::Spin() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, kSpinnerPeriod);
    if (stopping_) break;
    if (!showing_) continue;
    ++frame_;
    Draw();
  }
}

bool StartsEmulated(const BoxOptions& options, const StatusOr<box::DriverChoice>& choice) {
  if (!options.server.empty()) return false;
  return choice.ok() && choice->kind == DriverKind::kVm && choice->emulated;
}

BoxStartNotice AnnounceBoxStart(const BoxOptions& options, std::FILE* out, bool terminal,
                                const DriverChooser& choose) {
  // Not a terminal: no probe either (it starts a helper process the first time).
  if (!terminal || !options.server.empty()) return BoxStartNotice();
  if (!StartsEmulated(options, choose(options))) return BoxStartNotice();
  auto line = std::make_unique<StatusLine>(out, true);
  line->Show("starting VM (emulated, a few seconds)...");
  return BoxStartNotice(std::move(line));
}

BoxStartNotice AnnounceBoxStart(const BoxOptions& options) {
  return AnnounceBoxStart(options, stderr, IsStatusTerminal(STDERR_FILENO), box::ChooseDriver);
}

}  // namespace codebox::cli
