#include "base/utc_time.h"

#include <cstdio>
#include <ctime>

namespace codebox::base {

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

}  // namespace codebox::base
