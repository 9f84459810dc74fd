#include "jail/rlimits.h"

#include "base/io.h"

namespace codebox::jail::rlimits {

Plan MakePlan(const JailConfig& config, bool memory_cgroup, bool pids_cgroup) {
  Plan plan;
  plan.limits.push_back({RLIMIT_NOFILE, config.max_open_files, "RLIMIT_NOFILE"});
  plan.descriptions.push_back("open files " + std::to_string(config.max_open_files) +
                              " per process (RLIMIT_NOFILE)");
  plan.limits.push_back({RLIMIT_CORE, 0, "RLIMIT_CORE"});
  // No RLIMIT_FSIZE: a file filling the scratch disk must fail with ENOSPC (what "disk full"
  // means to programs), not be killed by SIGXFSZ at the same size.
  // NPROC is set even under a pids cgroup: a second, independent fence against fork bombs.
  plan.limits.push_back({RLIMIT_NPROC, config.max_processes, "RLIMIT_NPROC"});
  if (!pids_cgroup) {
    plan.descriptions.push_back("processes " + std::to_string(config.max_processes) +
                                " (RLIMIT_NPROC of box root's uid)");
  }
  if (!memory_cgroup) {
    // Address space, not resident memory: a crude stand-in (mmap-heavy runtimes reserve
    // more than they use), but the only per-process memory bound without a cgroup.
    plan.limits.push_back({RLIMIT_AS, config.memory_bytes, "RLIMIT_AS"});
    plan.descriptions.push_back("memory " + std::to_string(config.memory_bytes >> 20) +
                                " MiB address space per process (RLIMIT_AS)");
  }
  return plan;
}

Status Apply(const Plan& plan) {
  for (const auto& l : plan.limits) {
    rlimit rl{l.value, l.value};
    if (::setrlimit(l.resource, &rl) != 0) return base::ErrnoStatus(std::string("set ") + l.name);
  }
  return Status::Ok();
}

}  // namespace codebox::jail::rlimits
