#include "box/leftovers.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>

#include "base/fs.h"
#include "base/io.h"
#include "base/log.h"
#include "base/owner.h"
#include "base/unique_fd.h"
#include "jail/cgroups.h"
#include "jail/jail.h"

namespace codebox::box {
namespace {

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

constexpr int kMaxCgroupDepth = 8;
constexpr size_t kMaxCgroupDirs = 50000;
constexpr pid_t kNoSuchPid = 0x7fffffff;  // above pid_max: OwnerAlive says gone

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    ::closedir(d);
  }
  return out;
}

size_t Dashes(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '-'));
}

// Owner of a jail id: "<pid>-<start>-<n>-<rand>" (3 dashes) or the older "<pid>-<n>-<rand>".
bool JailIdOwner(const std::string& id, base::OwnerRef* owner) {
  if (Dashes(id) == 3) return base::ParseOwnerTag(id, owner, /*with_start=*/true);
  if (Dashes(id) == 2) return base::ParseOwnerTag(id, owner, /*with_start=*/false);
  return false;
}

// A directory held with flock() by a live build (image builder temp dirs).
bool Locked(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return fd.valid() && ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
}

bool OlderThan(const std::string& path, time_t seconds) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && st.st_mtime + seconds < ::time(nullptr);
}

class Collector {
 public:
  Collector(LeftoverReport* report, bool dry_run) : report_(report), dry_run_(dry_run) {}

  // Removes `path` (what: for the report) unless `owner` runs.
  void Consider(const std::string& what, const std::string& path, const base::OwnerRef& owner,
                const std::function<Status()>& remove) {
    if (base::OwnerAlive(owner)) {
      ++report_->live;
      return;
    }
    Status st = dry_run_ ? Status::Ok() : remove();
    if (st.ok()) {
      report_->removed.push_back(what + " " + path);
    } else {
      report_->failed.push_back(what + " " + path + ": " + st.message());
    }
  }

  void StagingDirs() {
    std::string parent = jail::StagingParentPath();
    struct stat st;
    // Only a parent that is ours (as Jail::Start insists) is looked into.
    if (::lstat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
      return;
    }
    for (const auto& name : Entries(parent)) {
      base::OwnerRef owner;
      if (!JailIdOwner(name, &owner)) continue;
      std::string path = parent + "/" + name;
      // Empty on the host side (the box's mounts were private to its namespace): rmdir only.
      Consider("jail staging directory", path, owner, [&path] {
        if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return base::ErrnoStatus("rmdir");
        return Status::Ok();
      });
    }
  }

  // `may_kill`: only where this process's own jails would go. Elsewhere in the hierarchy a
  // "codebox-<pid>-..." may belong to codebox in a container, whose pids mean other processes
  // here: such a cgroup is removed only when nothing runs in it.
  void CgroupsIn(int version, const std::string& dir, bool may_kill) {
    for (const auto& name : Entries(dir)) {
      base::OwnerRef owner;
      if (!name.starts_with("codebox-") || !JailIdOwner(name.substr(8), &owner)) continue;
      std::string path = dir + "/" + name;
      if (!seen_.insert(path).second) continue;
      struct stat st;
      if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
      Consider("jail cgroup", path, owner, [version, may_kill, &path] {
        if (!may_kill) {
          auto procs = base::ReadFile(path + "/cgroup.procs");
          if (procs.ok() && procs->find_first_not_of(" \n") != std::string::npos) {
            return Unavailable(
                "processes run in it and it is not under this process's cgroup (codebox in "
                "another pid namespace?); not killed");
          }
          if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return base::ErrnoStatus("rmdir");
          return Status::Ok();
        }
        jail::cgroups::Plan plan;
        plan.version = version;
        plan.dirs.push_back({"leftover", path});
        // Whatever of the dead owner's box still runs in it is killed first.
        return jail::cgroups::KillAndRemove(plan);
      });
    }
  }

  // Where this process's jails would put their cgroups: the usual place for leftovers of the same
  // user's earlier runs.
  void OwnCgroups() {
    jail::cgroups::Plan plan = jail::cgroups::MakePlan("gc");
    for (const auto& d : plan.dirs) {
      CgroupsIn(plan.version, d.path.substr(0, d.path.rfind('/')), /*may_kill=*/true);
    }
  }

  void AllCgroups() {
    auto mountinfo = base::ReadFile("/proc/self/mountinfo");
    if (!mountinfo.ok()) return;
    std::istringstream is(*mountinfo);
    std::string line;
    size_t budget = kMaxCgroupDirs;
    while (std::getline(is, line)) {
      size_t sep = line.find(" - ");
      if (sep == std::string::npos) continue;
      std::istringstream left(line.substr(0, sep)), right(line.substr(sep + 3));
      std::string f, mountpoint, fstype;
      for (int i = 0; i < 5 && left >> f; ++i) {
        if (i == 4) mountpoint = f;
      }
      right >> fstype;
      if (fstype != "cgroup" && fstype != "cgroup2") continue;
      Walk(fstype == "cgroup2" ? 2 : 1, mountpoint, 0, &budget);
    }
  }

  void RunDirs(const std::string& home) {
    std::string root = home + "/run";
    for (const auto& name : Entries(root)) {
      if (!name.starts_with("vm-")) continue;
      std::string path = root + "/" + name;
      std::string rest = name.substr(3);
      base::OwnerRef owner;
      if (Dashes(rest) == 2 && base::ParseOwnerTag(rest, &owner)) {
        Consider("vm run directory", path, owner, [&path] { return base::RemoveTree(path); });
        continue;
      }
      // Older "vm-XXXXXX": QEMU's pid was written to qemu.pid.
      auto pid_text = base::ReadFile(path + "/qemu.pid");
      if (pid_text.ok() && (owner.pid = std::atoi(pid_text->c_str())) > 0) {
        Consider("vm run directory", path, owner, [&path] { return base::RemoveTree(path); });
      } else if (!pid_text.ok() && OlderThan(path, 24 * 3600)) {
        owner.pid = kNoSuchPid;  // an older name without owner: judged by age alone
        Consider("vm run directory", path, owner, [&path] { return base::RemoveTree(path); });
      }
    }
  }

