#include "server/json_log.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace codebox::server {
namespace {

std::atomic<int> g_fd{STDERR_FILENO};
std::atomic<int> g_level{static_cast<int>(base::LogLevel::kInfo)};

std::string_view LevelName(base::LogLevel level) {
  switch (level) {
    case base::LogLevel::kDebug:
      return "debug";
    case base::LogLevel::kInfo:
      return "info";
    case base::LogLevel::kWarn:
      return "warn";
    case base::LogLevel::kError:
      return "error";
  }
  return "info";
}

void LibrarySink(base::LogLevel level, const std::string& line) {
  JsonLog::Write(level, line, {{"src", "lib"}});
}

}  // namespace

std::string Rfc3339(std::chrono::system_clock::time_point time) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch());
  const time_t secs = static_cast<time_t>(ms.count() / 1000);
  struct tm tm {};
  ::gmtime_r(&secs, &tm);
  char buf[96];  // room for any int the compiler imagines in each field
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms.count() % 1000));
  return buf;
}

std::string JsonLog::Format(std::chrono::system_clock::time_point time, base::LogLevel level,
                            std::string_view msg, std::initializer_list<Field> fields) {
  // Ordered: time, level and msg lead every line.
  nlohmann::ordered_json line;
  line["time"] = Rfc3339(time);
  line["level"] = LevelName(level);
  line["msg"] = std::string(msg);
  for (const auto& [key, value] : fields) {
    if (key == "time" || key == "level" || key == "msg") continue;
    line[std::string(key)] = value;
  }
  return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void JsonLog::Write(base::LogLevel level, std::string_view msg,
                    std::initializer_list<Field> fields) {
  if (!Enabled(level)) return;
  std::string out = Format(std::chrono::system_clock::now(), level, msg, fields) + "\n";
  (void)!::write(g_fd.load(), out.data(), out.size());
}

void JsonLog::SetLevel(base::LogLevel level) { g_level.store(static_cast<int>(level)); }

bool JsonLog::Enabled(base::LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

Status JsonLog::OpenFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) {
    return IoError("open log file " + path + ": " + std::strerror(errno) +
                   "; check that its directory exists and is writable");
  }
  // The previous file stays open: a thread may be writing to it now (a few fds at most).
  g_fd.store(fd);
  return Status::Ok();
}

void JsonLog::RouteLibraryLog() { base::SetLogSink(&LibrarySink); }

}  // namespace codebox::server
