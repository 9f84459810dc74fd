// ApplyLayer: one OCI layer onto a rootfs tree. Every name, link target and size in a layer is
// hostile, so nothing here goes through a path: parents are opened with openat2
// RESOLVE_IN_ROOT (symlinks lead where the box would see them, inside the tree), the last
// component is created or removed relative to that fd and never followed, and the size limit
// is checked against the bytes as they are written. libarchive only parses; archive_write_disk
// is not used, as its own resolution and overwrite rules are not ours.
#include "image/layer_extract.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/fs.h"
#include "base/io.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "image/tree_fs.h"

namespace codebox::image {
namespace {

using base::ErrnoStatus;
using base::UniqueFd;

constexpr size_t kReadBlock = 1 << 20;
constexpr std::string_view kWhiteoutPrefix = ".wh.";
// aufs metadata (".wh..wh.plnk", ".wh..wh.aufs"): never part of the tree; the one exception
// is the opaque marker.
constexpr std::string_view kWhiteoutMetaPrefix = ".wh..wh.";
constexpr std::string_view kOpaqueMarker = ".wh..wh..opq";

struct ArchiveReadFree {
  void operator()(archive* a) const { archive_read_free(a); }
};

std::string Quote(std::string_view name) { return QuoteTreeName(name); }

std::string Join(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += (i == 0 ? "" : "/") + parts[i];
  return out;
}

std::string Child(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

// The components of a name in a layer, with a leading "/", "./", "." parts and repeated or
// trailing slashes dropped, as tar does. A ".." could climb out of a directory that a symlink
// put elsewhere, and no real image needs one: refused. A NUL cannot be in `name`: libarchive
// hands names over as C strings, so a NUL in a header ends the name there.
StatusOr<std::vector<std::string>> SplitName(std::string_view name) {
  if (name.size() >= PATH_MAX) return InvalidArgument("the name is longer than PATH_MAX");
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = std::min(name.find('/', start), name.size());
    std::string_view part = name.substr(start, end - start);
    if (part == "..") return InvalidArgument("the name has a '..' component");
    if (!part.empty() && part != ".") parts.emplace_back(part);
    start = end + 1;
  }
  return parts;
}

Status PwriteAll(int fd, const char* data, size_t n, off_t offset) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd, data, n, offset);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return ErrnoStatus("write");
    data += w;
    n -= static_cast<size_t>(w);
    offset += w;
  }
  return Status::Ok();
}

Status ArchiveError(archive* a) {
  const char* msg = archive_error_string(a);
  return InvalidArgument(std::string("unreadable layer: ") + (msg ? msg : "unknown error"));
}

// Owner, mode and times of an entry, checked.
struct Meta {
  uid_t uid = 0;
  gid_t gid = 0;
  mode_t mode = 0;
  bool cleared_setuid = false;
  struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};  // atime, mtime
};

StatusOr<Meta> ReadMeta(archive_entry* e, bool is_dir, bool keep_setuid) {
  Meta m;
  la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
  // (uid_t)-1 would mean "leave the owner as it is" to chown.
  if (uid < 0 || uid >= UINT32_MAX || gid < 0 || gid >= UINT32_MAX) {
    return InvalidArgument("owner " + std::to_string(uid) + ":" + std::to_string(gid) +
                           " is out of range");
  }
  m.uid = static_cast<uid_t>(uid);
  m.gid = static_cast<gid_t>(gid);
  m.mode = archive_entry_perm(e) & 07777;
  // A directory's setgid only makes new files take its group: not a privilege, kept.
  if (!keep_setuid && !is_dir && (m.mode & (S_ISUID | S_ISGID)) != 0) {
    m.mode &= ~static_cast<mode_t>(S_ISUID | S_ISGID);
    m.cleared_setuid = true;
  }
  if (archive_entry_mtime_is_set(e)) {
    m.times[1] = {archive_entry_mtime(e), archive_entry_mtime_nsec(e)};
    m.times[0] = m.times[1];
  }
  if (archive_entry_atime_is_set(e)) {
    m.times[0] = {archive_entry_atime(e), archive_entry_atime_nsec(e)};
  }
  for (const struct timespec& t : m.times) {
    if (t.tv_nsec != UTIME_OMIT && (t.tv_nsec < 0 || t.tv_nsec > 999'999'999)) {
      return InvalidArgument("bad timestamp");
    }
  }
  return m;
}

