// One way to turn a timeout into a deadline: DeadlineAfter. A timeout may be kNoTimeout
// (codebox/timeout.h: milliseconds::max()) or, on the agent protocol's wire, anything up to
// INT64_MAX ms; `start + timeout` in the clock's nanoseconds would overflow for those.
#ifndef CODEBOX_BASE_DEADLINE_H_
#define CODEBOX_BASE_DEADLINE_H_

#include <chrono>
#include <optional>

namespace codebox::base {

// `start + timeout`, or nullopt (no deadline) when the clock cannot count that far: kNoTimeout
// and every limit of a few hundred years or more.
template <class TimePoint>
std::optional<TimePoint> DeadlineAfter(TimePoint start, std::chrono::milliseconds timeout) {
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(TimePoint::max() - start);
  if (timeout >= room) return std::nullopt;
  return start + timeout;
}

}  // namespace codebox::base

#endif  // CODEBOX_BASE_DEADLINE_H_
