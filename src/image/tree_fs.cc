#include "image/tree_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "base/fs.h"
#include "base/io.h"
#include "base/text.h"

namespace codebox::image {

std::string QuoteTreeName(std::string_view name) {
  return "'" + base::TerminalSafe(name, 1024) + "'";
}

int OpenInTreeFd(int root_fd, const std::string& path, uint64_t flags) {
  struct open_how how {};
  how.flags = flags | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  const char* p = path.empty() ? "." : path.c_str();
  for (int tries = 0;; ++tries) {
    long fd = ::syscall(SYS_openat2, root_fd, p, &how, sizeof how);
    if (fd >= 0 || errno != EAGAIN || tries == 8) return static_cast<int>(fd);
  }
}

StatusOr<base::UniqueFd> OpenInTree(int root_fd, const std::string& path, int flags) {
  base::UniqueFd fd(OpenInTreeFd(root_fd, path, static_cast<uint64_t>(flags)));
  if (!fd.valid()) return base::ErrnoStatus("open " + path + " in the image");
  return fd;
}

int OpenTreeSubdir(int dir_fd, const std::string& name) {
  struct open_how how {};
  how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  return static_cast<int>(::syscall(SYS_openat2, dir_fd, name.c_str(), &how, sizeof how));
}

Status RemoveInTree(int dir_fd, const std::string& name, const std::string& shown, int depth) {
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? Status::Ok() : base::ErrnoStatus("stat " + QuoteTreeName(shown));
  }
  if (S_ISDIR(st.st_mode)) {
    if (depth >= kMaxTreeDepth) {
      return LimitExceeded("remove " + QuoteTreeName(shown) + ": directories nested deeper than " +
                           std::to_string(kMaxTreeDepth));
    }
    base::UniqueFd sub(OpenTreeSubdir(dir_fd, name));
    if (!sub.valid()) return base::ErrnoStatus("open directory " + QuoteTreeName(shown));
    ASSIGN_OR_RETURN(std::vector<std::string> names,
                     base::ListNamesAt(sub.get(), QuoteTreeName(shown)));
    for (const std::string& n : names) {
      RETURN_IF_ERROR(RemoveInTree(sub.get(), n, shown + "/" + n, depth + 1));
    }
  }
  if (::unlinkat(dir_fd, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0 &&
      errno != ENOENT) {
    return base::ErrnoStatus("remove " + QuoteTreeName(shown));
  }
  return Status::Ok();
}

StatusOr<std::string> ReadTreeFile(int root_fd, const std::string& path, uint64_t max_bytes) {
  ASSIGN_OR_RETURN(base::UniqueFd fd, OpenInTree(root_fd, path, O_RDONLY | O_NOFOLLOW));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return base::ErrnoStatus("stat " + path + " in the image");
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path + " in the image is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return InvalidArgument(path + " in the image is larger than " + std::to_string(max_bytes) +
                           " bytes");
  }
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return base::ErrnoStatus("read " + path + " in the image");
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > max_bytes) return InvalidArgument(path + " in the image grew while read");
  }
  return data;
}

bool TreeDirHasEntries(int root_fd, const std::string& path) {
  auto fd = OpenInTree(root_fd, path, O_RDONLY | O_DIRECTORY);
  if (!fd.ok()) return false;
  DIR* dir = ::fdopendir(fd->release());
  if (dir == nullptr) return false;
  bool any = false;
  while (struct dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") {
      any = true;
      break;
    }
  }
  ::closedir(dir);
  return any;
}

Status EnsureTreeDir(int dir_fd, const std::string& name, uint32_t mode) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    if (::unlinkat(dir_fd, name.c_str(), 0) != 0) return base::ErrnoStatus("unlink " + name);
  } else if (errno != ENOENT) {
    return base::ErrnoStatus("stat " + name);
  }
  if (::mkdirat(dir_fd, name.c_str(), mode) != 0) return base::ErrnoStatus("mkdir " + name);
  return Status::Ok();
}

}  // namespace codebox::image
