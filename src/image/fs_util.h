// Filesystem helpers for the image store: recursive removal that never leaves the tree it
// was given (a leftover /proc mount from an interrupted debootstrap must not be walked),
// and sizes.
#ifndef CODEBOX_IMAGE_FS_UTIL_H_
#define CODEBOX_IMAGE_FS_UTIL_H_

#include <cstdint>
#include <string>

#include "codebox/status.h"

namespace codebox::image {

// Detaches every mount at or below `path` (deepest first), then deletes the tree without
// following symlinks or crossing into other filesystems. Missing path is OK.
Status RemoveTree(const std::string& path);

// Removes the children of `dir` (not dir itself), each as RemoveTree does. Missing dir is OK.
Status RemoveChildren(const std::string& dir);

// Bytes used by regular files and symlinks under path, each inode counted once.
uint64_t TreeSize(const std::string& path);

// mkdir -p.
Status MakeDirs(const std::string& path, unsigned mode = 0755);

bool PathExists(const std::string& path);

// Human size: "163 MiB", "1.2 GiB".
std::string FormatSize(uint64_t bytes);

}  // namespace codebox::image

#endif  // CODEBOX_IMAGE_FS_UTIL_H_
