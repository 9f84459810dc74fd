#include "server/json_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/utc_time.h"

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

std::string JsonLog::Format(std::chrono::system_clock::time_point time, base::LogLevel level,
                            std::string_view msg, std::initializer_list<Field> fields) {
  // Ordered: time, level and msg lead every line.
  nlohmann::ordered_json line;
  line["time"] = base::Rfc3339(time);
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
