#include "remote/remote_copy.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "base/fs.h"
#include "base/io.h"
#include "base/unique_fd.h"
#include "host_files/host_files.h"
#include "http/tar.h"

namespace codebox::remote {
namespace {

using host_files::HostDir;
using host_files::MadeEntry;
using host_files::ShowName;

// A request body is held in memory; the server's own body limit is far lower by default.
constexpr uint64_t kMaxUploadBytes = 1ull << 30;
// Real trees are far shallower (as in box/copy.cc).
constexpr int kMaxDepth = 256;
// A tar adds a 512-byte header (and pax records for long names) to each entry, and pads data
// to 512 bytes.
constexpr uint64_t kTarBytesPerEntry = 2048;

std::vector<std::string> EntryNames(int dir_fd) {
  std::vector<std::string> names;
  int fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return names;
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return names;
  }
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  ::closedir(dir);
  return names;
}

// Moves what UntarInto extracted under src_fd into dest, merging with what is there as a local
// CopyOut does: directories are entered (never a host symlink), files replace files.
Status MoveInto(int src_fd, const HostDir& dest, std::vector<MadeEntry>* made, int depth,
                const std::string& what) {
  if (depth > kMaxDepth) {
    return InvalidArgument(what + ": more than " + std::to_string(kMaxDepth) + " directories deep");
  }
  for (const std::string& name : EntryNames(src_fd)) {
    struct stat st;
    if (::fstatat(src_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return base::ErrnoStatus(what + ": stat extracted " + ShowName(name));
    }
    if (S_ISDIR(st.st_mode)) {
      auto child = dest.OpenChild(name, st.st_mode & 0777, made);
      if (!child.ok()) return child.status().WithContext(what);
      base::UniqueFd sub(
          ::openat(src_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub.valid()) return base::ErrnoStatus(what + ": open extracted " + ShowName(name));
      RETURN_IF_ERROR(MoveInto(sub.get(), *child, made, depth + 1, what));
    } else if (S_ISREG(st.st_mode)) {
      struct stat old;
      bool existed = ::fstatat(dest.fd(), name.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0;
      if (existed && S_ISDIR(old.st_mode)) {
        return InvalidArgument(what + ": " + ShowName(dest.path() + "/" + name) +
                               " is a directory on the host and a file in the box");
      }
      // Replaces a file or a symlink itself (rename never follows the last component).
      if (::renameat(src_fd, name.c_str(), dest.fd(), name.c_str()) != 0) {
        return base::ErrnoStatus(what + ": move " + ShowName(name) + " into " +
                                 ShowName(dest.path()));
      }
      if (!existed && !dest.made_by_this_copy()) made->push_back({dest.shared_fd(), name, false});
    }
    // UntarInto makes nothing else.
  }
  return Status::Ok();
}

struct HostTarget {
  std::string parent;
  std::string name;
};

// host_path not empty.
HostTarget SplitHostPath(const std::string& host_path) {
  std::string path = host_path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  size_t slash = path.find_last_of('/');
  HostTarget t;
  t.parent = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  t.name = slash == std::string::npos ? path : path.substr(slash + 1);
  return t;
}

Status WriteFileDownload(const std::string& body, const std::string& host_path,
                         const std::string& what, std::vector<MadeEntry>* made) {
  if (host_path.back() == '/') {
    return InvalidArgument(what + ": host path " + ShowName(host_path) +
                           " ends with '/'; name the file to write");
  }
  HostTarget t = SplitHostPath(host_path);
  if (t.name == "." || t.name == ".." || t.name == "/") {
    return InvalidArgument(what + ": host path " + ShowName(host_path) + " does not name a file");
  }
  auto dir = HostDir::OpenPath(t.parent, made);
  if (!dir.ok()) return dir.status().WithContext(what);
  // The answer carries no mode: a new file gets 0644 (umask applies), never more.
  auto file = host_files::HostFile::Create(*dir, t.name, 0644);
  if (!file.ok()) return file.status().WithContext(what);
  RETURN_IF_ERROR(file->Write(body).WithContext(what));
  return file->Commit(made).WithContext(what);
}

Status WriteTarDownload(const std::string& archive, const std::string& host_path,
                        const CopyOutOptions& options, const std::string& what,
                        std::vector<MadeEntry>* made) {
  HostTarget t = SplitHostPath(host_path);
  // The parent first, then the temp dir in it: the moves below stay on one file system.
  auto parent = HostDir::OpenPath(t.parent, made);
  if (!parent.ok()) return parent.status().WithContext(what);
  auto temp = base::MakeTempDir(t.parent, ".codebox-copy-out-");
  if (!temp.ok()) return temp.status().WithContext(what);
  http::UntarLimits limits;
  limits.max_bytes = options.max_bytes;
  limits.max_entries = options.max_entries;
  Status st = http::UntarInto(archive, *temp, limits).WithContext(what);
  if (st.ok()) {
    base::UniqueFd src(::open(temp->c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    auto dest = HostDir::OpenPath(host_path, made);
    if (!src.valid()) {
      st = base::ErrnoStatus(what + ": open " + *temp);
    } else if (!dest.ok()) {
      st = dest.status().WithContext(what);
    } else {
      st = MoveInto(src.get(), *dest, made, 0, what);
    }
  }
  (void)base::RemoveTree(*temp);
  return st;
}

}  // namespace

StatusOr<Upload> ReadForUpload(const std::string& host_path) {
  std::string what = "copy in " + ShowName(host_path);
  struct stat st;
  if (::lstat(host_path.c_str(), &st) != 0) return base::ErrnoStatus("copy in: " + host_path);
  Upload upload;
  upload.mode = st.st_mode & 07777;
  if (S_ISDIR(st.st_mode)) {
    auto tar = http::TarDirectory(host_path, kMaxUploadBytes);
    if (!tar.ok()) return tar.status().WithContext(what);
    upload.body = std::move(*tar);
    upload.content_type = "application/x-tar";
    return upload;
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument("copy in: " + host_path + " is neither a file nor a directory");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxUploadBytes) {
    return LimitExceeded(what + ": " + host_files::HumanBytes(st.st_size) + " is more than a box on a " +
                         "server takes in one copy (" + host_files::HumanBytes(kMaxUploadBytes) + ")");
  }
  auto data = base::ReadFile(host_path);
  if (!data.ok()) return data.status().WithContext(what);
  upload.body = std::move(*data);
  upload.content_type = "application/octet-stream";
  return upload;
}

uint64_t DownloadCap(const CopyOutOptions& options) {
  uint64_t headers = options.max_entries > (uint64_t{1} << 40) / kTarBytesPerEntry
                         ? uint64_t{1} << 40
                         : options.max_entries * kTarBytesPerEntry;
  uint64_t cap = options.max_bytes + headers + 1024;
  return cap < options.max_bytes ? UINT64_MAX : cap;  // no wrap-around
}

Status WriteDownload(const http::ClientResponse& response, const std::string& box_path,
                     const std::string& host_path, const CopyOutOptions& options) {
  std::string what = "copy out " + ShowName(box_path);
  auto type = response.headers.find("content-type");
  bool is_tar = type != response.headers.end() && type->second.starts_with("application/x-tar");
  std::vector<MadeEntry> made;
  Status st;
  if (host_path.empty()) {
    st = InvalidArgument(what + ": empty host path");
  } else if (is_tar) {
    st = WriteTarDownload(response.body, host_path, options, what, &made);
  } else if (response.body.size() > options.max_bytes) {
    st = LimitExceeded(what + ": " + host_files::HumanBytes(response.body.size()) +
                       " is over the copy-out limit of " + host_files::HumanBytes(options.max_bytes) +
                       "; pass a larger limit (CopyOutOptions::max_bytes, --copy-out-limit, "
                       "copy_out(..., max_bytes=...))");
  } else if (options.max_entries == 0) {
    st = LimitExceeded(what +
                       ": more than 0 files, over the copy-out limit; pass a larger "
                       "CopyOutOptions::max_entries");
  } else {
    st = WriteFileDownload(response.body, host_path, what, &made);
  }
  if (!st.ok()) host_files::RemoveMade(&made);
  return st;
}

}  // namespace codebox::remote
