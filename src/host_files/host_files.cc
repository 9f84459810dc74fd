#include "host_files/host_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/io.h"
#include "base/text.h"

namespace codebox::host_files {
namespace {

// Deeper than any tree a copy makes (copy.cc caps depth lower); bounds the recursion.
constexpr int kMaxRemoveDepth = 1024;

std::atomic<bool> named_temp_files_for_testing{false};

std::string Join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string TempName() {
  static std::atomic<uint64_t> counter{0};
  return ".codebox-tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

bool AllZero(std::string_view s) {
  return !s.empty() && s[0] == '\0' && std::memcmp(s.data(), s.data() + 1, s.size() - 1) == 0;
}

void RemoveTree(int parent, const std::string& name, int depth) {
  if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) == 0 || depth > kMaxRemoveDepth) return;
  int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  for (const std::string& n : names) {
    struct stat st;
    if (::fstatat(fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
      RemoveTree(fd, n, depth + 1);
    } else {
      ::unlinkat(fd, n.c_str(), 0);
    }
  }
  ::closedir(dir);
  ::unlinkat(parent, name.c_str(), AT_REMOVEDIR);
}

}  // namespace

std::string ShowName(std::string_view text) {
  std::string visible;
  visible.reserve(text.size());
  for (char c : text) {
    if (c == '\n') {
      visible += "\\n";
    } else if (c == '\t') {
      visible += "\\t";
    } else {
      visible += c;
    }
  }
  return base::TerminalSafe(visible, 300);
}

namespace {

Status BadEntry(std::string_view name, const std::string& why) {
  return InvalidArgument("entry \"" + ShowName(name) + "\" " + why);
}

}  // namespace

Status CheckNameStaysInDirectory(std::string_view name) {
  if (name.empty()) return BadEntry(name, "has an empty name");
  if (name == "." || name == "..") return BadEntry(name, "is not a name a directory entry can have");
  if (name.find('/') != std::string_view::npos) return BadEntry(name, "has a '/' in its name");
  return Status::Ok();
}

Status CheckEntryName(std::string_view name) {
  auto bad = [&](const std::string& why) { return BadEntry(name, why); };
  RETURN_IF_ERROR(CheckNameStaysInDirectory(name));
  for (char c : name) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", byte);
      return bad(std::string("has a control byte (") + (c == '\n' ? "newline" : hex) +
                 ") in its name; rename it in the box");
    }
  }
  if (name.size() > NAME_MAX) {
    return bad("has a name of " + std::to_string(name.size()) + " bytes, over NAME_MAX (" +
               std::to_string(NAME_MAX) + ")");
  }
  return Status::Ok();
}

std::string HumanBytes(uint64_t bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  int unit = 0;
  uint64_t scale = 1024;
  while (unit < 5 && bytes / scale >= 1024) {
    scale *= 1024;
    ++unit;
  }
  char text[32];
  if (bytes % scale == 0) {
    std::snprintf(text, sizeof text, "%llu %s", static_cast<unsigned long long>(bytes / scale),
                  kUnits[unit]);
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", static_cast<double>(bytes) / scale, kUnits[unit]);
  }
  return text;
}

void UseNamedTempFilesForTesting(bool on) { named_temp_files_for_testing = on; }

void RemoveMade(std::vector<MadeEntry>* made) {
  for (auto it = made->rbegin(); it != made->rend(); ++it) {
    if (it->is_dir) {
      RemoveTree(it->parent->get(), it->name, 0);
    } else {
      ::unlinkat(it->parent->get(), it->name.c_str(), 0);
    }
  }
  made->clear();
}

