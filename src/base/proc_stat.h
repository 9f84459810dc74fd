// What /proc says of a process the host started (QEMU, a jail's processes): its CPU time and
// its proportional share of memory, for usage figures (Box::Usage). A process's name (comm)
// is its own to choose and may hold spaces and parentheses: /proc/PID/stat's fields are read
// after its last ')'.
#ifndef CODEBOX_BASE_PROC_STAT_H_
#define CODEBOX_BASE_PROC_STAT_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>

namespace codebox::base {

// utime + stime of `pid`'s threads, and cutime + cstime of the children it reaped; nullopt
// when it is gone or its stat cannot be read.
std::optional<std::chrono::microseconds> ProcessCpuTime(pid_t pid);

// Its proportional set size (/proc/PID/smaps_rollup's Pss): resident memory, pages shared with
// other processes (a vm's template RAM mapped by its clones) divided among them; nullopt when
// it is gone or unreadable.
std::optional<uint64_t> ProcessPssBytes(pid_t pid);

}  // namespace codebox::base

#endif  // CODEBOX_BASE_PROC_STAT_H_
