#include "box/copy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <optional>
#include <vector>

#include "base/io.h"
#include "base/log.h"
#include "host_files/host_files.h"

namespace codebox::box {

using host_files::CheckEntryName;
using host_files::HostDir;
using host_files::HostFile;
using host_files::HumanBytes;
using host_files::MadeEntry;
using host_files::RemoveMade;
using host_files::ShowName;
namespace {

std::string Join(const std::string& dir, const std::string& name) {
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

}  // namespace

Status CopyHostToBox(protocol::AgentClient& agent, const std::string& host_path,
                     const std::string& box_path) {
  struct stat st;
  if (::lstat(host_path.c_str(), &st) != 0) return base::ErrnoStatus("copy in: " + host_path);
  // The client names both ends ("copy HOST to box PATH"), the agent what failed.
  if (S_ISREG(st.st_mode)) return agent.WriteFileFromHost(host_path, box_path);
  if (!S_ISDIR(st.st_mode)) {
    return InvalidArgument("copy in: " + host_path + " is neither a file nor a directory");
  }
  // MakeDir's errors start "mkdir BOX_PATH: ": that part is not said again.
  RETURN_IF_ERROR(agent.MakeDir(box_path, st.st_mode & 07777)
                      .WithContext("copy " + host_path + " to box " + box_path));
  if (::access(host_path.c_str(), R_OK | X_OK) != 0) {
    return base::ErrnoStatus("copy in: open directory " + host_path);
  }
  for (const std::string& name : base::ListDirectory(host_path)) {
    std::string child = Join(host_path, name);
    struct stat child_st;
    if (::lstat(child.c_str(), &child_st) != 0 || S_ISLNK(child_st.st_mode)) continue;
    RETURN_IF_ERROR(CopyHostToBox(agent, child, Join(box_path, name)));
  }
  return Status::Ok();
}

namespace {

// Real trees are far shallower; a box that lists directories without end is stopped here.
constexpr int kMaxDepth = 256;

// One box -> host copy: the byte and entry budgets, and what it made so far (removed again if
// the copy fails). The stream callbacks run on the agent client's reader thread while the
// calling thread waits, so the members need no lock.
class CopyOut {
 public:
  CopyOut(protocol::AgentClient& agent, const std::string& box_path, const CopyOutOptions& options)
      : agent_(agent), top_(box_path), options_(options), bytes_left_(options.max_bytes) {}

  Status Run(const std::string& host_path) {
    Status st = Copy(host_path);
    if (!st.ok()) RemoveMade(&made_);
    return st;
  }

 private:
  Status Copy(const std::string& host_path) {
    if (host_path.empty()) {
      return InvalidArgument("copy out " + ShowName(top_) + ": empty host path");
    }
    RETURN_IF_ERROR(CheckPathLength(top_, "box"));
    auto entries = agent_.ListDir(top_);
    if (!entries.ok()) {
      StatusCode code = entries.status().code();
      // Not a directory (or not there): copy it as a file; that error is the one to report.
      if (code != StatusCode::kNotFound && code != StatusCode::kInvalidArgument) {
        return entries.status().WithContext(Context(top_));
      }
      if (host_path.back() == '/') {
        return InvalidArgument("copy out " + ShowName(top_) + ": host path " + ShowName(host_path) +
                               " ends with '/'; name the file to write");
      }
      size_t slash = host_path.find_last_of('/');
      std::string parent = slash == std::string::npos ? "."
                           : slash == 0               ? "/"
                                                      : host_path.substr(0, slash);
      std::string name = slash == std::string::npos ? host_path : host_path.substr(slash + 1);
      if (name == "." || name == "..") {
        return InvalidArgument("copy out " + ShowName(top_) + ": host path " + ShowName(host_path) +
                               " does not name a file");
      }
      auto dir = HostDir::OpenPath(parent, &made_);
      if (!dir.ok()) return dir.status().WithContext("copy out " + ShowName(top_));
      return CopyFile(top_, *dir, name);
    }
    auto dir = HostDir::OpenPath(host_path, &made_);
    if (!dir.ok()) return dir.status().WithContext("copy out " + ShowName(top_));
    return CopyDir(top_, *dir, *entries, 0);
  }

  // For an error from the agent client, which names the box path it failed on ("read PATH:
  // ..."): "copy out", and the top of the copy when that is another path.
  std::string Context(const std::string& named_below) const {
    return named_below == top_ ? "copy out" : "copy out " + ShowName(top_);
  }

  Status CheckPathLength(const std::string& path, const char* side) {
    if (path.size() < PATH_MAX) return Status::Ok();
    return InvalidArgument("copy out " + ShowName(top_) + ": " + side + " path " + ShowName(path) +
                           " is longer than PATH_MAX (" + std::to_string(PATH_MAX) + " bytes)");
  }

  void Skip(const std::string& box_path, const std::string& why) {
    if (options_.on_skipped) {
      options_.on_skipped(box_path, why);
    } else {
      CODEBOX_LOG(kWarn, "copy out " << ShowName(top_) << ": skipped " << ShowName(box_path) << ": "
                                     << why);
    }
  }

  Status CountEntry() {
    if (++entries_ <= options_.max_entries) return Status::Ok();
    return LimitExceeded("copy out " + ShowName(top_) + ": more than " +
                         std::to_string(options_.max_entries) +
                         " files and directories, over the copy-out limit; pass a larger "
                         "CopyOutOptions::max_entries");
  }

