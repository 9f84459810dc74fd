// Who owns a leftover: names of box directories (jail staging dirs, cgroups, vm run dirs, store
// temp files) carry "<pid>-<start>" of the process that made them, start being the process's start
// time (/proc/PID/stat field 22, clock ticks since boot). A pid alone is not enough: after a crash
// the pid may belong to another process by the time we look.
#ifndef CODEBOX_BASE_OWNER_H_
#define CODEBOX_BASE_OWNER_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace codebox::base {

// Start time of process `pid` (0 if there is none, or it is a zombie: its code has ended).
uint64_t ProcessStartTime(pid_t pid);

// "<pid>-<start>" of the calling process (computed again after a fork).
std::string OwnerTag();

struct OwnerRef {
  pid_t pid = 0;
  uint64_t start = 0;  // 0: the name carried only a pid (older names)
};

// Parses "<pid>-<start>" (or "<pid>" when `with_start` is false) at the start of `text`; whatever
// follows is not looked at. False when it does not begin that way.
bool ParseOwnerTag(std::string_view text, OwnerRef* out, bool with_start = true);

// True unless the owner is certainly gone: no process with that pid, a zombie, or one that started
// at another time. With start 0 only the pid is checked (alive if it exists).
bool OwnerAlive(const OwnerRef& owner);

}  // namespace codebox::base

#endif  // CODEBOX_BASE_OWNER_H_
