// Writing what comes out of a box onto the host, safe by construction: every name is checked,
// every file and directory is made through directory fds with *at() calls that never follow a
// host symlink, files are written unnamed (O_TMPFILE) and linked into place only when complete,
// and only regular files and directories are ever made, without setuid/setgid/sticky bits.
#ifndef CODEBOX_HOST_FILES_HOST_FILES_H_
#define CODEBOX_HOST_FILES_HOST_FILES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.h"
#include "codebox/status.h"

namespace codebox::host_files {

// `text` (a box name or path) for an error message: terminal-safe, with newline and tab shown
// as \n and \t, at most about 300 bytes.
std::string ShowName(std::string_view text);

// OK when `name` can be one entry of a directory: not "", "." or "..", no '/'. A name that is
// not would lead a path joined from it out of its directory.
Status CheckNameStaysInDirectory(std::string_view name);

// OK when `name` may become one entry of a host directory: CheckNameStaysInDirectory, and no
// control byte (newline, tab, escape, DEL...), at most NAME_MAX bytes.
Status CheckEntryName(std::string_view name);

// "3.0 GiB", "256 MiB", "17 bytes".
std::string HumanBytes(uint64_t bytes);

// Something a copy made on the host, so that a copy that fails can remove it again.
struct MadeEntry {
  std::shared_ptr<base::UniqueFd> parent;
  std::string name;
  bool is_dir = false;
};

// Removes what `made` lists, newest first (a directory with everything in it). Best effort:
// everything under a directory this copy made was made by this copy too.
void RemoveMade(std::vector<MadeEntry>* made);

// A host directory, open with O_DIRECTORY. Children are made and opened with *at() calls and
// O_NOFOLLOW, so a name from a box never resolves through a host symlink.
class HostDir {
 public:
  // Opens `path`, making it and its missing parents (mode 0755, umask applies) like mkdir -p.
  // `path` is the caller's own: symlinks in it are followed as the caller's shell would.
  // The outermost directory it made (if any) is appended to *made.
  static StatusOr<HostDir> OpenPath(const std::string& path, std::vector<MadeEntry>* made);

  // Opens the subdirectory `name`, making it with (mode & 0777) | 0700 (so the caller can fill
  // it; umask applies) when missing. An existing symlink, file or other non-directory there is
  // an error: it is never written through. Appends what it made to *made unless this directory
  // was itself made by this copy (removing that one removes the child too).
  StatusOr<HostDir> OpenChild(const std::string& name, uint32_t mode,
                              std::vector<MadeEntry>* made) const;

  int fd() const { return fd_->get(); }
  const std::shared_ptr<base::UniqueFd>& shared_fd() const { return fd_; }
  const std::string& path() const { return path_; }  // for messages and length checks
  bool made_by_this_copy() const { return made_; }

 private:
  HostDir(std::shared_ptr<base::UniqueFd> fd, std::string path, bool made)
      : fd_(std::move(fd)), path_(std::move(path)), made_(made) {}
  std::shared_ptr<base::UniqueFd> fd_;
  std::string path_;
  bool made_ = false;
};

// A new regular file in a HostDir, owned by the caller, with mode & 0777 (umask applies).
// It is written unnamed (O_TMPFILE) and gets its name only in Commit(), so an error, or the
// host process dying mid-copy, leaves nothing behind. Where the file system has no O_TMPFILE it
// is written under a temporary name that every error path (and the destructor) removes.
// All-zero chunks become holes, so a sparse file stays sparse on the host.
class HostFile {
 public:
  static StatusOr<HostFile> Create(const HostDir& dir, const std::string& name, uint32_t mode);
  HostFile(HostFile&&) = default;
  HostFile& operator=(HostFile&&) = default;
  ~HostFile();

  Status Write(std::string_view chunk);
  // Gives the file its name, replacing a file or symlink of that name (the link itself; it is
  // not followed), never a directory. Appends the new name to *made unless it replaced
  // something or the directory was made by this copy.
  Status Commit(std::vector<MadeEntry>* made);

 private:
  HostFile() = default;
  int LinkUnnamed(const std::string& target);  // 0 or errno
  void Discard();

  std::shared_ptr<base::UniqueFd> dir_;
  std::string dir_path_;
  bool dir_made_ = false;
  std::string name_;
  std::string temp_name_;  // set only without O_TMPFILE, while the temp name exists
  base::UniqueFd fd_;
  uint64_t size_ = 0;
};

// For tests: write with temporary names, as on a file system without O_TMPFILE.
void UseNamedTempFilesForTesting(bool on);

}  // namespace codebox::host_files

#endif  // CODEBOX_HOST_FILES_HOST_FILES_H_
