#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "base/text.h"

namespace codebox::base {

static LogLevel ThresholdFromEnv() {
  const char* v = std::getenv("CODEBOX_LOG");
  if (v == nullptr) return LogLevel::kWarn;
  if (std::strcmp(v, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(v, "info") == 0) return LogLevel::kInfo;
  if (std::strcmp(v, "error") == 0) return LogLevel::kError;
  return LogLevel::kWarn;
}

bool LogEnabled(LogLevel level) {
  static const LogLevel threshold = ThresholdFromEnv();
  return level >= threshold;
}

static std::atomic<LogSink> g_sink{nullptr};

LogSink SetLogSink(LogSink sink) { return g_sink.exchange(sink); }

// Log lines often carry text from a box (agent errors, paths): escaped so they cannot drive
// the terminal they land on.
std::string FormatLogLine(LogLevel level, const std::string& line) {
  static const char* const kNames[] = {"debug", "info", "warn", "error"};
  return "codebox[" + std::to_string(::getpid()) + "] " + kNames[static_cast<int>(level)] + ": " +
         TerminalSafe(line) + "\n";
}

void LogLine(LogLevel level, const std::string& line) {
  if (LogSink sink = g_sink.load()) return sink(level, line);
  std::string out = FormatLogLine(level, line);
  // One write so lines from many threads do not interleave.
  (void)!::write(STDERR_FILENO, out.data(), out.size());
}

}  // namespace codebox::base
