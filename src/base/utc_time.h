// Wall-clock times as text.
#ifndef CODEBOX_BASE_UTC_TIME_H_
#define CODEBOX_BASE_UTC_TIME_H_

#include <chrono>
#include <string>

namespace codebox::base {

// RFC 3339 UTC with milliseconds: "2026-12-03T12:00:00.123Z" (the server's log lines, E2B's
// times).
std::string Rfc3339(std::chrono::system_clock::time_point time);

}  // namespace codebox::base

#endif  // CODEBOX_BASE_UTC_TIME_H_
