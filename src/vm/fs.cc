#include "vm/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "base/io.h"
#include "base/unique_fd.h"

namespace codebox::vm {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t Fnv(uint64_t h, const char* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= kFnvPrime;
  }
  return h;
}

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Removes the entries of the directory open at `dir_fd` (consumed), without following links.
Status RemoveContents(int dir_fd, const std::string& path) {
  DIR* dir = ::fdopendir(dir_fd);
  if (dir == nullptr) {
    ::close(dir_fd);
    return base::ErrnoStatus("opendir " + path);
  }
  std::vector<std::pair<std::string, bool>> entries;
  while (struct dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    bool is_dir =
        ::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    entries.emplace_back(name, is_dir);
  }
  Status result;
  for (const auto& [name, is_dir] : entries) {
    if (is_dir) {
      int child =
          ::openat(::dirfd(dir), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child >= 0) {
        Status st = RemoveContents(child, path + "/" + name);
        if (!st.ok() && result.ok()) result = st;
      }
    }
    if (::unlinkat(::dirfd(dir), name.c_str(), is_dir ? AT_REMOVEDIR : 0) != 0 && errno != ENOENT &&
        result.ok()) {
      result = base::ErrnoStatus("remove " + path + "/" + name);
    }
  }
  ::closedir(dir);
  return result;
}

}  // namespace

Status MakeDirs(const std::string& path, uint32_t mode) {
  if (path.empty()) return InvalidArgument("mkdir: empty path");
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return base::ErrnoStatus("mkdir " + prefix);
    }
  }
  return Status::Ok();
}

Status RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? Status::Ok() : base::ErrnoStatus("stat " + path);
  }
  if (S_ISDIR(st.st_mode)) {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return base::ErrnoStatus("open " + path);
    RETURN_IF_ERROR(RemoveContents(fd, path));
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return base::ErrnoStatus("rmdir " + path);
    return Status::Ok();
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return base::ErrnoStatus("unlink " + path);
  return Status::Ok();
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

StatusOr<std::string> MakeTempDir(const std::string& parent, const std::string& prefix) {
  RETURN_IF_ERROR(MakeDirs(parent));
  std::string templ = parent + "/" + prefix + "XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) return base::ErrnoStatus("mkdtemp " + templ);
  return templ;
}

std::string HashHex(std::string_view data) {
  return Hex64(Fnv(kFnvOffset, data.data(), data.size()));
}

StatusOr<std::string> HashFileHex(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return base::ErrnoStatus("open " + path);
  uint64_t h = kFnvOffset;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return base::ErrnoStatus("read " + path);
    }
    if (n == 0) break;
    h = Fnv(h, buf, static_cast<size_t>(n));
  }
  return Hex64(h);
}

}  // namespace codebox::vm
