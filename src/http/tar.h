// Directories as tar archives, for the server's files API (GET a directory, PUT a tar) and the
// remote client's CopyIn/CopyOut. On libarchive (no tar code of our own). Extraction treats the
// archive as hostile: only regular files and directories, no absolute or ".." paths, never
// through a symlink, no setuid/setgid/sticky bits or device nodes, sizes and entry counts
// capped while extracting; a failed extraction removes what it made.
#ifndef CODEBOX_HTTP_TAR_H_
#define CODEBOX_HTTP_TAR_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::http {

// A POSIX (pax) tar of the directory `host_dir` (its contents, names relative to it; regular
// files and directories only, symlinks skipped), in memory; kLimitExceeded past max_bytes.
StatusOr<std::string> TarDirectory(const std::string& host_dir, uint64_t max_bytes);

struct UntarLimits {
  uint64_t max_bytes = 256ull << 20;   // file data in all
  uint64_t max_entries = 100'000;
};

// Extracts `archive` into the existing, empty directory `host_dir`; see above for what it
// refuses (kInvalidArgument naming the entry) and caps (kLimitExceeded).
Status UntarInto(std::string_view archive, const std::string& host_dir, const UntarLimits& limits);

}  // namespace codebox::http

#endif  // CODEBOX_HTTP_TAR_H_
