#include "jail/cgroups.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "base/io.h"
#include "base/proc_stat.h"

namespace codebox::jail::cgroups {
namespace {

constexpr char kV2Root[] = "/sys/fs/cgroup";
constexpr char kV2Unified[] = "/sys/fs/cgroup/unified";
constexpr uint64_t kCpuPeriodUs = 100000;
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

bool IsCgroup2(const std::string& path) {
  struct statfs st {};
  return ::statfs(path.c_str(), &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC;
}

std::string ReadSmall(const std::string& path) {
  auto data = base::ReadFile(path);
  return data.ok() ? *data : std::string();
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

}  // namespace

std::map<std::string, std::string> ParseProcCgroup(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string ctrls = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (ctrls.empty()) {
      out["unified"] = path;
      continue;
    }
    std::istringstream cs(ctrls);
    std::string c;
    while (std::getline(cs, c, ',')) out[c] = path;
  }
  return out;
}

std::map<std::string, std::string> ParseV1Mounts(const std::string& mountinfo) {
  std::map<std::string, std::string> out;
  std::istringstream is(mountinfo);
  std::string line;
  while (std::getline(is, line)) {
    size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream left(line.substr(0, sep)), right(line.substr(sep + 3));
    std::string f, mountpoint, fstype, source, options;
    for (int i = 0; i < 5 && left >> f; ++i) {
      if (i == 4) mountpoint = f;
    }
    right >> fstype >> source >> options;
    if (fstype != "cgroup") continue;
    std::istringstream os(options);
    std::string opt;
    while (std::getline(os, opt, ',')) out[opt] = mountpoint;
  }
  return out;
}

namespace {

std::string JoinPath(const std::string& mount, const std::string& rel, const std::string& leaf) {
  std::string p = mount;
  if (rel != "/") p += rel;
  return p + "/" + leaf;
}

std::string Parent(const std::string& path) { return path.substr(0, path.rfind('/')); }

std::string Mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

Status Write(const std::string& dir, const std::string& file, const std::string& value) {
  return base::WriteFile(dir + "/" + file, value).WithContext("cgroup");
}

std::string CpuText(double cpus) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", cpus);
  return buf;
}

}  // namespace

Plan MakePlan(const std::string& id) {
  Plan plan;
  const std::string leaf = "codebox-" + id;
  auto own = ParseProcCgroup(ReadSmall("/proc/self/cgroup"));
  // v2: a unified hierarchy whose cgroup of ours offers the controllers (delegated to us).
  for (const char* root : {kV2Root, kV2Unified}) {
    if (!IsCgroup2(root) || own.count("unified") == 0) continue;
    std::string parent = JoinPath(root, own["unified"], "");
    parent.pop_back();
    std::string controllers = ReadSmall(parent + "/cgroup.controllers");
    bool all = controllers.find("memory") != std::string::npos &&
               controllers.find("pids") != std::string::npos &&
               controllers.find("cpu") != std::string::npos;
    if (!all) continue;  // e.g. the near-empty v2 mount beside v1 hierarchies
    if (::access(parent.c_str(), W_OK) != 0) {
      plan.unavailable.push_back("cgroup v2: no write access to " + parent);
      break;
    }
    plan.version = 2;
    plan.dirs.push_back({"unified", parent + "/" + leaf});
    return plan;
  }
  auto mounts = ParseV1Mounts(ReadSmall("/proc/self/mountinfo"));
  for (const char* ctrl : {"memory", "pids", "cpu"}) {
    if (mounts.count(ctrl) == 0 || own.count(ctrl) == 0) {
      plan.unavailable.push_back(std::string(ctrl) + ": no cgroup v1 or v2 controller mounted");
      continue;
    }
    std::string dir = JoinPath(mounts[ctrl], own[ctrl], leaf);
    if (::access(Parent(dir).c_str(), W_OK) != 0) {
      plan.unavailable.push_back(std::string(ctrl) + ": no write access to cgroup " + Parent(dir) +
                                 " (" + std::strerror(errno) + ")");
      continue;
    }
    plan.dirs.push_back({ctrl, dir});
  }
  if (!plan.dirs.empty()) plan.version = 1;
  return plan;
}

std::vector<std::string> EncodeDirs(const Plan& plan) {
  std::vector<std::string> out;
  for (const auto& d : plan.dirs) out.push_back(d.controller + ":" + d.path);
  for (const auto& u : plan.unavailable) out.push_back("!:" + u);
  return out;
}

Plan DecodeDirs(int version, const std::vector<std::string>& encoded) {
  Plan plan;
  plan.version = version;
  for (const auto& e : encoded) {
    size_t colon = e.find(':');
    if (colon == std::string::npos) continue;
    if (e.substr(0, colon) == "!") {
      plan.unavailable.push_back(e.substr(colon + 1));
    } else {
      plan.dirs.push_back({e.substr(0, colon), e.substr(colon + 1)});
    }
  }
  return plan;
}

Applied Create(Plan& plan, const JailConfig& config) {
  Applied out;
  for (const auto& u : plan.unavailable) out.not_enforced.push_back(u);
  const std::string v = plan.version == 2 ? "cgroup v2" : "cgroup v1";
  std::vector<Dir> kept;
  for (const auto& d : plan.dirs) {
    if (::mkdir(d.path.c_str(), 0755) != 0 && errno != EEXIST) {
      out.not_enforced.push_back(d.controller + ": mkdir " + d.path + ": " + std::strerror(errno));
      continue;
    }
    bool want_memory = d.controller == "memory" || d.controller == "unified";
    bool want_pids = d.controller == "pids" || d.controller == "unified";
    bool want_cpu = d.controller == "cpu" || d.controller == "unified";
    if (plan.version == 2) {
      // Controllers must be enabled in the parent's subtree_control; EBUSY there means the
      // parent holds processes (v2's no-internal-process rule), i.e. it was not delegated.
      Status st = Write(Parent(d.path), "cgroup.subtree_control", "+memory +pids +cpu");
      if (!st.ok()) {
        out.not_enforced.push_back("cgroup v2 controllers: " + st.message());
        ::rmdir(d.path.c_str());
        continue;
      }
    }
    if (want_memory) {
      std::string mem = std::to_string(config.memory_bytes);
      Status st = plan.version == 2 ? Write(d.path, "memory.max", mem)
                                    : Write(d.path, "memory.limit_in_bytes", mem);
      std::string swap;
      if (st.ok() && plan.version == 2) {
        swap = Write(d.path, "memory.swap.max", "0").ok() ? ", no swap" : ", swap not capped";
      } else if (st.ok()) {
        // memsw = mem + swap; equal to the memory limit means no swap at all. Absent when the
        // kernel runs without swap accounting: then swappiness 0 is the best we can do.
        if (Exists(d.path + "/memory.memsw.limit_in_bytes") &&
            Write(d.path, "memory.memsw.limit_in_bytes", mem).ok()) {
          swap = ", no swap";
        } else {
          swap = Write(d.path, "memory.swappiness", "0").ok() ? ", swappiness 0" : "";
        }
      }
      if (st.ok()) {
        out.memory = true;
        out.limits.push_back("memory " + Mib(config.memory_bytes) + " (" + v + swap + ")");
      } else {
        out.not_enforced.push_back("memory cgroup: " + st.message());
      }
    }
    if (want_pids) {
      Status st = Write(d.path, "pids.max", std::to_string(config.max_processes));
      if (st.ok()) {
        out.pids = true;
        out.limits.push_back("processes " + std::to_string(config.max_processes) + " (" + v +
                             " pids)");
      } else {
        out.not_enforced.push_back("pids cgroup: " + st.message());
      }
    }
    if (want_cpu) {
      uint64_t quota = static_cast<uint64_t>(config.cpus * kCpuPeriodUs);
      if (quota < 1000) quota = 1000;  // the kernel's minimum quota is 1 ms
      Status st;
      if (plan.version == 2) {
        st = Write(d.path, "cpu.max", std::to_string(quota) + " " + std::to_string(kCpuPeriodUs));
      } else {
        st = Write(d.path, "cpu.cfs_period_us", std::to_string(kCpuPeriodUs));
        if (st.ok()) st = Write(d.path, "cpu.cfs_quota_us", std::to_string(quota));
      }
      if (st.ok()) {
        out.cpu = true;
        out.limits.push_back("cpu " + CpuText(config.cpus) + " (" + v + " cfs quota " +
                             std::to_string(quota) + "/" + std::to_string(kCpuPeriodUs) + " us)");
      } else {
        out.not_enforced.push_back("cpu cgroup: " + st.message());
      }
    }
    kept.push_back(d);
  }
  plan.dirs = kept;
  if (plan.dirs.empty()) plan.version = 0;
  return out;
}

Status Join(const Plan& plan, int pid) {
  for (const auto& d : plan.dirs) {
    RETURN_IF_ERROR(Write(d.path, "cgroup.procs", std::to_string(pid))
                        .WithContext("join " + d.controller + " cgroup"));
  }
  return Status::Ok();
}

Status KillAndRemove(const Plan& plan) {
  Status result;
  for (const auto& d : plan.dirs) {
    if (!Exists(d.path)) continue;
    if (plan.version == 2) (void)Write(d.path, "cgroup.kill", "1");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      std::istringstream is(ReadSmall(d.path + "/cgroup.procs"));
      int pid = 0;
      while (is >> pid) ::kill(pid, SIGKILL);
      if (::rmdir(d.path.c_str()) == 0 || errno == ENOENT) break;
      if (errno != EBUSY || std::chrono::steady_clock::now() > deadline) {
        result = base::ErrnoStatus("remove cgroup " + d.path);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return result;
}

namespace {

// The value of `key` in a "key value" per line file (memory.stat, cpu.stat).
std::optional<uint64_t> KeyedValue(const std::string& text, std::string_view key) {
  std::istringstream is(text);
  std::string k;
  uint64_t value = 0;
  while (is >> k >> value) {
    if (k == key) return value;
  }
  return std::nullopt;
}

std::optional<uint64_t> SingleValue(const std::string& text) {
  std::istringstream is(text);
  uint64_t value = 0;
  if (is >> value) return value;
  return std::nullopt;
}

// CPU time of the processes in the cgroup `dir` (its cgroup.procs) and of the children they
// reaped. For a v1 host without a cpuacct cgroup of the box's; the box's init reaps every
// orphan, so only processes that exited unreaped since the last read are missed.
std::optional<uint64_t> CpuOfProcesses(const std::string& dir) {
  std::istringstream pids(ReadSmall(dir + "/cgroup.procs"));
  uint64_t total_usec = 0;
  bool any = false;
  for (long pid = 0; pids >> pid;) {
    std::optional<std::chrono::microseconds> cpu = base::ProcessCpuTime(static_cast<pid_t>(pid));
    if (!cpu) continue;  // gone meanwhile
    total_usec += static_cast<uint64_t>(cpu->count());
    any = true;
  }
  if (!any) return std::nullopt;
  return total_usec;
}

}  // namespace

std::optional<Usage> ReadUsage(const Plan& plan) {
  std::optional<uint64_t> memory, shmem, cpu_usec;
  std::string memory_dir;
  for (const auto& d : plan.dirs) {
    if (d.controller == "unified") {
      memory = SingleValue(ReadSmall(d.path + "/memory.current"));
      shmem = KeyedValue(ReadSmall(d.path + "/memory.stat"), "shmem");
      cpu_usec = KeyedValue(ReadSmall(d.path + "/cpu.stat"), "usage_usec");
    } else if (d.controller == "memory") {
      memory = SingleValue(ReadSmall(d.path + "/memory.usage_in_bytes"));
      shmem = KeyedValue(ReadSmall(d.path + "/memory.stat"), "shmem");
      memory_dir = d.path;
    } else if (d.controller == "cpu") {
      // cpuacct is mounted with cpu where a v1 host has both (cpu,cpuacct): nanoseconds.
      if (auto ns = SingleValue(ReadSmall(d.path + "/cpuacct.usage"))) cpu_usec = *ns / 1000;
    }
  }
  if (!cpu_usec && !memory_dir.empty()) cpu_usec = CpuOfProcesses(memory_dir);
  if (!memory || !cpu_usec) return std::nullopt;
  return Usage{*cpu_usec, *memory, shmem.value_or(0)};
}

uint64_t OomKillCount(const Plan& plan) {
  for (const auto& d : plan.dirs) {
    if (d.controller != "memory" && d.controller != "unified") continue;
    std::string file = plan.version == 2 ? "/memory.events" : "/memory.oom_control";
    std::istringstream is(ReadSmall(d.path + file));
    std::string key;
    uint64_t value = 0;
    while (is >> key >> value) {
      if (key == "oom_kill") return value;
    }
  }
  return 0;
}

}  // namespace codebox::jail::cgroups
