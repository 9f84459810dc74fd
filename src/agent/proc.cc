#include "agent/proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "agent/guest_limits.h"
#include "base/unique_fd.h"

namespace codebox::agent {
namespace {

// Reads a small /proc file into buf (NUL-terminated); false if it is gone.
bool ReadSmall(const char* path, char* buf, size_t size) {
  base::UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  ssize_t n = ::read(fd.get(), buf, size - 1);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

bool ParseStat(pid_t pid, ProcInfo* out) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  char buf[1024];
  return ReadSmall(path, buf, sizeof buf) && ParseStatLine(pid, buf, out);
}

}  // namespace

bool ParseStatLine(pid_t pid, const char* line, ProcInfo* out) {
  // The command name may contain spaces and ')': the fields start after the last ')'.
  const char* close = std::strrchr(line, ')');
  if (close == nullptr) return false;
  char state = '?';
  int ppid = 0, pgrp = 0, session = 0;
  if (std::sscanf(close + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) != 4) return false;
  *out = ProcInfo{pid, ppid, pgrp, session, state};
  return true;
}

std::vector<ProcInfo> ListProcesses() {
  std::vector<ProcInfo> result;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return result;
  while (dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
    ProcInfo info;
    if (ParseStat(static_cast<pid_t>(pid), &info) && info.state != 'Z') result.push_back(info);
  }
  ::closedir(dir);
  return result;
}

bool DescendsFrom(pid_t pid, pid_t ancestor, const std::vector<ProcInfo>& all) {
  std::unordered_map<pid_t, pid_t> parent;
  for (const ProcInfo& p : all) parent[p.pid] = p.ppid;
  // Bounded walk: ppid links form a tree, but a racy snapshot could in theory show a cycle.
  for (size_t steps = 0; steps <= all.size() && pid > 1; ++steps) {
    auto it = parent.find(pid);
    if (it == parent.end()) return false;
    pid = it->second;
    if (pid == ancestor) return true;
  }
  return false;
}

int SignalProcess(pid_t target, int sig) {
  if (::kill(target, sig) == 0) return 0;
  if (errno != EPERM) return -1;
  uid_t real = 0, effective = 0, saved = 0;
  if (::getresuid(&real, &effective, &saved) != 0 || saved == effective) {
    errno = EPERM;
    return -1;
  }
  const long fs_uid = ::syscall(SYS_setfsuid, -1);  // asks, changes nothing
  if (::syscall(SYS_setresuid, -1, saved, -1) != 0) {
    errno = EPERM;
    return -1;
  }
  const int rc = ::kill(target, sig);
  const int err = errno;
  // Back to root, which the real uid allows; a change of the effective uid resets the
  // filesystem one, which is set again.
  ::syscall(SYS_setresuid, -1, effective, -1);
  ::syscall(SYS_setfsuid, fs_uid);
  uid_t now_effective = 0;
  if (::getresuid(&real, &now_effective, &saved) != 0 || now_effective != effective ||
      ::syscall(SYS_setfsuid, -1) != fs_uid) {
    ::abort();  // an agent left with the wrong ids must not go on
  }
  errno = err;
  return rc;
}

int KillMatching(const std::function<bool(const ProcInfo&, const std::vector<ProcInfo>&)>& victim) {
  const pid_t self = ::getpid();
  std::unordered_set<pid_t> killed;
  // Passes until one finds no new victim: anything forked between a scan and its kill is
  // found by the next scan. A killed process may still show (not yet dead) and is skipped.
  for (int pass = 0; pass < 20; ++pass) {
    std::vector<ProcInfo> all = ListProcesses();
    bool found_new = false;
    for (const ProcInfo& p : all) {
      if (p.pid == self || p.pid == 1 || killed.count(p.pid) || !victim(p, all)) continue;
      if (SignalProcess(p.pid, SIGKILL) == 0) {
        killed.insert(p.pid);
        found_new = true;
      }
    }
    if (!found_new) break;
  }
  return static_cast<int>(killed.size());
}

uint64_t ReadOomKillCount() {
  if (std::optional<uint64_t> box = ExecCgroupOomKills()) return *box;
  char buf[16384];
  if (!ReadSmall("/proc/vmstat", buf, sizeof buf)) return 0;
  return ParseOomKillCount(buf);
}

uint64_t ParseOomKillCount(const char* vmstat) {
  // Not the first line of /proc/vmstat, so "\n" keeps "oom_kill" from matching inside
  // another name.
  const char* p = std::strstr(vmstat, "\noom_kill ");
  if (p == nullptr) return 0;
  return std::strtoull(p + 10, nullptr, 10);
}

}  // namespace codebox::agent
