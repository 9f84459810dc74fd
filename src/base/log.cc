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

void SetLogSink(LogSink sink) { g_sink.store(sink); }

// Log lines often carry text from a box (agent errors, paths): escaped so they cannot drive
// the terminal they land on.
void LogLine(LogLevel level, const std::string& line) {
  if (LogSink sink = g_sink.load()) return sink(level, line);
  static const char* const kNames[] = {"debug", "info", "warn", "error"};
  std::string out = "codebox[" + std::to_string(::getpid()) + "] " +
                    kNames[static_cast<int>(level)] + ": " + TerminalSafe(line) + "\n";
  // One write so lines from many threads do not interleave.
  (void)!::write(STDERR_FILENO, out.data(), out.size());
}

}  // namespace codebox::base
