#include "http/tar.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "base/fs.h"
#include "base/log.h"
#include "base/text.h"
#include "base/unique_fd.h"

namespace codebox::http {
namespace {

constexpr size_t kBlock = 64 << 10;
constexpr int kMaxDepth = 256;

struct ArchiveWriteFree {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct ArchiveReadFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// --- TarDirectory ---------------------------------------------------------------------------

struct Sink {
  std::string data;
  uint64_t max_bytes;
  bool over = false;
};

la_ssize_t SinkWrite(archive* a, void* opaque, const void* buffer, size_t length) {
  auto* sink = static_cast<Sink*>(opaque);
  if (sink->data.size() + length > sink->max_bytes) {
    sink->over = true;
    archive_set_error(a, EFBIG, "archive too large");
    return -1;
  }
  sink->data.append(static_cast<const char*>(buffer), length);
  return static_cast<la_ssize_t>(length);
}

class Writer {
 public:
  Writer(archive* a, Sink* sink, const std::string& root) : a_(a), sink_(sink), root_(root) {}

  Status Dir(int dirfd, const std::string& prefix, int depth) {
    if (depth > kMaxDepth) return LimitExceeded("directories nested deeper than 256 in " + root_);
    int copy = dup(dirfd);
    if (copy < 0) return IoError(Errno("read directory " + root_ + "/" + prefix));
    std::unique_ptr<DIR, int (*)(DIR*)> dir(fdopendir(copy), closedir);
    if (!dir) {
      close(copy);
      return IoError(Errno("read directory " + root_ + "/" + prefix));
    }
    std::vector<std::string> names;
    while (dirent* d = readdir(dir.get())) {
      std::string name = d->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    std::sort(names.begin(), names.end());  // the same tree gives the same archive
    for (const std::string& name : names) {
      RETURN_IF_ERROR(Entry(dirfd, name, prefix + name, depth));
    }
    return Status::Ok();
  }

 private:
  Status Entry(int dirfd, const std::string& name, const std::string& path, int depth) {
    struct stat st {};
    if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return IoError(Errno("stat " + root_ + "/" + path));
    }
    if (S_ISDIR(st.st_mode)) {
      base::UniqueFd sub(
          openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub.valid()) return IoError(Errno("open " + root_ + "/" + path));
      RETURN_IF_ERROR(Header(path + "/", AE_IFDIR, st.st_mode, 0, st.st_mtime));
      return Dir(sub.get(), path + "/", depth + 1);
    }
    if (!S_ISREG(st.st_mode)) return Status::Ok();  // symlinks, devices, sockets: skipped
    base::UniqueFd fd(openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return IoError(Errno("open " + root_ + "/" + path));
    if (fstat(fd.get(), &st) != 0) return IoError(Errno("stat " + root_ + "/" + path));
    RETURN_IF_ERROR(Header(path, AE_IFREG, st.st_mode, st.st_size, st.st_mtime));
    std::string buffer(kBlock, '\0');
    uint64_t left = static_cast<uint64_t>(st.st_size);
    while (left > 0) {
      ssize_t n = read(fd.get(), buffer.data(), std::min<uint64_t>(left, buffer.size()));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return IoError(Errno("read " + root_ + "/" + path));
      if (n == 0) break;  // the file shrank: the archive pads it with zeros
      if (archive_write_data(a_, buffer.data(), n) < 0) return Failed(path);
      left -= static_cast<uint64_t>(n);
    }
    return Status::Ok();
  }

  Status Header(const std::string& path, unsigned type, mode_t mode, int64_t size, time_t mtime) {
    std::unique_ptr<archive_entry, EntryFree> e(archive_entry_new());
    archive_entry_set_pathname(e.get(), path.c_str());
    archive_entry_set_filetype(e.get(), type);
    archive_entry_set_perm(e.get(), mode & 0777);
    archive_entry_set_size(e.get(), size);
    archive_entry_set_mtime(e.get(), mtime, 0);
    if (archive_write_header(a_, e.get()) != ARCHIVE_OK) return Failed(path);
    return Status::Ok();
  }

  Status Failed(const std::string& path) {
    if (sink_->over) {
      return LimitExceeded("the tar of " + root_ + " passes " + base::FormatSize(sink_->max_bytes));
    }
    const char* why = archive_error_string(a_);
    return IoError("tar " + root_ + "/" + path + ": " + (why ? why : "libarchive failed"));
  }

  archive* a_;
  Sink* sink_;
  const std::string& root_;
};

// --- UntarInto ------------------------------------------------------------------------------

// The entry's name as components, refusing what could leave the directory.
StatusOr<std::vector<std::string>> EntryComponents(const char* raw) {
  if (raw == nullptr) return InvalidArgument("a tar entry has no name");
  std::string_view name(raw);
  std::string shown = "'" + base::TerminalSafe(name, 256) + "'";
  if (!name.empty() && name[0] == '/') {
    return InvalidArgument("tar entry " + shown + " has an absolute path");
  }
  std::vector<std::string> parts;
  while (!name.empty()) {
    size_t slash = name.find('/');
    std::string_view part = name.substr(0, slash);
    name = slash == std::string_view::npos ? std::string_view() : name.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") return InvalidArgument("tar entry " + shown + " has a '..' component");
    parts.emplace_back(part);
  }
  return parts;
}

class Extractor {
 public:
  Extractor(archive* a, int root_fd, const std::string& root, const UntarLimits& limits)
      : a_(a), root_fd_(root_fd), root_(root), limits_(limits) {}