  Status CopyDir(const std::string& box_dir, const HostDir& dir,
                 const std::vector<protocol::DirEntry>& entries, int depth) {
    for (const protocol::DirEntry& entry : entries) {
      std::string box_path = Join(box_dir, entry.name);
      RETURN_IF_ERROR(CheckEntryName(entry.name)
                          .WithContext("copy out " + ShowName(top_) + ": in " + ShowName(box_dir)));
      RETURN_IF_ERROR(CheckPathLength(box_path, "box"));
      RETURN_IF_ERROR(CheckPathLength(Join(dir.path(), entry.name), "host"));
      if (entry.type == "dir") {
        if (depth + 1 > kMaxDepth) {
          return InvalidArgument("copy out " + ShowName(top_) + ": " + ShowName(box_path) +
                                 " is more than " + std::to_string(kMaxDepth) +
                                 " directories deep");
        }
        auto children = agent_.ListDir(box_path);
        if (!children.ok() && children.status().code() == StatusCode::kNotFound) {
          Skip(box_path, "it went away during the copy");
          continue;
        }
        if (!children.ok()) return children.status().WithContext("copy out " + ShowName(top_));
        RETURN_IF_ERROR(CountEntry());
        auto sub = dir.OpenChild(entry.name, entry.mode, &made_);
        if (!sub.ok()) return sub.status().WithContext("copy out " + ShowName(top_));
        RETURN_IF_ERROR(CopyDir(box_path, *sub, *children, depth + 1));
      } else if (entry.type == "file") {
        RETURN_IF_ERROR(CopyFile(box_path, dir, entry.name));
      } else if (entry.type == "symlink") {
        Skip(box_path, "symbolic links are not copied out");
      } else {
        Skip(box_path, "not a regular file or directory (a FIFO, socket or device)");
      }
    }
    return Status::Ok();
  }

  std::string LimitMessage(const std::string& box_path, uint64_t size, bool claimed) {
    uint64_t used = options_.max_bytes - bytes_left_;
    std::string what = box_path == top_ ? (claimed ? "" : "more than ") + HumanBytes(size)
                                        : ShowName(box_path) + " (" +
                                              (claimed ? "" : "more than ") + HumanBytes(size) +
                                              ") with " + HumanBytes(used) + " already copied";
    return "copy out " + ShowName(top_) + ": " + what + " is over the copy-out limit of " +
           HumanBytes(options_.max_bytes) +
           "; pass a larger limit (CopyOutOptions::max_bytes, --copy-out-limit, "
           "copy_out(..., max_bytes=...))";
  }

  // The size of box_path as its directory lists it; only for an error message.
  std::optional<uint64_t> ListedSize(const std::string& box_path) {
    size_t slash = box_path.find_last_of('/');
    if (slash == std::string::npos) return std::nullopt;
    auto entries = agent_.ListDir(slash == 0 ? "/" : box_path.substr(0, slash));
    if (!entries.ok()) return std::nullopt;
    for (const protocol::DirEntry& e : *entries) {
      if (e.name == box_path.substr(slash + 1) && e.type == "file") return e.size;
    }
    return std::nullopt;
  }

  Status CopyFile(const std::string& box_path, const HostDir& dir, const std::string& name) {
    RETURN_IF_ERROR(CountEntry());
    std::optional<HostFile> file;
    bool limit_said = false;
    uint64_t received = 0;
    bool have_header = false;
    auto on_header = [&](uint64_t size, uint32_t mode) -> Status {
      have_header = true;
      if (size > bytes_left_) {
        limit_said = true;
        return LimitExceeded(LimitMessage(box_path, size, true));
      }
      // Made only now: the mode is known, and the umask applies to it at creation.
      ASSIGN_OR_RETURN(HostFile f, HostFile::Create(dir, name, mode));
      file.emplace(std::move(f));
      return Status::Ok();
    };
    auto on_chunk = [&](std::string_view chunk) -> Status {
      // Checked here too: never more than the limit reaches the host, whatever the client does.
      if (!file) {
        return ProtocolError("copy out " + ShowName(box_path) + ": data before its header");
      }
      if (chunk.size() > bytes_left_) {
        limit_said = true;
        return LimitExceeded(LimitMessage(box_path, received + chunk.size(), false));
      }
      bytes_left_ -= chunk.size();
      received += chunk.size();
      return file->Write(chunk);
    };
    Status st = agent_.ReadFileStream(box_path, bytes_left_, on_header, on_chunk);
    if (st.code() == StatusCode::kLimitExceeded && !limit_said) {
      // The client's own cap said it first; the same words, with what is known of the size.
      if (have_header) {  // more data came than the header claimed
        st = LimitExceeded(LimitMessage(box_path, std::max(received, bytes_left_), false));
      } else {  // the claimed size was over: the size the box lists
        std::optional<uint64_t> size = ListedSize(box_path);
        st = LimitExceeded(LimitMessage(box_path, size.value_or(bytes_left_), size.has_value()));
      }
    }
    if (!st.ok()) {
      file.reset();  // an unnamed file vanishes; a temp name is removed
      if (st.code() == StatusCode::kLimitExceeded) return st;
      return st.WithContext(Context(box_path));
    }
    if (!file) {
      return ProtocolError("copy out " + ShowName(box_path) + ": no file header from the box");
    }
    return file->Commit(&made_).WithContext("copy out " + ShowName(box_path));
  }

  protocol::AgentClient& agent_;
  const std::string top_;
  const CopyOutOptions& options_;
  uint64_t bytes_left_;
  uint64_t entries_ = 0;
  std::vector<MadeEntry> made_;
};

}  // namespace

Status CopyBoxToHost(protocol::AgentClient& agent, const std::string& box_path,
                     const std::string& host_path, const CopyOutOptions& options) {
  if (options.max_bytes == 0) return InvalidArgument("copy out: no byte limit set");
  if (box_path.empty()) return InvalidArgument("copy out: empty box path");
  return CopyOut(agent, box_path, options).Run(host_path);
}

}  // namespace codebox::box