StatusOr<HostDir> HostDir::OpenPath(const std::string& path, std::vector<MadeEntry>* made) {
  if (path.empty()) return InvalidArgument("the host path is empty");
  if (path.size() >= PATH_MAX) {
    return InvalidArgument("host path " + ShowName(path) + " is longer than PATH_MAX (" +
                           std::to_string(PATH_MAX) + " bytes)");
  }
  auto fd = std::make_shared<base::UniqueFd>(
      ::open(path[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd->valid()) return base::ErrnoStatus("open the current directory");
  bool in_made = false;  // the current directory was made here (so is everything below it)
  std::string so_far = path[0] == '/' ? "/" : "";
  for (size_t pos = 0; pos < path.size();) {
    size_t slash = path.find('/', pos);
    if (slash == std::string::npos) slash = path.size();
    std::string comp = path.substr(pos, slash - pos);
    pos = slash + 1;
    if (comp.empty() || comp == ".") continue;
    so_far = Join(so_far, comp);
    if (comp == "..") in_made = false;
    // Components the caller named may be the caller's own symlinks: followed, as a shell would.
    int next = ::openat(fd->get(), comp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (next < 0 && errno == ENOENT) {
      if (::mkdirat(fd->get(), comp.c_str(), 0755) == 0) {
        if (!in_made) made->push_back(MadeEntry{fd, comp, true});
        in_made = true;
      } else if (errno != EEXIST) {
        return base::ErrnoStatus("create host directory " + ShowName(so_far));
      }
      next = ::openat(fd->get(), comp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (next < 0) {
      if (errno == ENOTDIR) {
        return InvalidArgument("host path " + ShowName(so_far) + " exists and is not a directory");
      }
      return base::ErrnoStatus("open host directory " + ShowName(so_far));
    }
    fd = std::make_shared<base::UniqueFd>(next);
  }
  return HostDir(fd, path, in_made);
}

StatusOr<HostDir> HostDir::OpenChild(const std::string& name, uint32_t mode,
                                     std::vector<MadeEntry>* made) const {
  std::string path = Join(path_, name);
  bool made_now = false;
  if (::mkdirat(fd(), name.c_str(), (mode & 0777) | 0700) == 0) {
    made_now = true;
  } else if (errno != EEXIST) {
    return base::ErrnoStatus("create host directory " + ShowName(path));
  }
  int next = ::openat(fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (next < 0) {
    if (errno == ENOTDIR || errno == ELOOP) {
      return InvalidArgument("host path " + ShowName(path) +
                             " exists and is not a directory (a symlink or a file); "
                             "copy-out never writes through it");
    }
    return base::ErrnoStatus("open host directory " + ShowName(path));
  }
  if (made_now && !made_) made->push_back(MadeEntry{fd_, name, true});
  return HostDir(std::make_shared<base::UniqueFd>(next), path, made_ || made_now);
}

StatusOr<HostFile> HostFile::Create(const HostDir& dir, const std::string& name, uint32_t mode) {
  HostFile f;
  f.dir_ = dir.shared_fd();
  f.dir_path_ = dir.path();
  f.dir_made_ = dir.made_by_this_copy();
  f.name_ = name;
  // Never a setuid, setgid or sticky bit, whatever the box says; the umask applies.
  mode_t perms = static_cast<mode_t>(mode & 0777);
  if (!named_temp_files_for_testing) {
    f.fd_.reset(::openat(dir.fd(), ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, perms));
  } else {
    errno = EOPNOTSUPP;
  }
  if (!f.fd_.valid()) {
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
      return base::ErrnoStatus("create a file in host directory " + ShowName(dir.path()));
    }
    // No O_TMPFILE on this file system: a temp name, removed on every error path.
    std::string temp = TempName();
    f.fd_.reset(::openat(dir.fd(), temp.c_str(),
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, perms));
    if (!f.fd_.valid()) {
      return base::ErrnoStatus("create a file in host directory " + ShowName(dir.path()));
    }
    f.temp_name_ = temp;
  }
  return f;
}

HostFile::~HostFile() { Discard(); }

void HostFile::Discard() {
  fd_.reset();
  if (!temp_name_.empty() && dir_) ::unlinkat(dir_->get(), temp_name_.c_str(), 0);
  temp_name_.clear();
}

Status HostFile::Write(std::string_view chunk) {
  if (!fd_.valid()) return Internal("host file " + ShowName(name_) + " is already closed");
  if (AllZero(chunk)) {
    // A hole instead of zeros; Commit() sets the size.
    if (::lseek(fd_.get(), static_cast<off_t>(chunk.size()), SEEK_CUR) < 0) {
      return base::ErrnoStatus("seek in host file " + ShowName(Join(dir_path_, name_)));
    }
  } else {
    RETURN_IF_ERROR(base::WriteAll(fd_.get(), chunk)
                        .WithContext("write host file " + ShowName(Join(dir_path_, name_))));
  }
  size_ += chunk.size();
  return Status::Ok();
}

int HostFile::LinkUnnamed(const std::string& target) {
  // AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH on most kernels; /proc/self/fd works without.
  if (::linkat(fd_.get(), "", dir_->get(), target.c_str(), AT_EMPTY_PATH) == 0) return 0;
  if (errno == EEXIST) return EEXIST;
  std::string proc = "/proc/self/fd/" + std::to_string(fd_.get());
  if (::linkat(AT_FDCWD, proc.c_str(), dir_->get(), target.c_str(), AT_SYMLINK_FOLLOW) == 0) {
    return 0;
  }
  return errno;
}

Status HostFile::Commit(std::vector<MadeEntry>* made) {
  std::string path = Join(dir_path_, name_);
  if (!fd_.valid()) return Internal("host file " + ShowName(path) + " is already closed");
  Status st;
  // Trailing holes need the size set explicitly.
  if (::ftruncate(fd_.get(), static_cast<off_t>(size_)) != 0) {
    st = base::ErrnoStatus("set the size of host file " + ShowName(path));
  }
  struct stat existing;
  bool replaces = ::fstatat(dir_->get(), name_.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0;
  if (st.ok() && replaces && S_ISDIR(existing.st_mode)) {
    st = InvalidArgument("host path " + ShowName(path) + " is a directory; not replacing it");
  }
  if (st.ok() && temp_name_.empty()) {
    // Unnamed file: link it straight to its name, or (when that name exists) beside it and
    // rename over it, which replaces a symlink itself instead of writing through it.
    int err = replaces ? EEXIST : LinkUnnamed(name_);
    if (err == EEXIST) {
      temp_name_ = TempName();
      err = LinkUnnamed(temp_name_);
      if (err != 0) temp_name_.clear();
      replaces = true;
    }
    if (err != 0) st = base::ErrnoStatus("name host file " + ShowName(path), err);
  }
  if (st.ok() && !temp_name_.empty()) {
    if (::renameat(dir_->get(), temp_name_.c_str(), dir_->get(), name_.c_str()) != 0) {
      st = base::ErrnoStatus("rename into place host file " + ShowName(path));
    } else {
      temp_name_.clear();
    }
  }
  if (st.ok() && ::close(fd_.release()) != 0) {
    // The data may not have reached the disk: take the file back.
    st = base::ErrnoStatus("close host file " + ShowName(path));
    ::unlinkat(dir_->get(), name_.c_str(), 0);
    return st;
  }
  if (!st.ok()) {
    Discard();
    return st;
  }
  if (!replaces && !dir_made_) made->push_back(MadeEntry{dir_, name_, false});
  return Status::Ok();
}

}  // namespace codebox::host_files