  Status Run() {
    archive_entry* entry = nullptr;
    while (true) {
      int r = archive_read_next_header(a_, &entry);
      if (r == ARCHIVE_EOF) return Status::Ok();
      if (r < ARCHIVE_WARN) return Damaged();
      if (++entries_ > limits_.max_entries) {
        return LimitExceeded("the tar archive has more than " +
                             std::to_string(limits_.max_entries) + " entries");
      }
      ASSIGN_OR_RETURN(std::vector<std::string> parts,
                       EntryComponents(archive_entry_pathname(entry)));
      unsigned type = archive_entry_filetype(entry);
      if (parts.empty()) continue;  // "./" itself
      // Only regular files and directories; hard links, symlinks and device nodes are dropped,
      // so no later entry can go through a link.
      if (archive_entry_hardlink(entry) != nullptr || (type != AE_IFREG && type != AE_IFDIR)) {
        CODEBOX_LOG(kDebug, "untar: skipped " << base::TerminalSafe(parts.back(), 256)
                                              << " (not a regular file or directory)");
        continue;
      }
      mode_t mode = archive_entry_perm(entry) & 0777;  // no setuid, setgid or sticky bit
      ASSIGN_OR_RETURN(base::UniqueFd parent, Parent(parts));
      const std::string& last = parts.back();
      if (type == AE_IFDIR) {
        RETURN_IF_ERROR(MakeDir(parent.get(), last, mode | 0700, parts.size() == 1));
      } else {
        RETURN_IF_ERROR(
            WriteFile(parent.get(), last, mode, archive_entry_size(entry), parts.size() == 1));
      }
    }
  }

  const std::set<std::string>& top_level() const { return top_level_; }

 private:
  Status Damaged() {
    const char* why = archive_error_string(a_);
    return InvalidArgument(std::string("not a readable tar archive: ") +
                           (why ? why : "libarchive failed"));
  }

  // Opens (making when missing) every directory above the entry, never through a symlink.
  StatusOr<base::UniqueFd> Parent(const std::vector<std::string>& parts) {
    base::UniqueFd cur(dup(root_fd_));
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      RETURN_IF_ERROR(MakeDir(cur.get(), parts[i], 0755, i == 0));
      base::UniqueFd next(
          openat(cur.get(), parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next.valid()) return InvalidArgument(Errno("tar entry goes through " + parts[i]));
      cur = std::move(next);
    }
    return cur;
  }

