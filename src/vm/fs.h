// Small file-system helpers for the vm driver's store (kernels, initramfs, disks, run dirs).
#ifndef CODEBOX_VM_FS_H_
#define CODEBOX_VM_FS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::vm {

// mkdir -p with mode for the created directories.
Status MakeDirs(const std::string& path, uint32_t mode = 0755);
// rm -rf that never follows symlinks out of the tree. Missing path is OK.
Status RemoveTree(const std::string& path);
bool PathExists(const std::string& path);
// A fresh directory `<parent>/<prefix>XXXXXX`.
StatusOr<std::string> MakeTempDir(const std::string& parent, const std::string& prefix);
// FNV-1a 64 of a byte string / a file's contents, as 16 hex digits. A cache key, not a MAC.
std::string HashHex(std::string_view data);
StatusOr<std::string> HashFileHex(const std::string& path);

}  // namespace codebox::vm

#endif  // CODEBOX_VM_FS_H_
