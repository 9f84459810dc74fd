// Leftovers of codebox processes that died without cleaning up (SIGKILL, a crash, power loss): jail
// staging directories, jail cgroups, vm run directories and the store's temp files. Each carries
// its owner's "<pid>-<start>" (base/owner.h; older names only a pid, or the image builder's flock);
// only those whose owner is certainly gone are removed. Run by `codebox gc`, and cheaply once per
// process on its first box start.
#ifndef CODEBOX_BOX_LEFTOVERS_H_
#define CODEBOX_BOX_LEFTOVERS_H_

#include <string>
#include <vector>

namespace codebox::box {

struct LeftoverOptions {
  std::string home;  // codebox store (vm run dirs, image and vm temp files)
  // Also walk every cgroup hierarchy for "codebox-*" directories (for `codebox gc`); without it
  // only the cgroup this process's own jails would go under is looked at.
  bool walk_all_cgroups = false;
  bool dry_run = false;  // only report (in `removed`) what would be removed
};

struct LeftoverReport {
  std::vector<std::string> removed;  // "jail staging directory /run/codebox-jail/..."
  std::vector<std::string> failed;   // what could not be removed, and why
  int live = 0;                      // entries skipped because their owner runs
};

LeftoverReport CollectLeftovers(const LeftoverOptions& options);

// CollectLeftovers without the cgroup walk, at most once per process (later calls return at once).
// Failures are logged at debug level only: a box start never fails because of it.
void CollectLeftoversOnce(const std::string& home);

}  // namespace codebox::box

#endif  // CODEBOX_BOX_LEFTOVERS_H_
