// Per-process resource limits of the box: always open files and core size; and,
// where the cgroup for it is not in force, the rlimit fallback for memory (RLIMIT_AS) and
// process count (RLIMIT_NPROC, per uid — box root's uid is the box's alone when the host
// user is root, see namespaces.h).
#ifndef CODEBOX_JAIL_RLIMITS_H_
#define CODEBOX_JAIL_RLIMITS_H_

#include <sys/resource.h>

#include <string>
#include <vector>

#include "codebox/status.h"
#include "jail/jail.h"

namespace codebox::jail::rlimits {

struct Limit {
  int resource;
  rlim_t value;
  const char* name;
};

struct Plan {
  std::vector<Limit> limits;
  std::vector<std::string> descriptions;  // for Jail::limits()
};

// Decided in the supervisor (which knows which cgroups took), applied in the child.
Plan MakePlan(const JailConfig& config, bool memory_cgroup, bool pids_cgroup);
Status Apply(const Plan& plan);

}  // namespace codebox::jail::rlimits

#endif  // CODEBOX_JAIL_RLIMITS_H_
