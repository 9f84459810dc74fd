// File-system helpers shared by the image store, the vm driver and leftover collection.
// Removal never follows a symlink and never walks into another filesystem: a tree we delete
// may hold links planted by a box, or a /proc or bind mount left by an interrupted build.
#ifndef CODEBOX_BASE_FS_H_
#define CODEBOX_BASE_FS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "codebox/status.h"

namespace codebox::base {

// mkdir -p: creates `path` and its missing parents with `mode`. An empty path is an error.
Status MakeDirs(const std::string& path, uint32_t mode = 0755);

// rm -rf that stays inside the tree: a symlink is removed, never followed, and a mount point
// (at `path` or below, bind mounts of the same filesystem included) is neither entered nor
// removed; it fails the call, naming the mount, after everything else has gone. A missing
// path is OK.
Status RemoveTree(const std::string& path);

// Detaches (MNT_DETACH) every mount at or below `path`, deepest first, then RemoveTree. The
// mounts' own contents are left alone. For trees that a build tool may have mounted into
// (debootstrap mounts /proc in its target); reads /proc/self/mountinfo.
Status RemoveTreeAndMounts(const std::string& path);

// The names in the directory open at `dir_fd` (an O_PATH fd will do; it is not consumed),
// without "." and "..". `path` names the directory in the error.
StatusOr<std::vector<std::string>> ListNamesAt(int dir_fd, const std::string& path);

// Whether anything is at `path`; a symlink counts even when it dangles (lstat).
bool PathExists(const std::string& path);

// Where temporary files go: $TMPDIR when it is an absolute path, else /tmp.
std::string TempRoot();

// A fresh directory `<parent>/<prefix>XXXXXX` (mode 0700); `parent` is made if missing.
StatusOr<std::string> MakeTempDir(const std::string& parent, const std::string& prefix);

// Bytes used by regular files and symlinks under `path`, each inode counted once, without
// following symlinks or leaving the filesystem of `path`.
uint64_t TreeSize(const std::string& path);

}  // namespace codebox::base

#endif  // CODEBOX_BASE_FS_H_
