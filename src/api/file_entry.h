// A directory listing as JSON (GET /v1/boxes/{id}/files?path=DIR): the server's encoder and the
// clients' checked decoder. Names, types and sizes are the box's.
#ifndef CODEBOX_API_FILE_ENTRY_H_
#define CODEBOX_API_FILE_ENTRY_H_

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "codebox/box.h"
#include "codebox/status.h"

namespace codebox::api {

// {"name", "path", "type": "file"|"dir"|"symlink"|"other", "size", "mode"}.
nlohmann::json FileEntryToJson(const FileEntry& entry);
// {"entries": [FileEntryToJson...]}.
nlohmann::json FileListToJson(const std::vector<FileEntry>& entries);
// A listing of the directory the caller asked for. Every name passes the check Box::ListDir
// applies to a local box's names (CheckNameStaysInDirectory), and every entry's path must be
// one directory + "/" + its name, the same for all entries.
StatusOr<std::vector<FileEntry>> FileListFromJson(const nlohmann::json& j, std::string_view dir);

}  // namespace codebox::api

#endif  // CODEBOX_API_FILE_ENTRY_H_
