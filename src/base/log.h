// Minimal leveled logging to stderr. CODEBOX_LOG=debug|info|warn|error (default warn).
#ifndef CODEBOX_BASE_LOG_H_
#define CODEBOX_BASE_LOG_H_

#include <sstream>
#include <string>

namespace codebox::base {

enum class LogLevel { kDebug = 0, kInfo, kWarn, kError };
bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, const std::string& line);

// Where LogLine sends lines instead of stderr (a server's JSON log, a terminal's status line
// that must step aside); null: stderr again. Called from any thread, possibly many at once.
// Returns the sink it replaces.
using LogSink = void (*)(LogLevel level, const std::string& line);
LogSink SetLogSink(LogSink sink);

// "codebox[PID] warn: LINE\n", the line made safe for a terminal: what LogLine writes to
// stderr, for a sink that writes it elsewhere.
std::string FormatLogLine(LogLevel level, const std::string& line);

}  // namespace codebox::base

#define CODEBOX_LOG(level, expr)                                                   \
  do {                                                                             \
    if (::codebox::base::LogEnabled(::codebox::base::LogLevel::level)) {           \
      std::ostringstream _os;                                                      \
      _os << expr;                                                                 \
      ::codebox::base::LogLine(::codebox::base::LogLevel::level, _os.str());       \
    }                                                                              \
  } while (0)

#endif  // CODEBOX_BASE_LOG_H_
