// What the agent knows about the processes around it, read from /proc: used to find every
// process an exec started (including the ones that left its process group or session) and to
// tell an OOM kill from an ordinary SIGKILL.
#ifndef CODEBOX_AGENT_PROC_H_
#define CODEBOX_AGENT_PROC_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace codebox::agent {

struct ProcInfo {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgrp = 0;
  pid_t session = 0;
  char state = '?';  // 'Z' for zombies, which can no longer be killed (only reaped)
};

// Every live process visible in /proc (zombies excluded). Processes that vanish while the
// directory is read are skipped.
std::vector<ProcInfo> ListProcesses();

// kill(2), reaching a process of the box's user too. A jail's agent holds root as its real
// and effective uid and no CAP_KILL, and kill lets a sender reach only a process whose real or
// saved uid is its real or effective one; the box user's uid is the agent's saved one (main.cc,
// TakeBackRoot). So a kill root may not send is sent again with that uid as this thread's
// effective one (raw syscalls: glibc's wrappers change every thread), which then gives it
// back, and its filesystem uid with it. Returns kill's result, errno as kill left it.
int SignalProcess(pid_t target, int sig);

// Sends SIGKILL, repeatedly, to every process for which `victim` is true, until a pass finds
// none (a victim may fork between the scan and the kill). Returns how many kills were sent.
int KillMatching(const std::function<bool(const ProcInfo&, const std::vector<ProcInfo>&)>& victim);

// True if `pid` descends from `ancestor` through ppid links in `all`.
bool DescendsFrom(pid_t pid, pid_t ancestor, const std::vector<ProcInfo>& all);

// The count of OOM kills: the execs' cgroup's in a vm guest that made one (guest_limits.h),
// else the kernel's (`oom_kill` in /proc/vmstat); 0 if unavailable.
uint64_t ReadOomKillCount();

// The parsers behind them, on text already read.
// One /proc/PID/stat line; false if it is malformed.
bool ParseStatLine(pid_t pid, const char* line, ProcInfo* out);
// The `oom_kill` count in the text of /proc/vmstat, 0 if absent.
uint64_t ParseOomKillCount(const char* vmstat);

}  // namespace codebox::agent

#endif  // CODEBOX_AGENT_PROC_H_
