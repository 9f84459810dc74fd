#include "agent/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <vector>

#include "base/io.h"

namespace codebox::agent {

namespace {

// Like base::ErrnoStatus, but ENOENT/ENOTDIR become kNotFound and EINVAL-like errors
// kInvalidArgument, so the host can tell "no such file" from a failing disk.
Status PathError(std::string_view what, const std::string& path, int err = errno) {
  Status st = base::ErrnoStatus(std::string(what) + " " + path, err);
  if (err == ENOENT || err == ENOTDIR) return NotFound(st.message());
  if (err == EISDIR || err == EINVAL || err == ENAMETOOLONG || err == EEXIST) {
    return InvalidArgument(st.message());
  }
  if (err == EACCES || err == EPERM || err == EROFS) return PermissionDenied(st.message());
  return st;
}

std::string Parent(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

std::string_view ErrorCodeName(const Status& status) { return StatusCodeName(status.code()); }

Status MakeDir(const std::string& path, uint32_t mode, bool parents,
               const std::optional<protocol::msg::User>& owner) {
  if (path.empty()) return InvalidArgument("mkdir: empty path");
  if (parents) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return Status::Ok();
      return InvalidArgument("mkdir " + path + ": exists and is not a directory");
    }
    std::string parent = Parent(path);
    if (parent != path && parent != "/" && parent != ".") {
      RETURN_IF_ERROR(MakeDir(parent, 0755, true, owner));
    }
  }
  if (::mkdir(path.c_str(), mode) != 0) {
    if (parents && errno == EEXIST) return Status::Ok();  // made meanwhile: not ours to give
    return PathError("mkdir", path);
  }
  return owner ? ChownDir(path, owner->uid, owner->gid) : Status::Ok();
}

Status ChownDir(const std::string& path, uint32_t uid, uint32_t gid) {
  const std::string owner = std::to_string(uid) + ":" + std::to_string(gid);
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return PathError("mkdir: open the directory", path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return PathError("mkdir: stat", path);
  if (st.st_uid == uid && st.st_gid == gid) return Status::Ok();
  if (::fchown(fd.get(), uid, gid) != 0) {
    return PathError("mkdir: give " + owner + " the directory", path);
  }
  return Status::Ok();
}

StatusOr<FileWriter> FileWriter::Open(const std::string& path, uint32_t mode, bool parents,
                                      const std::optional<protocol::msg::User>& owner) {
  if (path.empty() || path.back() == '/')
    return InvalidArgument("write: bad path \"" + path + "\"");
  // The client names the write ("write PATH", "copy HOST to box PATH"): its errors here say
  // what failed in the words the client's context starts with, so that it is said once.
  if (parents) RETURN_IF_ERROR(MakeDir(Parent(path), 0755, true, owner));
  static std::atomic<uint64_t> counter{0};
  FileWriter w;
  w.path_ = path;
  w.temp_path_ = Parent(path) + "/.codebox-tmp-" + std::to_string(::getpid()) + "-" +
                 std::to_string(counter++);
  // A new file (O_EXCL): never a FIFO, device or symlink someone put there; renamed over the
  // target in Finish(), which replaces a final symlink instead of following it.
  w.fd_.reset(::open(w.temp_path_.c_str(),
                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                     0600));
  // The temporary name is ours; the user asked for `path` (the errno is its directory's).
  if (!w.fd_.valid()) return PathError("write", path);
  if (owner) {
    struct stat st;
    if (::fstat(w.fd_.get(), &st) != 0) return PathError("write", path);
    if ((st.st_uid != owner->uid || st.st_gid != owner->gid) &&
        ::fchown(w.fd_.get(), owner->uid, owner->gid) != 0) {
      return PathError("write: give " + std::to_string(owner->uid) + ":" +
                           std::to_string(owner->gid) + " the file",
                       path);
    }
  }
  // The mode is applied explicitly (and after fchown, which clears set-id bits): the umask
  // must not change what the host asked for.
  if (::fchmod(w.fd_.get(), mode & 07777) != 0) return PathError("write", path);
  return w;
}

FileWriter::~FileWriter() {
  if (fd_.valid()) {
    fd_.reset();
    ::unlink(temp_path_.c_str());
  }
}

Status FileWriter::Write(std::string_view chunk) {
  if (!fd_.valid()) return Internal("write_file: writer already finished");
  Status st = base::WriteAll(fd_.get(), chunk);
  if (!st.ok()) return st.WithContext("write " + path_);
  return Status::Ok();
}

Status FileWriter::Finish() {
  if (!fd_.valid()) return Internal("write_file: writer already finished");
  int fd = fd_.release();
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(temp_path_.c_str());
    return PathError("write", path_, err);
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(temp_path_.c_str());
    return PathError("write", path_, err);
  }
  return Status::Ok();
}

static const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

StatusOr<OpenedFile> OpenForRead(const std::string& path) {
  OpenedFile f;
  // O_NONBLOCK: opening a FIFO (there from the start, or swapped in since the host listed the
  // directory) returns at once instead of waiting for a writer; O_NOFOLLOW: a final symlink is
  // refused rather than followed; O_NOCTTY: a tty never becomes the agent's terminal.
  f.fd.reset(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC));
  if (!f.fd.valid()) {
    if (errno == ELOOP) {
      return InvalidArgument("read " + path + ": is a symbolic link (not followed)");
    }
    return PathError("read", path);
  }
  struct stat st;
  if (::fstat(f.fd.get(), &st) != 0) return PathError("read", path);
  // Only a regular file is read; its reads never block, whatever O_NONBLOCK says.
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument("read " + path + ": " + KindOf(st.st_mode) + ", not a regular file");
  }
  f.size = static_cast<uint64_t>(st.st_size);
  f.mode = st.st_mode & 07777;
  return f;
}