  Status MakeDir(int parent, const std::string& name, mode_t mode, bool top) {
    if (mkdirat(parent, name.c_str(), mode) == 0) {
      if (top) top_level_.insert(name);
      fchmodat(parent, name.c_str(), mode, 0);  // past the umask
      return Status::Ok();
    }
    struct stat st {};
    if (errno == EEXIST && fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode)) {
      return Status::Ok();
    }
    return InvalidArgument(Errno("untar into " + root_ + ": make directory " + name));
  }

  Status WriteFile(int parent, const std::string& name, mode_t mode, int64_t size, bool top) {
    if (size < 0 || bytes_ + static_cast<uint64_t>(size) > limits_.max_bytes) {
      return TooBig();
    }
    base::UniqueFd fd(
        openat(parent, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return InvalidArgument(Errno("untar into " + root_ + ": create " + name));
    if (top) top_level_.insert(name);
    std::string buffer(kBlock, '\0');
    while (true) {
      la_ssize_t n = archive_read_data(a_, buffer.data(), buffer.size());
      if (n < 0) return Damaged();
      if (n == 0) break;
      bytes_ += static_cast<uint64_t>(n);
      if (bytes_ > limits_.max_bytes) return TooBig();
      const char* p = buffer.data();
      while (n > 0) {
        ssize_t w = write(fd.get(), p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return IoError(Errno("untar into " + root_ + ": write " + name));
        p += w;
        n -= w;
      }
    }
    if (fchmod(fd.get(), mode) != 0) return IoError(Errno("chmod " + name));
    return Status::Ok();
  }

  Status TooBig() {
    return LimitExceeded("the tar archive holds more than " + base::FormatSize(limits_.max_bytes) +
                         " of file data");
  }

  archive* a_;
  int root_fd_;
  const std::string& root_;
  const UntarLimits& limits_;
  uint64_t entries_ = 0;
  uint64_t bytes_ = 0;
  std::set<std::string> top_level_;
};

}  // namespace

StatusOr<std::string> TarDirectory(const std::string& host_dir, uint64_t max_bytes) {
  base::UniqueFd root(open(host_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root.valid()) return IoError(Errno("tar " + host_dir));
  Sink sink{{}, max_bytes};
  std::unique_ptr<archive, ArchiveWriteFree> a(archive_write_new());
  archive_write_set_format_pax_restricted(a.get());
  archive_write_set_bytes_in_last_block(a.get(), 1);  // no padding to 10 KiB
  if (archive_write_open(a.get(), &sink, nullptr, SinkWrite, nullptr) != ARCHIVE_OK) {
    return Internal("tar " + host_dir + ": " + archive_error_string(a.get()));
  }
  Writer writer(a.get(), &sink, host_dir);
  RETURN_IF_ERROR(writer.Dir(root.get(), "", 0));
  if (archive_write_close(a.get()) != ARCHIVE_OK) {
    if (sink.over) {
      return LimitExceeded("the tar of " + host_dir + " passes " + base::FormatSize(max_bytes));
    }
    return IoError("tar " + host_dir + ": " + archive_error_string(a.get()));
  }
  return std::move(sink.data);
}

Status UntarInto(std::string_view data, const std::string& host_dir, const UntarLimits& limits) {
  base::UniqueFd root(open(host_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root.valid()) return IoError(Errno("untar into " + host_dir));
  std::unique_ptr<archive, ArchiveReadFree> a(archive_read_new());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_memory(a.get(), data.data(), data.size()) != ARCHIVE_OK) {
    return InvalidArgument(std::string("not a readable tar archive: ") +
                           archive_error_string(a.get()));
  }
  Extractor extractor(a.get(), root.get(), host_dir, limits);
  Status st = extractor.Run();
  if (!st.ok()) {
    for (const std::string& name : extractor.top_level()) {
      (void)base::RemoveTree(host_dir + "/" + name);
    }
  }
  return st;
}

}  // namespace codebox::http