  void StoreTemps(const std::string& home) {
    const std::string images = home + "/images";
    for (const auto& name : Entries(images)) {
      std::string path = images + "/" + name;
      if (name.starts_with(".tmp-")) {
        // Builder temp dirs ".tmp-<id>-<pid>" and removals ".tmp-rm-<id>-<pid>": a live build holds
        // flock on its dir (builder.cc), and its tools inherit the lock.
        base::OwnerRef owner;
        if (!base::ParseOwnerTag(name.substr(name.rfind('-') + 1), &owner, false)) continue;
        if (Locked(path)) {
          ++report_->live;
          continue;
        }
        Consider("image build temp directory", path, owner,
                 [&path] { return base::RemoveTree(path); });
      } else if (name.size() == 16 &&
                 name.find_first_not_of("0123456789abcdef") == std::string::npos) {
        ErofsTemps(path);
      }
    }
    // by-name and by-ref pointers are replaced through "<name>.tmp-<pid>" symlinks (store.cc).
    for (const char* pointers : {"/by-name/", "/by-ref/"}) {
      for (const auto& name : Entries(images + pointers)) {
        size_t at = name.rfind(".tmp-");
        base::OwnerRef owner;
        if (at == std::string::npos || !base::ParseOwnerTag(name.substr(at + 5), &owner, false)) {
          continue;
        }
        std::string path = images + pointers + name;
        Consider("image name temp link", path, owner, [&path] { return base::RemoveTree(path); });
      }
    }
    ErofsTemps(home + "/disks");
    // Initramfs archives are written through "<file>.tmp.<pid>" (base::WriteFile atomic).
    for (const auto& name : Entries(home + "/initramfs")) {
      size_t at = name.rfind(".tmp.");
      base::OwnerRef owner;
      if (at == std::string::npos || !base::ParseOwnerTag(name.substr(at + 5), &owner, false)) {
        continue;
      }
      std::string path = home + "/initramfs/" + name;
      Consider("vm initramfs temp file", path, owner, [&path] { return base::RemoveTree(path); });
    }
    // Kernel downloads: ".fetch-<pid>-<start>-XXXXXX" (older ones ".fetch-XXXXXX": by age).
    for (const auto& name : Entries(home + "/kernels")) {
      if (!name.starts_with(".fetch-")) continue;
      std::string path = home + "/kernels/" + name;
      std::string rest = name.substr(7);
      base::OwnerRef owner;
      if (Dashes(rest) == 2 && base::ParseOwnerTag(rest, &owner)) {
        Consider("vm kernel download", path, owner, [&path] { return base::RemoveTree(path); });
      } else if (Dashes(rest) == 0 && OlderThan(path, 24 * 3600)) {
        owner.pid = kNoSuchPid;  // an older name without owner: judged by age alone
        Consider("vm kernel download", path, owner, [&path] { return base::RemoveTree(path); });
      }
    }
  }

 private:
  // "<x>.erofs.tmp.<pid>-<start>.<hash>" (older: "<x>.erofs.tmp.<pid>.<hash>"), disk.cc.
  void ErofsTemps(const std::string& dir) {
    for (const auto& name : Entries(dir)) {
      size_t at = name.find(".erofs.tmp.");
      if (at == std::string::npos) continue;
      std::string tag = name.substr(at + 11);
      base::OwnerRef owner;
      bool with_start = tag.find('-') != std::string::npos;
      if (!base::ParseOwnerTag(tag, &owner, with_start)) continue;
      std::string path = dir + "/" + name;
      Consider("vm disk temp file", path, owner, [&path] { return base::RemoveTree(path); });
    }
  }

  void Walk(int version, const std::string& dir, int depth, size_t* budget) {
    CgroupsIn(version, dir, /*may_kill=*/false);
    if (depth >= kMaxCgroupDepth) return;
    for (const auto& name : Entries(dir)) {
      if (*budget == 0) return;
      if (name.starts_with("codebox-")) continue;  // a box's own cgroups are not walked
      std::string path = dir + "/" + name;
      struct stat st;
      if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
      --*budget;
      Walk(version, path, depth + 1, budget);
    }
  }

  LeftoverReport* report_;
  bool dry_run_;
  std::set<std::string> seen_;
};

}  // namespace

LeftoverReport CollectLeftovers(const LeftoverOptions& options) {
  LeftoverReport report;
  Collector c(&report, options.dry_run);
  c.StagingDirs();
  c.OwnCgroups();
  if (options.walk_all_cgroups) c.AllCgroups();
  if (!options.home.empty()) {
    c.RunDirs(options.home);
    c.StoreTemps(options.home);
  }
  return report;
}

void CollectLeftoversOnce(const std::string& home) {
  static std::once_flag once;
  std::call_once(once, [&home] {
    LeftoverOptions options;
    options.home = home;
    LeftoverReport r = CollectLeftovers(options);
    for (const auto& line : r.removed) CODEBOX_LOG(kDebug, "removed leftover " << line);
    for (const auto& line : r.failed) CODEBOX_LOG(kDebug, "leftover not removed: " << line);
  });
}

}  // namespace codebox::box
