#include "image/tree_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "base/io.h"

namespace codebox::image {

StatusOr<base::UniqueFd> OpenInTree(int root_fd, const std::string& path, int flags) {
  struct open_how how {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  long fd;
  do {
    fd = ::syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof how);
  } while (fd < 0 && errno == EAGAIN);  // a concurrent rename elsewhere: retry
  if (fd < 0) return base::ErrnoStatus("open " + path + " in the image");
  return base::UniqueFd(static_cast<int>(fd));
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
