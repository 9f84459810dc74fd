// Minimal leveled logging to stderr. CODEBOX_LOG=debug|info|warn|error (default warn).
#ifndef CODEBOX_BASE_LOG_H_
#define CODEBOX_BASE_LOG_H_

#include <sstream>
#include <string>

namespace codebox::base {

enum class LogLevel { kDebug = 0, kInfo, kWarn, kError };
bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, const std::string& line);

// Where LogLine sends lines instead of stderr (a server's JSON log); null: stderr again.
// Called from any thread, possibly many at once; set it before other threads log.
using LogSink = void (*)(LogLevel level, const std::string& line);
void SetLogSink(LogSink sink);

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