// chown before chmod: chown clears setuid. Times last, after the data.
Status ApplyMeta(int fd, const Meta& m, bool times) {
  if (::fchown(fd, m.uid, m.gid) != 0) return ErrnoStatus("chown");
  if (::fchmod(fd, m.mode) != 0) return ErrnoStatus("chmod");
  if (times && ::futimens(fd, m.times) != 0) return ErrnoStatus("set times");
  return Status::Ok();
}

class Extractor {
 public:
  Extractor(int root_fd, const ExtractLimits& limits, ExtractStats* stats)
      : root_(root_fd), limits_(limits), stats_(stats) {}

  // `raw_name` is the entry's name as the layer has it, not NULL.
  Status Entry(archive* a, archive_entry* e, const char* raw_name);

 private:
  StatusOr<UniqueFd> OpenParent(const std::vector<std::string>& parts);
  Status Whiteout(const std::vector<std::string>& parts);
  Status RemoveLower(int dir_fd, const std::string& name, const std::string& path, int depth);
  bool Touched(const std::string& path) const;
  Status Clear(int dir_fd, const std::string& name, const std::string& path, bool keep_dir);
  Status Hardlink(const char* target, const std::vector<std::string>& parts);
  Status File(archive* a, archive_entry* e, int dir_fd, const std::string& name, const Meta& m);
  Status Directory(int dir_fd, const std::string& name, const std::string& path, const Meta& m);
  Status Symlink(archive_entry* e, int dir_fd, const std::string& name, const Meta& m);
  uint64_t Room() const {
    return limits_.max_bytes > stats_->bytes ? limits_.max_bytes - stats_->bytes : 0;
  }
  Status TooLarge() const {
    return LimitExceeded("the image is larger than the limit of " +
                         base::FormatSize(limits_.max_bytes) + " (--max-size)");
  }

  int root_;
  const ExtractLimits& limits_;
  ExtractStats* stats_;
  // Paths this layer wrote, by their names in the layer. Whiteouts only hide what lower layers
  // put there, and an opaque marker may come after entries of its own directory in the same
  // tar. (An entry written through a symlinked parent is known by its name, not the path it
  // landed at: an opaque marker in its real directory would remove it.)
  std::set<std::string> written_;
};