StatusOr<protocol::Json> ListDir(const std::string& path) {
  // O_DIRECTORY|O_NONBLOCK: a FIFO at the path fails at once (ENOTDIR) instead of blocking.
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return PathError("list", path);
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    int err = errno;
    ::close(fd);
    return PathError("list", path, err);
  }
  protocol::Json entries = protocol::Json::array();
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // raced away
    const char* type = S_ISREG(st.st_mode)   ? "file"
                       : S_ISDIR(st.st_mode) ? "dir"
                       : S_ISLNK(st.st_mode) ? "symlink"
                                             : "other";
    entries.push_back({{"name", name},
                       {"type", type},
                       {"size", static_cast<uint64_t>(st.st_size)},
                       {"mode", static_cast<uint32_t>(st.st_mode & 07777)}});
  }
  ::closedir(dir);
  return protocol::Json{{"event", "entries"}, {"entries", std::move(entries)}};
}

namespace {

// Deep enough for any real tree; each level holds one open directory.
constexpr int kMaxRemoveDepth = 256;

// Removes `name` in the directory `dir_fd` (shown to users as `path`). Entries are opened
// relative to their parent's fd, with O_NOFOLLOW, so a symlink swapped in anywhere in the tree
// is unlinked, never followed.
Status RemoveAt(int dir_fd, const std::string& name, const std::string& path, dev_t dev,
                int depth) {
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return PathError("remove", path);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(dir_fd, name.c_str(), 0) != 0) return PathError("remove", path);
    return Status::Ok();
  }
  if (st.st_dev != dev) {
    return InvalidArgument("remove " + path +
                           ": a mount point (another file system); not descended into");
  }
  if (depth >= kMaxRemoveDepth) {
    return InvalidArgument("remove " + path + ": more than " + std::to_string(kMaxRemoveDepth) +
                           " directory levels deep");
  }
  int fd = ::openat(dir_fd, name.c_str(),
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    // Swapped for a symlink or a file since the stat: unlink that instead.
    if (errno == ELOOP || errno == ENOTDIR) return RemoveAt(dir_fd, name, path, dev, depth + 1);
    return PathError("remove: open", path);
  }
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    int err = errno;
    ::close(fd);
    return PathError("remove: open", path, err);
  }
  // The names first: removing entries while readdir walks the directory may skip some.
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir)) {
    std::string entry = e->d_name;
    if (entry != "." && entry != "..") names.push_back(std::move(entry));
  }
  Status st_children;
  for (const std::string& entry : names) {
    Status child = RemoveAt(::dirfd(dir), entry, path + "/" + entry, dev, depth + 1);
    if (!child.ok() && child.code() != StatusCode::kNotFound) {  // kNotFound: raced away
      st_children = child;
      break;
    }
  }
  ::closedir(dir);
  RETURN_IF_ERROR(st_children);
  if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0) return PathError("remove", path);
  return Status::Ok();
}

}  // namespace

Status Remove(const std::string& path) {
  if (path.empty()) return InvalidArgument("remove: empty path");
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  if (trimmed.find_first_not_of('/') == std::string::npos) {
    return InvalidArgument("remove " + path + ": refusing to remove the root directory");
  }
  std::string name = trimmed.substr(trimmed.find_last_of('/') + 1);
  if (name == "." || name == "..") {
    return InvalidArgument("remove " + path + ": refusing to remove \".\" or \"..\"");
  }
  std::string parent = Parent(trimmed);
  base::UniqueFd parent_fd(
      ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!parent_fd.valid()) return PathError("remove", path);
  // The tree's own file system: the parent's, or the entry's own when it is a mount point
  // itself (then its contents go, and the mount point stays busy).
  struct stat top;
  if (::fstatat(parent_fd.get(), name.c_str(), &top, AT_SYMLINK_NOFOLLOW) != 0) {
    return PathError("remove", path);
  }
  return RemoveAt(parent_fd.get(), name, trimmed, top.st_dev, 0);
}

}  // namespace codebox::agent
