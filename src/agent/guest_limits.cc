#include "agent/guest_limits.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>

#include "agent/proc.h"
#include "base/io.h"
#include "base/unique_fd.h"

namespace codebox::agent {
namespace {

// Opened by SetUpExecCgroup and kept: children join through the descriptor, not a path that
// code in the box (root in its guest) could have mounted over. -1: no cgroup.
int g_procs_fd = -1;
int g_events_fd = -1;  // memory.events, read with pread from offset 0 (the kernel rewrites it)

void Replace(int& slot, base::UniqueFd fd) {
  if (slot >= 0) ::close(slot);
  slot = fd.release();
}

}  // namespace

std::string CgroupLimit(int64_t value) { return value > 0 ? std::to_string(value) : "max"; }

Status PrepareExecCgroup() {
  if (g_procs_fd >= 0) return Status::Ok();
  constexpr const char* kRoot = "/sys/fs/cgroup";
  struct statfs fs {};
  if (::statfs(kRoot, &fs) != 0 || fs.f_type != CGROUP2_SUPER_MAGIC) {
    ::mkdir(kRoot, 0755);
    if (::mount("cgroup2", kRoot, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
      return base::ErrnoStatus("mount cgroup2 on /sys/fs/cgroup");
    }
  }
  // The root cgroup may hold processes (the agent) and still hand controllers down.
  RETURN_IF_ERROR(base::WriteFile(std::string(kRoot) + "/cgroup.subtree_control", "+pids +memory")
                      .WithContext("enable the pids and memory controllers"));
  if (::mkdir(kExecCgroup, 0755) != 0 && errno != EEXIST) {
    return base::ErrnoStatus(std::string("mkdir ") + kExecCgroup);
  }
  const std::string dir = kExecCgroup;
  base::UniqueFd procs(::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
  if (!procs.valid()) return base::ErrnoStatus("open " + dir + "/cgroup.procs");
  base::UniqueFd events(::open((dir + "/memory.events").c_str(), O_RDONLY | O_CLOEXEC));
  if (!events.valid()) return base::ErrnoStatus("open " + dir + "/memory.events");
  // The agent stays in the root cgroup, outside the limits, and the guest's OOM killer (the
  // kernel's own, should the guest as a whole run out) never picks it.
  RETURN_IF_ERROR(base::WriteFile("/proc/self/oom_score_adj", "-1000")
                      .WithContext("protect the agent from the OOM killer"));
  Replace(g_procs_fd, std::move(procs));
  Replace(g_events_fd, std::move(events));
  return Status::Ok();
}

Status SetUpExecCgroup(int64_t max_processes, int64_t memory_bytes) {
  RETURN_IF_ERROR(PrepareExecCgroup());
  const std::string dir = kExecCgroup;
  RETURN_IF_ERROR(base::WriteFile(dir + "/pids.max", CgroupLimit(max_processes)));
  RETURN_IF_ERROR(base::WriteFile(dir + "/memory.max", CgroupLimit(memory_bytes)));
  return Status::Ok();
}

bool JoinExecCgroup() {
  if (g_procs_fd < 0) return true;
  // "0" is the writing process. Moving in is not refused at pids.max (only fork is), so a
  // box whose processes fill the limit still gets the host's next exec.
  if (::write(g_procs_fd, "0", 1) != 1) return false;
  int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "0", 1) == 1;
  ::close(fd);
  return ok;
}

std::optional<uint64_t> ExecCgroupOomKills() {
  if (g_events_fd < 0) return std::nullopt;
  char buf[1024];
  // A leading newline: ParseOomKillCount finds "oom_kill" only at the start of a line.
  buf[0] = '\n';
  ssize_t n = ::pread(g_events_fd, buf + 1, sizeof buf - 2, 0);
  if (n <= 0) return uint64_t{0};
  buf[n + 1] = '\0';
  return ParseOomKillCount(buf);
}

}  // namespace codebox::agent