// The directory that holds the entry `parts` (O_PATH, or O_RDONLY where made here, as its
// mode is set through the fd). Missing directories are made, as tar does (mode 0755, owned by
// the extracting user: root), each in its own parent as resolved inside the tree, so that a
// symlink on the way leads where it would in the box.
StatusOr<UniqueFd> Extractor::OpenParent(const std::vector<std::string>& parts) {
  const size_t n = parts.size() - 1;
  UniqueFd dir(OpenInTreeFd(root_, Join(parts, n), O_PATH | O_DIRECTORY));
  if (dir.valid()) return dir;
  if (errno != ENOENT) return ErrnoStatus("open directory " + Quote(Join(parts, n)));
  dir.reset(OpenInTreeFd(root_, "", O_PATH | O_DIRECTORY));
  if (!dir.valid()) return ErrnoStatus("open the tree's root");
  for (size_t i = 0; i < n; ++i) {
    const std::string path = Join(parts, i + 1);
    UniqueFd next(OpenInTreeFd(root_, path, O_PATH | O_DIRECTORY));
    if (!next.valid() && errno == ENOENT) {
      const char* name = parts[i].c_str();
      if (::mkdirat(dir.get(), name, 0700) != 0) {
        int err = errno;
        struct stat st;
        if (err == EEXIST && ::fstatat(dir.get(), name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode)) {
          return InvalidArgument(Quote(path) + " is a symlink that leads nowhere in the tree");
        }
        return ErrnoStatus("create directory " + Quote(path), err);
      }
      next.reset(::openat(dir.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      // Mode set on the fd: mkdir's mode is cut by the umask.
      if (!next.valid() || ::fchmod(next.get(), 0755) != 0) {
        return ErrnoStatus("create directory " + Quote(path));
      }
    }
    if (!next.valid()) return ErrnoStatus("open directory " + Quote(path));
    dir = std::move(next);
  }
  return dir;
}

bool Extractor::Touched(const std::string& path) const {
  if (written_.contains(path)) return true;
  auto it = written_.lower_bound(path + "/");
  return it != written_.end() && it->starts_with(path + "/");
}

// Removes what the lower layers put at `path` (`name` in `dir_fd`) and keeps what this layer
// wrote there: a directory this layer wrote into is walked, anything else it wrote stays.
Status Extractor::RemoveLower(int dir_fd, const std::string& name, const std::string& path,
                              int depth) {
  if (!Touched(path)) return RemoveInTree(dir_fd, name, path, depth);
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? Status::Ok() : ErrnoStatus("stat " + Quote(path));
  }
  if (!S_ISDIR(st.st_mode)) return Status::Ok();
  if (depth >= kMaxTreeDepth) {
    return LimitExceeded("directories nested deeper than " + std::to_string(kMaxTreeDepth));
  }
  UniqueFd sub(OpenTreeSubdir(dir_fd, name));
  if (!sub.valid()) return ErrnoStatus("open directory " + Quote(path));
  ASSIGN_OR_RETURN(std::vector<std::string> names, base::ListNamesAt(sub.get(), Quote(path)));
  for (const std::string& n : names) {
    RETURN_IF_ERROR(RemoveLower(sub.get(), n, path + "/" + n, depth + 1));
  }
  return Status::Ok();
}

// ".wh.NAME" and ".wh..wh..opq". A missing directory has nothing to hide: not an error.
Status Extractor::Whiteout(const std::vector<std::string>& parts) {
  const std::string& base = parts.back();
  if (base != kOpaqueMarker && base.starts_with(kWhiteoutMetaPrefix)) return Status::Ok();
  const std::string victim = base.substr(kWhiteoutPrefix.size());
  if (base != kOpaqueMarker && (victim.empty() || victim == "." || victim == "..")) {
    return InvalidArgument("a whiteout that names no file");
  }
  ++stats_->whiteouts;
  const std::string dir_path = Join(parts, parts.size() - 1);
  UniqueFd dir(OpenInTreeFd(root_, dir_path, O_PATH | O_DIRECTORY));
  if (!dir.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) return Status::Ok();
    return ErrnoStatus("open directory " + Quote(dir_path));
  }
  if (base != kOpaqueMarker) return RemoveLower(dir.get(), victim, Child(dir_path, victim), 0);
  ASSIGN_OR_RETURN(std::vector<std::string> names, base::ListNamesAt(dir.get(), Quote(dir_path)));
  for (const std::string& n : names) {
    RETURN_IF_ERROR(RemoveLower(dir.get(), n, Child(dir_path, n), 0));
  }
  return Status::Ok();
}

// Makes room for a new entry: an existing directory stays when `keep_dir` (a directory entry
// over a directory keeps its contents); anything else there goes, a directory with its tree.
Status Extractor::Clear(int dir_fd, const std::string& name, const std::string& path,
                        bool keep_dir) {
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? Status::Ok() : ErrnoStatus("stat " + Quote(path));
  }
  if (keep_dir && S_ISDIR(st.st_mode)) return Status::Ok();
  return RemoveInTree(dir_fd, name, path, 0);
}

// The target is resolved inside the tree like any name, its last component not followed: a
// link to a symlink links the symlink, never what it points at.
Status Extractor::Hardlink(const char* target, const std::vector<std::string>& parts) {
  auto tparts = SplitName(target);
  if (!tparts.ok()) return tparts.status().WithContext("hardlink target " + Quote(target));
  if (tparts->empty()) return InvalidArgument("a hardlink to the tree's root");
  const std::string tpath = Join(*tparts, tparts->size());
  UniqueFd tfd(OpenInTreeFd(root_, tpath, O_PATH | O_NOFOLLOW));
  struct stat tst;
  if (!tfd.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return InvalidArgument("hardlink target " + Quote(target) + " is not in the tree");
    }
    return ErrnoStatus("open hardlink target " + Quote(target));
  }
  if (::fstat(tfd.get(), &tst) != 0) return ErrnoStatus("stat hardlink target " + Quote(target));
  if (!S_ISREG(tst.st_mode) && !S_ISLNK(tst.st_mode)) {
    return InvalidArgument("hardlink target " + Quote(target) + " is not a file or symlink");
  }
  const std::string path = Join(parts, parts.size());
  ASSIGN_OR_RETURN(UniqueFd dir, OpenParent(parts));
  const char* name = parts.back().c_str();
  struct stat st;
  if (::fstatat(dir.get(), name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == tst.st_dev &&
      st.st_ino == tst.st_ino) {
    written_.insert(path);  // a link to itself, or to what it already is
    return Status::Ok();
  }
  RETURN_IF_ERROR(Clear(dir.get(), name, path, false));
  if (::linkat(tfd.get(), "", dir.get(), name, AT_EMPTY_PATH) != 0) {
    // AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the fd's /proc link does the same without it.
    if (errno != ENOENT && errno != EPERM) return ErrnoStatus("link to " + Quote(target));
    std::string proc = "/proc/self/fd/" + std::to_string(tfd.get());
    if (::linkat(AT_FDCWD, proc.c_str(), dir.get(), name, AT_SYMLINK_FOLLOW) != 0) {
      return ErrnoStatus("link to " + Quote(target));
    }
  }
  written_.insert(path);
  return Status::Ok();
}

