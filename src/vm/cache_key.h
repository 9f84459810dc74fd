// Cache keys for the vm driver's store: which kernel, agent and image tree a cached
// initramfs or erofs disk was made from.
#ifndef CODEBOX_VM_CACHE_KEY_H_
#define CODEBOX_VM_CACHE_KEY_H_

#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::vm {

// FNV-1a 64 of a byte string / a file's contents, as 16 hex digits. A cache key, not a MAC.
std::string HashHex(std::string_view data);
StatusOr<std::string> HashFileHex(const std::string& path);
// The same over a sparse file's pages that are not all zeros, with their offsets (found with
// SEEK_DATA), so a guest's mostly empty RAM file hashes in the time its used pages take.
StatusOr<std::string> HashSparseFileHex(const std::string& path);

}  // namespace codebox::vm

#endif  // CODEBOX_VM_CACHE_KEY_H_
