// The jail driver's boundary: the image and the agent behind Linux namespaces, a read-only
// root, seccomp, cgroups and rlimits, run by a supervisor process separate from the caller.
#ifndef CODEBOX_JAIL_JAIL_H_
#define CODEBOX_JAIL_JAIL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "codebox/status.h"

namespace codebox::jail {

// A user of the box besides root: ids in the box (0..2^32 - 2).
// A jail's cgroup counters (Jail::Usage).
struct Usage {
  uint64_t cpu_usec = 0;      // CPU time of every process in it so far
  uint64_t memory_bytes = 0;  // memory charged to it now, its tmpfs scratch files included
  uint64_t shmem_bytes = 0;   // of which shared memory: its tmpfs files, /dev/shm
};

struct BoxUser {
  uint32_t uid = 0;
  uint32_t gid = 0;
  bool operator==(const BoxUser&) const = default;
};

struct JailConfig {
  std::string rootfs;      // image tree, mounted read-only as /
  std::string agent_path;  // host path of the static codebox-agent; run as PID 1 from a sealed copy
  std::string workdir = "/work";  // created writable (on the scratch tmpfs)
  std::string hostname = "codebox";
  uint64_t memory_bytes = 512ull << 20;
  uint64_t disk_bytes = 256ull << 20;  // size of the writable tmpfs layer
  uint32_t max_processes = 128;
  uint32_t max_open_files = 1024;
  double cpus = 1.0;
  // The image's user: its uid and gid are mapped in the box's user namespace besides root's,
  // the workdir is made theirs, and the agent keeps their ids to run execs as them. Needs
  // CanMapUser(). nullopt: root only, as for a recipe image.
  std::optional<BoxUser> user = std::nullopt;
};

// Whether a jail can map a user besides root: only host root may write a user namespace's id
// map with more than the writer's own id (user_namespaces(7)), so otherwise a box has one id,
// root's, and runs everything as it.
bool CanMapUser();

// Parent of the per-jail staging directories: /run/codebox-jail for root, else
// /tmp/codebox-jail-<uid>. Each jail's is "<parent>/<id>", id = "<pid>-<start>-<n>-<random>"
// (base/owner.h), also its cgroups' "codebox-<id>"; `codebox gc` uses that to find leftovers.
std::string StagingParentPath();

// Whether this host can run jails, and if not, why (for `codebox doctor` and `auto`).
Status ProbeJailSupport();

class Jail {
 public:
  // Starts the supervisor and the agent inside; returns once the agent's fd is connected
  // (the hello handshake is the caller's).
  static StatusOr<std::unique_ptr<Jail>> Start(const JailConfig& config);
  ~Jail();  // Destroy()

  // The host end of the agent's byte stream; valid once.
  base::UniqueFd TakeAgentFd();
  // Kills everything in the box and removes every mount, cgroup and scratch file. Idempotent.
  Status Destroy();
  // Count of OOM kills in the box's memory cgroup so far (0 when no cgroup is in force).
  uint64_t OomKillCount() const;
  // Its cgroups' counters; kUnavailable without a memory and a cpu cgroup, kFailedPrecondition
  // once destroyed.
  StatusOr<jail::Usage> Usage() const;
  // Human-readable limits in force ("memory 512 MiB (cgroup v1)") and those not enforced
  // with the reason.
  const std::vector<std::string>& limits() const;
  const std::vector<std::string>& limits_not_enforced() const;

  class Impl;

 private:
  explicit Jail(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace codebox::jail

#endif  // CODEBOX_JAIL_JAIL_H_
