// The API's JSON bodies (docs/server.md, src/server/openapi.json): what a box, an exec and a
// cell look like on the wire. Output text is the box's: Dump() turns bytes that are not UTF-8
// into U+FFFD instead of failing (files are the way to move bytes exactly).
#ifndef CODEBOX_SERVER_API_JSON_H_
#define CODEBOX_SERVER_API_JSON_H_

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/exec_result.h"
#include "api/process_info.h"
#include "codebox/box.h"
#include "codebox/execution.h"
#include "codebox/options.h"
#include "codebox/status.h"
#include "server/box_registry.h"

namespace codebox::server {

// RFC 3339 UTC with seconds: "2026-12-03T12:00:00Z".
std::string UtcSeconds(std::chrono::system_clock::time_point t);

nlohmann::json CellResultJson(const CellResult& result);
nlohmann::json ExecutionJson(const Execution& execution);
nlohmann::json BoxJson(const BoxRecord& record);
nlohmann::json PoolJson(const PoolStatus& pool);
nlohmann::json FileEntryJson(const FileEntry& entry);
// One connection of a box's egress proxy: host, port, allowed, reason, address, bytes_up,
// bytes_down; and a box's whole log as an array of them.
nlohmann::json EgressRecordJson(const EgressRecord& record);
nlohmann::json EgressLogJson(const std::vector<EgressRecord>& records);
// {"error": {"code": "<StatusCodeName>", "message": "..."}}
nlohmann::json ErrorJson(const Status& status);

// j.dump() with invalid UTF-8 replaced (never throws for text from a box).
std::string Dump(const nlohmann::json& j);

}  // namespace codebox::server

#endif  // CODEBOX_SERVER_API_JSON_H_