Status Extractor::File(archive* a, archive_entry* e, int dir_fd, const std::string& name,
                       const Meta& m) {
  const uint64_t room = limits_.max_bytes > stats_->bytes ? limits_.max_bytes - stats_->bytes : 0;
  const la_int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
  if (size < 0) return InvalidArgument("a negative size");
  // The header's size only refuses early; the data is counted below as it is written.
  if (static_cast<uint64_t>(size) > room) return TooLarge();
  UniqueFd fd(
      ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus("create");
  // The file's size so far: a sparse file's holes count, as it would be that size in the box.
  uint64_t end = 0;
  Status result;
  for (;;) {
    const void* buf = nullptr;
    size_t len = 0;
    la_int64_t offset = 0;
    int r = archive_read_data_block(a, &buf, &len, &offset);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      result = ArchiveError(a);
      break;
    }
    if (offset < 0) {
      result = InvalidArgument("a negative data offset");
      break;
    }
    const uint64_t block_end = static_cast<uint64_t>(offset) + len;
    if (block_end > room) {
      result = TooLarge();
      break;
    }
    result = PwriteAll(fd.get(), static_cast<const char*>(buf), len, offset);
    if (!result.ok()) break;
    end = std::max(end, block_end);
  }
  if (result.ok() && static_cast<uint64_t>(size) > end) {
    // A sparse file that ends in a hole; `size` was checked against the room above.
    if (::ftruncate(fd.get(), size) != 0) result = ErrnoStatus("truncate");
    end = static_cast<uint64_t>(size);
  }
  stats_->bytes += end;
  RETURN_IF_ERROR(result);
  return ApplyMeta(fd.get(), m, true);
}

