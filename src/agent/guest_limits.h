// The limits of a vm box, enforced inside the guest: every exec runs in one cgroup v2 (the
// box's pids and memory limits), and the agent, PID 1, stays outside it, so a fork bomb or a
// memory hog in the box cannot starve the agent that answers the host. The jail's cgroup does
// the same job on the host (src/jail/cgroups.cc).
#ifndef CODEBOX_AGENT_GUEST_LIMITS_H_
#define CODEBOX_AGENT_GUEST_LIMITS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "codebox/status.h"

namespace codebox::agent {

// The cgroup of the execs, under the cgroup2 mount at /sys/fs/cgroup.
inline constexpr const char* kExecCgroup = "/sys/fs/cgroup/box";

// Mounts cgroup2 at /sys/fs/cgroup, makes kExecCgroup (no limits yet) and keeps its
// cgroup.procs open for SpawnExec's children; gives the agent oom_score_adj -1000 so the
// guest's OOM killer never picks it. Done at boot, so a template has it done already (every
// step costs tens of ms of code translation in a fresh QEMU under tcg); once done, nothing.
Status PrepareExecCgroup();

// PrepareExecCgroup if it was not done, then the limits (0 = none). May run again (a clone's
// second hello): the new limits replace the old.
Status SetUpExecCgroup(int64_t max_processes, int64_t memory_bytes);

// In a forked child before it runs the program (async-signal-safe): moves the calling process
// into the execs' cgroup and gives it back the default oom_score_adj (0; it inherited the
// agent's -1000, which would make it unkillable by the cgroup's OOM killer). True when there is
// no such cgroup (outside a vm guest); false with errno set when the move failed.
bool JoinExecCgroup();

// The execs' cgroup's count of OOM kills (`oom_kill` in its memory.events), nullopt when there
// is no such cgroup.
std::optional<uint64_t> ExecCgroupOomKills();

// A limit as a cgroup file takes it: 0 (none) is "max".
std::string CgroupLimit(int64_t value);

}  // namespace codebox::agent

#endif  // CODEBOX_AGENT_GUEST_LIMITS_H_
