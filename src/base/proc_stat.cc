#include "base/proc_stat.h"

#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "base/io.h"

namespace codebox::base {
namespace {

std::optional<std::string> ReadProcFile(pid_t pid, const char* name) {
  if (pid <= 0) return std::nullopt;
  // Written by the kernel (a process names only its comm, 16 bytes at most): small.
  auto text = ReadFile("/proc/" + std::to_string(pid) + "/" + name);
  if (!text.ok()) return std::nullopt;
  return std::move(*text);
}

}  // namespace

std::optional<std::chrono::microseconds> ProcessCpuTime(pid_t pid) {
  static const long ticks = ::sysconf(_SC_CLK_TCK);
  if (ticks <= 0) return std::nullopt;
  std::optional<std::string> stat = ReadProcFile(pid, "stat");
  if (!stat) return std::nullopt;
  const size_t paren = stat->rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(stat->substr(paren + 1));
  std::string skip;
  for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt (fields 3-13)
  uint64_t utime = 0, stime = 0;
  int64_t cutime = 0, cstime = 0;
  if (!(fields >> utime >> stime >> cutime >> cstime)) return std::nullopt;
  const uint64_t total = utime + stime + static_cast<uint64_t>(std::max<int64_t>(cutime, 0)) +
                         static_cast<uint64_t>(std::max<int64_t>(cstime, 0));
  return std::chrono::microseconds(total * 1'000'000 / static_cast<uint64_t>(ticks));
}

std::optional<uint64_t> ProcessPssBytes(pid_t pid) {
  std::optional<std::string> rollup = ReadProcFile(pid, "smaps_rollup");
  if (!rollup) return std::nullopt;
  std::istringstream lines(*rollup);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("Pss:")) continue;
    std::istringstream value(line.substr(4));
    uint64_t kib = 0;
    if (!(value >> kib)) return std::nullopt;
    return kib << 10;
  }
  return std::nullopt;
}

}  // namespace codebox::base
