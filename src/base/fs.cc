#include "base/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "base/io.h"
#include "base/unique_fd.h"

namespace codebox::base {
namespace {

// Whether `name` in `dir_fd` is the root of a mount (a bind mount of the same filesystem
// included, which a st_dev comparison would miss).
bool IsMountRoot(int dir_fd, const char* name) {
  struct statx stx {};
  if (::statx(dir_fd, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) != 0) return false;
  return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 &&
         (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

// Opens the directory `name` in `dir_fd` without following a symlink or crossing a mount.
// Fails with EXDEV on a mount point.
int OpenSubdir(int dir_fd, const char* name) {
  struct open_how how {};
  how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, dir_fd, name, &how, sizeof how);
  if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
  // Kernels before 5.6 (or a seccomp filter that hides openat2).
  if (IsMountRoot(dir_fd, name)) {
    errno = EXDEV;
    return -1;
  }
  return ::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

Status MountPointError(const std::string& path) {
  return IoError("remove " + path + ": it is a mount point; it was left alone (unmount it first)");
}

// Removes what is in the directory open at `dir_fd`. Keeps going past errors (so as much as
// possible goes) and returns the first.
Status RemoveContents(int dir_fd, const std::string& path) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListNamesAt(dir_fd, path));
  Status result;
  auto note = [&result](Status st) {
    if (!st.ok() && result.ok()) result = std::move(st);
  };
  for (const std::string& name : names) {
    std::string child = path + "/" + name;
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) note(ErrnoStatus("stat " + child));
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(OpenSubdir(dir_fd, name.c_str()));
      if (!sub.valid()) {
        if (errno == EXDEV) {
          note(MountPointError(child));
        } else if (errno != ENOENT) {
          note(ErrnoStatus("open " + child));
        }
        continue;
      }
      note(RemoveContents(sub.get(), child));
    }
    if (::unlinkat(dir_fd, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0 &&
        errno != ENOENT) {
      note(errno == EBUSY ? MountPointError(child) : ErrnoStatus("remove " + child));
    }
  }
  return result;
}

// Mount points in /proc/self/mountinfo at or below `path`, deepest first. Field 5 is the
// mount point, with space, tab, newline and backslash written as octal escapes.
std::vector<std::string> MountsUnder(const std::string& path) {
  std::vector<std::string> found;
  auto info = ReadFile("/proc/self/mountinfo");
  if (!info.ok()) return found;
  std::istringstream in(*info);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string f, mount_point;
    for (int i = 0; i < 5 && fields >> f; ++i) mount_point = f;
    std::string decoded;
    for (size_t i = 0; i < mount_point.size(); ++i) {
      if (mount_point[i] == '\\' && i + 3 < mount_point.size()) {
        decoded.push_back(static_cast<char>(std::stoi(mount_point.substr(i + 1, 3), nullptr, 8)));
        i += 3;
      } else {
        decoded.push_back(mount_point[i]);
      }
    }
    if (decoded == path || decoded.starts_with(path + "/")) found.push_back(decoded);
  }
  // Deepest first, so that a mount stacked inside another goes before its parent.
  std::stable_sort(found.begin(), found.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return found;
}

void AddTreeSize(int dir_fd, dev_t dev, std::set<std::pair<dev_t, ino_t>>& seen, uint64_t& total) {
  auto names = ListNamesAt(dir_fd, "");
  if (!names.ok()) return;
  for (const std::string& name : *names) {
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != dev) {
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(OpenSubdir(dir_fd, name.c_str()));
      if (sub.valid()) AddTreeSize(sub.get(), dev, seen, total);
    } else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
      if (st.st_nlink > 1 && !seen.insert({st.st_dev, st.st_ino}).second) continue;
      total += static_cast<uint64_t>(st.st_size);
    }
  }
}

}  // namespace

Status MakeDirs(const std::string& path, uint32_t mode) {
  if (path.empty()) return InvalidArgument("mkdir: empty path");
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoStatus("mkdir " + prefix);
    }
  }
  return Status::Ok();
}

Status RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? Status::Ok() : ErrnoStatus("stat " + path);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return errno == EBUSY ? MountPointError(path) : ErrnoStatus("remove " + path);
    }
    return Status::Ok();
  }
  if (IsMountRoot(AT_FDCWD, path.c_str())) return MountPointError(path);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return errno == ENOENT ? Status::Ok() : ErrnoStatus("open " + path);
  RETURN_IF_ERROR(RemoveContents(fd.get(), path));
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("remove " + path);
  return Status::Ok();
}

Status RemoveTreeAndMounts(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? Status::Ok() : ErrnoStatus("stat " + path);
  }
  // Only a directory can have mounts below it; a symlink must not steer us to its target.
  if (S_ISDIR(st.st_mode)) {
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr) return ErrnoStatus("resolve " + path);
    std::string resolved = real;
    std::free(real);
    for (const std::string& m : MountsUnder(resolved)) {
      // MNT_DETACH: a busy mount is still cut out of our tree, so the walk cannot enter it.
      if (::umount2(m.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL &&
          errno != ENOENT) {
        return ErrnoStatus("unmount " + m + " (inside " + path + ")");
      }
    }
  }
  return RemoveTree(path);
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

std::string TempRoot() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp";
}

StatusOr<std::string> MakeTempDir(const std::string& parent, const std::string& prefix) {
  RETURN_IF_ERROR(MakeDirs(parent));
  std::string templ = parent + "/" + prefix + "XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) return ErrnoStatus("mkdtemp " + templ);
  return templ;
}

uint64_t TreeSize(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return 0;
  if (!S_ISDIR(st.st_mode)) return S_ISREG(st.st_mode) || S_ISLNK(st.st_mode) ? st.st_size : 0;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return 0;
  std::set<std::pair<dev_t, ino_t>> seen;
  uint64_t total = 0;
  AddTreeSize(fd.get(), st.st_dev, seen, total);
  return total;
}

StatusOr<std::vector<std::string>> ListNamesAt(int dir_fd, const std::string& path) {
  // openat(".") rather than dup: an O_PATH fd cannot be read as a directory.
  int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = fd < 0 ? nullptr : ::fdopendir(fd);
  if (dir == nullptr) {
    Status st = ErrnoStatus("open directory " + path);
    if (fd >= 0) ::close(fd);
    return st;
  }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  ::closedir(dir);
  return names;
}

}  // namespace codebox::base
