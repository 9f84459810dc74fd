// The messages of envd's filesystem service (filesystem.Filesystem, Connect's JSON codec) and
// of its REST /files route (issue 35): paths and listings asked for by E2B's SDKs, decoded with
// checked types and bounds; the entries `codebox serve` answers with; and the multipart form a
// files.write uploads, parsed within bounds; the signatures of pre-signed /files URLs.
#ifndef CODEBOX_E2B_FILESYSTEM_H_
#define CODEBOX_E2B_FILESYSTEM_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/box.h"
#include "codebox/status.h"

namespace codebox::e2b {

inline constexpr size_t kMaxPathBytes = 4096;
// The deepest a ListDir walks, and the most entries one answers with.
inline constexpr int kMaxListDepth = 32;
inline constexpr size_t kMaxListEntries = 10'000;
// The most files one upload may carry.
inline constexpr size_t kMaxFormParts = 1000;

// `key` of a request ({"path": ...}): non-empty, without NUL, at most kMaxPathBytes.
StatusOr<std::string> PathFromJson(const nlohmann::json& body, const char* key = "path");
// ListDir: {"path", "depth"}; depth 0 (absent) is 1, at most kMaxListDepth.
struct ListDirRequest {
  std::string path;
  int depth = 1;
};
StatusOr<ListDirRequest> ListDirFromJson(const nlohmann::json& body);

// WatchDir: {"path", "recursive"?}.
struct WatchDirRequest {
  std::string path;
  bool recursive = false;
};
StatusOr<WatchDirRequest> WatchDirFromJson(const nlohmann::json& body);

// One change WatchDir reports: {"filesystem": {"name" (relative to the watched directory),
// "type": EVENT_TYPE_CREATE | _WRITE | _REMOVE | _CHMOD}}.
enum class WatchEvent { kCreate, kWrite, kRemove, kChmod };
std::string WatchEventJson(std::string_view name, WatchEvent type);

// A path as E2B names it: relative ones are under `home`; "." and ".." segments are resolved
// lexically, never above "/"; trailing slashes go.
std::string AbsolutePath(std::string_view path, std::string_view home);

// EntryInfo: {"name", "type" (FILE_TYPE_FILE, _DIRECTORY, _SYMLINK, _UNSPECIFIED), "path",
// "size" (a string: int64), "mode", "permissions" ("-rw-r--r--"), "owner", "group"}. The
// entry is the box's claim, bounded by the host when it was listed.
nlohmann::json EntryInfoToJson(const FileEntry& entry);

// One file of a multipart/form-data upload: the part's filename (undici's %22, %0D and %0A
// escapes undone) and its bytes.
struct FormFile {
  std::string filename;
  std::string_view data;  // into the body parsed
};
// The parts of `body` whose Content-Type header is `content_type` (with its boundary).
// kInvalidArgument for another type, a missing boundary, a malformed part, a part without a
// filename, or more than kMaxFormParts parts.
StatusOr<std::vector<FormFile>> ParseFormFiles(std::string_view content_type,
                                               std::string_view body);

// A pre-signed /files URL (the SDKs' downloadUrl and uploadUrl) carries, in place of the
// access token, "v1_" and the unpadded base64 of SHA-256 over
// "PATH:OPERATION:USER:ACCESS_TOKEN[:EXPIRATION]": OPERATION "read" or "write", USER "" where
// the URL names none, EXPIRATION (Unix seconds) where it has one.
struct FileUrlSignature {
  std::string path = {};
  std::string operation = {};
  std::string user = {};
  std::string signature = {};
  std::optional<uint64_t> expiration = {};
};
// The signature a URL of `request`'s path, operation, user and expiration has, made with the
// sandbox's `access_token`.
std::string SignFileUrl(const FileUrlSignature& request, std::string_view access_token);
// The signature claims of a /files request (`method` GET reads, POST writes) from its query
// (path, username, signature, signature_expiration): kInvalidArgument for another method, a
// malformed signature or expiration; kPermissionDenied for an expiration before `now`.
StatusOr<FileUrlSignature> FileUrlSignatureFrom(std::string_view method,
                                                const std::map<std::string, std::string>& query,
                                                uint64_t now);

// The answer of POST /files: [{"path", "name", "type": "file"}] for each path written.
nlohmann::json WrittenFilesToJson(const std::vector<std::string>& paths);

}  // namespace codebox::e2b

#endif  // CODEBOX_E2B_FILESYSTEM_H_
