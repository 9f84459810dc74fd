#include "base/owner.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <mutex>

#include "base/io.h"

namespace codebox::base {
namespace {

// Reads /proc/PID/stat; false if the process does not exist. The comm field may hold spaces and
// parentheses, so fields are counted from the last ')'.
bool ReadStat(pid_t pid, char* state, uint64_t* start) {
  auto text = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!text.ok()) return false;
  size_t close = text->rfind(')');
  if (close == std::string::npos) return false;
  std::string_view rest = std::string_view(*text).substr(close + 1);
  // Field 3 (state) is the first after ')', field 22 (starttime) the 20th.
  int field = 2;
  size_t pos = 0;
  while (pos < rest.size()) {
    while (pos < rest.size() && rest[pos] == ' ') ++pos;
    size_t end = rest.find(' ', pos);
    if (end == std::string_view::npos) end = rest.size();
    ++field;
    std::string_view token = rest.substr(pos, end - pos);
    if (field == 3 && !token.empty()) *state = token[0];
    if (field == 22) {
      return std::from_chars(token.data(), token.data() + token.size(), *start).ec == std::errc();
    }
    pos = end;
  }
  return false;
}

}  // namespace

uint64_t ProcessStartTime(pid_t pid) {
  char state = '?';
  uint64_t start = 0;
  if (pid <= 0 || !ReadStat(pid, &state, &start)) return 0;
  if (state == 'Z' || state == 'X') return 0;
  return start;
}

std::string OwnerTag() {
  static std::mutex mu;
  static pid_t cached_pid = 0;
  static std::string cached;
  std::lock_guard<std::mutex> lock(mu);
  pid_t self = ::getpid();
  if (cached_pid != self) {
    cached_pid = self;
    cached = std::to_string(self) + "-" + std::to_string(ProcessStartTime(self));
  }
  return cached;
}

bool ParseOwnerTag(std::string_view text, OwnerRef* out, bool with_start) {
  auto number = [&text](uint64_t* value) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
    if (ec != std::errc() || end == text.data()) return false;
    text.remove_prefix(static_cast<size_t>(end - text.data()));
    return true;
  };
  uint64_t pid = 0, start = 0;
  if (!number(&pid) || pid == 0 || pid > 4194304) return false;
  if (with_start) {
    if (text.empty() || text[0] != '-') return false;
    text.remove_prefix(1);
    if (!number(&start) || start == 0) return false;
  }
  out->pid = static_cast<pid_t>(pid);
  out->start = start;
  return true;
}

bool OwnerAlive(const OwnerRef& owner) {
  if (owner.pid <= 0) return true;  // not ours to judge
  char state = '?';
  uint64_t start = 0;
  if (!ReadStat(owner.pid, &state, &start)) {
    // /proc hides it (hidepid) or it is gone: only ESRCH is certain.
    return ::kill(owner.pid, 0) == 0 || errno != ESRCH;
  }
  if (state == 'Z' || state == 'X') return false;
  return owner.start == 0 || start == owner.start;
}

}  // namespace codebox::base
