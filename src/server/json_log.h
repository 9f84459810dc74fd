// The server's structured log: one JSON object a line, to stderr or a file, e.g.
//   {"time":"2026-12-03T12:00:00.123Z","level":"info","msg":"box created","box":"b-3f2a..."}
// Fields name what a line is about: box, request_id, route, status, ms, pool, error.
//
//   JsonLog::Write(base::LogLevel::kInfo, "box destroyed", {{"box", id}, {"reason", "idle"}});
//
// RouteLibraryLog() sends the library's CODEBOX_LOG lines (src/base/log.h) here too, so a
// server's stderr holds JSON only.
#ifndef CODEBOX_SERVER_JSON_LOG_H_
#define CODEBOX_SERVER_JSON_LOG_H_

#include <chrono>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "base/log.h"
#include "codebox/status.h"

namespace codebox::server {

class JsonLog {
 public:
  using Field = std::pair<std::string_view, nlohmann::json>;

  // Thread-safe; each line is one write(2), so lines of many threads never interleave. Text
  // that is not UTF-8 (it may come from a box) is written with U+FFFD in its place.
  static void Write(base::LogLevel level, std::string_view msg,
                    std::initializer_list<Field> fields = {});
  // Lines below `level` are dropped (default info).
  static void SetLevel(base::LogLevel level);
  static bool Enabled(base::LogLevel level);
  // Appends to `path` (created 0640) instead of stderr.
  static Status OpenFile(const std::string& path);
  // Makes CODEBOX_LOG lines of the library JSON lines of this log (level kept, "src":"lib").
  static void RouteLibraryLog();

  // The line Write writes, without its newline (for tests).
  static std::string Format(std::chrono::system_clock::time_point time, base::LogLevel level,
                            std::string_view msg, std::initializer_list<Field> fields);
};

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_JSON_LOG_H_
