// The host side of a remote box's CopyIn and CopyOut: what goes up (a file's bytes, or a
// directory as a tar) and how what comes down is written (with the care of host_files/host_files.h:
// never through a host symlink, no setuid bits, nothing half-written left behind).
#ifndef CODEBOX_REMOTE_REMOTE_COPY_H_
#define CODEBOX_REMOTE_REMOTE_COPY_H_

#include <cstdint>
#include <string>

#include "codebox/box.h"
#include "codebox/status.h"
#include "http/client.h"

namespace codebox::remote {

// What PUT /v1/boxes/{id}/files carries for a host path.
struct Upload {
  std::string body;
  std::string content_type;  // application/octet-stream, or application/x-tar for a directory
  uint32_t mode = 0644;      // permission bits of the file or directory
};
// A regular file or a directory (symlinks in it skipped); anything else is an error.
StatusOr<Upload> ReadForUpload(const std::string& host_path);

// The most bytes a GET of a file or directory may answer under `options` (a tar adds headers
// to the file data).
uint64_t DownloadCap(const CopyOutOptions& options);

// Writes a GET's answer to host_path as Box::CopyOut does: a file (application/octet-stream)
// is written unnamed and linked into place; a directory (application/x-tar) is extracted with
// http::UntarInto (its checks and options.max_bytes / max_entries) into a temp directory next
// to host_path, then moved into host_path (made like mkdir -p) entry by entry. A copy that
// fails removes what it made.
Status WriteDownload(const http::ClientResponse& response, const std::string& box_path,
                     const std::string& host_path, const CopyOutOptions& options);

}  // namespace codebox::remote

#endif  // CODEBOX_REMOTE_REMOTE_COPY_H_
