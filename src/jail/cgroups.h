// Cgroup limits for one jail: memory (no swap), process count, CPU share. Both hierarchies:
// v2 (one directory, all controllers) and v1 (one directory per controller). The library plans
// the paths (so it can remove them even if the supervisor is SIGKILLed); the supervisor
// creates them, writes the limits and moves the box's PID 1 in before it runs anything.
#ifndef CODEBOX_JAIL_CGROUPS_H_
#define CODEBOX_JAIL_CGROUPS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codebox/status.h"
#include "jail/jail.h"

namespace codebox::jail::cgroups {

struct Dir {
  std::string controller;  // "memory", "pids", "cpu" (v1) or "unified" (v2)
  std::string path;        // /sys/fs/cgroup/memory/<caller's cgroup>/codebox-<id>
};

struct Plan {
  int version = 0;  // 0: no usable cgroups, 1, 2
  std::vector<Dir> dirs;
  // Controllers we wanted but cannot use, with the reason ("memory: no write access to ...").
  std::vector<std::string> unavailable;
};

// Decides where this jail's cgroups go: under the caller's own cgroup of each controller, as
// "codebox-<id>" (nesting keeps any limit the caller itself is under). Reads /proc/self.
Plan MakePlan(const std::string& id);

// Our cgroup by controller ("unified" for v2) from the text of /proc/self/cgroup:
// "N:ctrl1,ctrl2:/path" (v1) and "0::/path" (v2).
std::map<std::string, std::string> ParseProcCgroup(const std::string& text);
// Mount points of v1 hierarchies by controller (and by every other mount option), from the
// text of /proc/self/mountinfo.
std::map<std::string, std::string> ParseV1Mounts(const std::string& mountinfo);

// "controller:path" strings for the control channel, and back.
std::vector<std::string> EncodeDirs(const Plan& plan);
Plan DecodeDirs(int version, const std::vector<std::string>& encoded);

struct Applied {
  std::vector<std::string> limits;        // "memory 512 MiB (cgroup v1, no swap)"
  std::vector<std::string> not_enforced;  // "cpu: ... (why)"
  bool memory = false, pids = false, cpu = false;
};

// Creates the directories and writes the limits. A controller that fails is reported in
// not_enforced (with the errno) and its directory removed; the others stay.
Applied Create(Plan& plan, const JailConfig& config);
// Moves `pid` into every directory of the plan.
Status Join(const Plan& plan, int pid);
// SIGKILLs every process still in the plan's cgroups (cgroup.kill on v2), then removes the
// directories, retrying while the kernel finishes tearing the processes down. Idempotent.
Status KillAndRemove(const Plan& plan);
// oom_kill count of the memory cgroup, 0 if there is none (or it is gone).
uint64_t OomKillCount(const Plan& plan);
// The memory and cpu cgroups' counters (v2: memory.current, memory.stat shmem, cpu.stat
// usage_usec; v1: memory.usage_in_bytes, memory.stat shmem, cpuacct.usage, else the CPU
// times in /proc of the memory cgroup's processes); nullopt when either cannot be read.
std::optional<Usage> ReadUsage(const Plan& plan);

}  // namespace codebox::jail::cgroups

#endif  // CODEBOX_JAIL_CGROUPS_H_
