#include "image/fs_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "base/io.h"

namespace codebox::image {
namespace {

// Mount points listed in /proc/self/mountinfo at or below `path`. Field 5 is the mount point,
// with space, tab, newline and backslash written as octal escapes.
std::vector<std::string> MountsUnder(const std::string& path) {
  std::vector<std::string> found;
  auto info = base::ReadFile("/proc/self/mountinfo");
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
  std::sort(found.begin(), found.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return found;
}

int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  int rc = (type == FTW_DP) ? ::rmdir(path) : ::unlink(path);
  if (rc != 0 && errno != ENOENT) return errno;
  return 0;
}

std::set<std::pair<dev_t, ino_t>>* g_seen_inodes = nullptr;
uint64_t g_tree_size = 0;

int AddSize(const char*, const struct stat* st, int type, struct FTW*) {
  if (type != FTW_F && type != FTW_SL) return 0;
  if (st->st_nlink > 1 && !g_seen_inodes->insert({st->st_dev, st->st_ino}).second) return 0;
  g_tree_size += static_cast<uint64_t>(st->st_size);
  return 0;
}

}  // namespace

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

Status RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? Status::Ok() : base::ErrnoStatus("stat " + path);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0) return base::ErrnoStatus("remove " + path);
    return Status::Ok();
  }
  for (const std::string& m : MountsUnder(path)) {
    // MNT_DETACH: a busy mount is still cut out of our tree, so the walk below can't enter it.
    if (::umount2(m.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
      return base::ErrnoStatus("unmount " + m + " (left inside " + path + ")");
    }
  }
  // FTW_PHYS: never follow symlinks out of the tree; FTW_MOUNT: stay on one filesystem.
  int rc = ::nftw(path.c_str(), RemoveEntry, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  if (rc != 0) {
    int err = rc > 0 ? rc : errno;
    return base::ErrnoStatus("remove " + path, err);
  }
  return Status::Ok();
}

Status RemoveChildren(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return errno == ENOENT ? Status::Ok() : base::ErrnoStatus("open " + dir);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  for (const std::string& name : names) RETURN_IF_ERROR(RemoveTree(dir + "/" + name));
  return Status::Ok();
}

uint64_t TreeSize(const std::string& path) {
  std::set<std::pair<dev_t, ino_t>> seen;
  g_seen_inodes = &seen;
  g_tree_size = 0;
  ::nftw(path.c_str(), AddSize, 64, FTW_PHYS | FTW_MOUNT);
  g_seen_inodes = nullptr;
  return g_tree_size;
}

Status MakeDirs(const std::string& path, unsigned mode) {
  if (path.empty()) return Status::Ok();
  for (size_t pos = 1;; ++pos) {
    pos = path.find('/', pos);
    std::string part = path.substr(0, pos);
    if (::mkdir(part.c_str(), mode) != 0 && errno != EEXIST) {
      return base::ErrnoStatus("mkdir " + part);
    }
    if (pos == std::string::npos) break;
  }
  return Status::Ok();
}

std::string FormatSize(uint64_t bytes) {
  char buf[32];
  double b = static_cast<double>(bytes);
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1 << 30));
  } else if (bytes >= (uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.0f MiB", b / (1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(buf, sizeof buf, "%.0f KiB", b / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

}  // namespace codebox::image
