// Files of an image tree that a hostile layer wrote, opened the way the box would see them:
// every path resolves inside the tree (symlinks and ".." included), never onto the host.
#ifndef CODEBOX_IMAGE_TREE_FS_H_
#define CODEBOX_IMAGE_TREE_FS_H_

#include <cstdint>
#include <string>

#include "base/unique_fd.h"
#include "codebox/status.h"

namespace codebox::image {

// openat2(root_fd, path, flags, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): `path` as the box
// would resolve it with `root_fd` as "/". O_NOFOLLOW in `flags` keeps the last component
// from being followed.
StatusOr<base::UniqueFd> OpenInTree(int root_fd, const std::string& path, int flags);
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