// Directory mtimes are not kept: every later entry in the directory would change them again,
// and tar's way (set them all once at the end) buys nothing in a box.
Status Extractor::Directory(int dir_fd, const std::string& name, const std::string& path,
                            const Meta& m) {
  RETURN_IF_ERROR(Clear(dir_fd, name, path, true));
  if (::mkdirat(dir_fd, name.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("mkdir");
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open");
  return ApplyMeta(fd.get(), m, false);
}

// Stored as given: it resolves in the box, whose root is the tree. Its target counts towards
// the size limit, as it takes room and base::TreeSize counts it.
Status Extractor::Symlink(archive_entry* e, int dir_fd, const std::string& name, const Meta& m) {
  const char* target = archive_entry_symlink(e);
  if (target == nullptr || *target == '\0') return InvalidArgument("a symlink to nothing");
  const size_t len = std::string_view(target).size();
  if (len >= PATH_MAX) return InvalidArgument("a symlink target longer than PATH_MAX");
  if (len > Room()) return TooLarge();
  if (::symlinkat(target, dir_fd, name.c_str()) != 0) return ErrnoStatus("symlink");
  stats_->bytes += len;
  if (::fchownat(dir_fd, name.c_str(), m.uid, m.gid, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoStatus("chown");
  }
  if (::utimensat(dir_fd, name.c_str(), m.times, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoStatus("set times");
  }
  return Status::Ok();
}

Status Extractor::Entry(archive* a, archive_entry* e, const char* raw_name) {
  if (stats_->entries >= limits_.max_entries) {
    return LimitExceeded("the image has more than " + std::to_string(limits_.max_entries) +
                         " entries, the most one may have");
  }
  ++stats_->entries;
  ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitName(raw_name));
  const char* hardlink = archive_entry_hardlink(e);
  const mode_t type = archive_entry_filetype(e);
  if (parts.empty()) {
    // The root itself ("./", from `tar -C dir .`): skipped. The caller made the root and
    // chose its mode; the build directory's (often 0700) would lock the box's users out.
    if (hardlink == nullptr && type == AE_IFDIR) return Status::Ok();
    return InvalidArgument("the tree's root can only be a directory");
  }
  if (parts.back().starts_with(kWhiteoutPrefix)) return Whiteout(parts);
  if (hardlink != nullptr) return Hardlink(hardlink, parts);
  if (type == AE_IFSOCK || (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK &&
                            type != AE_IFIFO && type != AE_IFCHR && type != AE_IFBLK)) {
    return Status::Ok();  // nothing a box could use
  }
  const std::string path = Join(parts, parts.size());
  const std::string& name = parts.back();
  ASSIGN_OR_RETURN(UniqueFd dir, OpenParent(parts));
  if (type == AE_IFCHR || type == AE_IFBLK) {
    // Dropped: a device node would give the box the host's hardware. It still replaces what
    // the lower layers had at its name, as the layer says.
    RETURN_IF_ERROR(Clear(dir.get(), name, path, false));
    ++stats_->dropped_devices;
    return Status::Ok();
  }
  // xattrs are all ignored: security.capability would grant capabilities the layer's author
  // chose, trusted.overlay.* would steer an overlay mount, and nothing in a box needs them.
  ASSIGN_OR_RETURN(Meta m, ReadMeta(e, type == AE_IFDIR, limits_.keep_setuid));
  if (type == AE_IFDIR) {
    RETURN_IF_ERROR(Directory(dir.get(), name, path, m));
  } else {
    RETURN_IF_ERROR(Clear(dir.get(), name, path, false));
    if (type == AE_IFREG) {
      RETURN_IF_ERROR(File(a, e, dir.get(), name, m));
    } else if (type == AE_IFLNK) {
      RETURN_IF_ERROR(Symlink(e, dir.get(), name, m));
    } else {
      if (::mkfifoat(dir.get(), name.c_str(), 0600) != 0) return ErrnoStatus("mkfifo");
      // Opened to set owner and mode on an fd; O_NONBLOCK: a FIFO opens at once for reading.
      UniqueFd fd(
          ::openat(dir.get(), name.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
      if (!fd.valid()) return ErrnoStatus("open");
      RETURN_IF_ERROR(ApplyMeta(fd.get(), m, true));
    }
  }
  if (m.cleared_setuid) ++stats_->cleared_setuid;
  written_.insert(path);
  return Status::Ok();
}

}  // namespace

Status ApplyLayer(const std::string& rootfs, const std::string& layer_path,
                  const std::string& label, const ExtractLimits& limits, ExtractStats* stats) {
  ExtractStats unused;
  if (stats == nullptr) stats = &unused;
  UniqueFd root(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return ErrnoStatus(label + ": open " + rootfs);
  {
    // Refuse rather than fall back to path walks that a symlink could lead out of the tree.
    UniqueFd probe(OpenInTreeFd(root.get(), "", O_PATH | O_DIRECTORY));
    if (!probe.valid() && errno == ENOSYS) {
      return Unavailable(label + ": extracting a layer needs openat2 (Linux 5.6 or later)");
    }
  }
  UniqueFd file(::open(layer_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file.valid()) return ErrnoStatus(label + ": open " + layer_path);
  std::unique_ptr<archive, ArchiveReadFree> a(archive_read_new());
  if (!a) return Internal(label + ": archive_read_new failed");
  // Only what OCI layers use. archive_read_support_filter_all would also run external
  // programs (lrzip, lzop, grzip) on hostile bytes.
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_zstd(a.get());
  archive_read_support_format_tar(a.get());    // ustar, pax, GNU, v7
  archive_read_support_format_empty(a.get());  // a 0-byte layer holds nothing
  if (archive_read_open_fd(a.get(), file.get(), kReadBlock) != ARCHIVE_OK) {
    return ArchiveError(a.get()).WithContext(label + ": " + layer_path);
  }
  Extractor extractor(root.get(), limits, stats);
  for (;;) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      return ArchiveError(a.get()).WithContext(label + ": " + layer_path);
    }
    const char* name = archive_entry_pathname(e);
    if (name == nullptr || *name == '\0') {
      return InvalidArgument(label + ": an entry has no name");
    }
    Status st = extractor.Entry(a.get(), e, name);
    if (!st.ok()) return st.WithContext(label + ": entry " + Quote(name));
  }
  return Status::Ok();
}

}  // namespace codebox::image
