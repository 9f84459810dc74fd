// Files of an image tree that a hostile layer wrote, opened the way the box would see them:
// every path resolves inside the tree (symlinks and ".." included), never onto the host.
#ifndef CODEBOX_IMAGE_TREE_FS_H_
#define CODEBOX_IMAGE_TREE_FS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "base/unique_fd.h"
#include "codebox/status.h"

namespace codebox::image {

// Directories RemoveInTree walks into at most, each holding an fd: far deeper than any real
// image, and short of the fd limit.
inline constexpr int kMaxTreeDepth = 512;

// A name from the tree (or a layer), quoted for a message: it may hold terminal escapes.
std::string QuoteTreeName(std::string_view name);

// openat2(root_fd, path, flags, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV):
// `path` as the box would resolve it with `root_fd` as "/", so an absolute symlink or a ".."
// in one stays inside; magic links (/proc/self/...) and mounts are not crossed. "" is the root
// itself; O_NOFOLLOW in `flags` keeps the last component from being followed. Retried when a
// rename elsewhere raced the lookup (EAGAIN). The fd, or -1 with errno set.
int OpenInTreeFd(int root_fd, const std::string& path, uint64_t flags);
// The same as a UniqueFd, or an error naming `path`.
StatusOr<base::UniqueFd> OpenInTree(int root_fd, const std::string& path, int flags);
// Opens the directory `name` in `dir_fd` itself: no symlink followed, no mount entered. The
// fd, or -1 with errno set.
int OpenTreeSubdir(int dir_fd, const std::string& name);
// Removes `name` in `dir_fd`, a directory with everything in it (at most kMaxTreeDepth
// levels); symlinks are removed, never followed. Missing is fine. `shown` is its path in the
// tree, for messages.
Status RemoveInTree(int dir_fd, const std::string& name, const std::string& shown, int depth = 0);
// The regular file `path` of the tree, at most `max_bytes` (more is an error).
StatusOr<std::string> ReadTreeFile(int root_fd, const std::string& path, uint64_t max_bytes);
// True when the directory `path` of the tree exists and holds anything; false when it is
// missing, empty or not a directory.
bool TreeDirHasEntries(int root_fd, const std::string& path);
// Makes `name` (a single component) in `dir_fd` a real directory: a symlink or file there is
// replaced, a directory kept.
Status EnsureTreeDir(int dir_fd, const std::string& name, uint32_t mode);

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_TREE_FS_H_
