// The store's temp dirs: builds and pulls in progress, and what dead ones left.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>

#include "base/fs.h"
#include "base/io.h"
#include "image/store_internal.h"

namespace codebox::image {

std::string NowIso8601() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

// A temp dir is in use while a build holds flock() on it. The lock fd is inherited by
// debootstrap, apt-get and dpkg, so a tool orphaned by a killed build still holds it and its
// tree is not deleted from under it.
bool TempInUse(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return fd.valid() && ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
}

}  // namespace

// Leftovers are of builds and pulls that failed to clean up or were killed, and of
// interrupted removals. One is live while locked or while its pid runs (the moment between
// mkdir and flock, and RemoveImage's unlocked trash dirs).
Status CleanStaleTemps(const std::string& images_dir, const std::string& id,
                       const std::function<void(const std::string&)>& say) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(images_dir.c_str())) {
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.starts_with(".tmp-")) names.push_back(name);
    }
    ::closedir(d);
  }
  for (const std::string& name : names) {
    std::string path = images_dir + "/" + name;
    long pid = std::strtol(name.c_str() + name.rfind('-') + 1, nullptr, 10);
    bool alive =
        pid > 0 && pid != ::getpid() && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
    if (alive || TempInUse(path)) {
      if (name.starts_with(".tmp-" + id + "-")) {
        return Unavailable("another build of this image is running (" + path + " is in use)");
      }
      continue;
    }
    say("removing leftover " + name + " of an earlier build that did not finish");
    RETURN_IF_ERROR(base::RemoveTreeAndMounts(path).WithContext("clean stale build"));
  }
  return Status::Ok();
}

StatusOr<StagingDir> StagingDir::Create(const std::string& images_dir, const std::string& tag) {
  const std::string path = images_dir + "/.tmp-" + tag + "-" + std::to_string(::getpid());
  RETURN_IF_ERROR(base::RemoveTreeAndMounts(path));
  if (::mkdir(path.c_str(), 0755) != 0) return base::ErrnoStatus("mkdir " + path);
  base::UniqueFd lock(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!lock.valid() || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    Status st = base::ErrnoStatus("lock " + path);
    (void)base::RemoveTreeAndMounts(path);
    return st;
  }
  return StagingDir(path, std::move(lock));
}

StagingDir::~StagingDir() {
  if (!path_.empty()) (void)base::RemoveTreeAndMounts(path_);
}

Status StagingDir::CommitTo(const std::string& final_dir) {
  if (base::PathExists(final_dir)) {
    if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) != 0) {
      return base::ErrnoStatus("swap " + path_ + " with " + final_dir);
    }
    return Status::Ok();  // path_ now holds the old tree, which the destructor removes
  }
  if (::rename(path_.c_str(), final_dir.c_str()) != 0) {
    return base::ErrnoStatus("rename " + path_ + " to " + final_dir);
  }
  path_.clear();
  return Status::Ok();
}

}  // namespace codebox::image
