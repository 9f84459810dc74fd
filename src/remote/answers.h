// The server's JSON answers as codebox types, every field checked. The server is trusted more
// than a box, but what it relays (output, names, sizes, MIME bundles) came out of boxes: a
// field of the wrong type, a number out of range or a missing required field is kProtocolError
// naming the answer and the field, never a crash and never a silently wrong value.
#ifndef CODEBOX_REMOTE_ANSWERS_H_
#define CODEBOX_REMOTE_ANSWERS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_fields.h"
#include "codebox/box.h"
#include "codebox/execution.h"
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::remote {

// The server's answers are read with base/json_fields.h's checked reads.
using base::JsonFields;

// What POST /v1/boxes answers (BoxJson): the id and what the box enforces.
struct CreatedBox {
  std::string id;
  BoxInfo info;
};
StatusOr<CreatedBox> CreatedBoxFromJson(const nlohmann::json& j);

// The "egress" records of a box's JSON (GET /v1/boxes/{id}): each field checked, the box's
// text (host, reason, address) made terminal-safe, at most the last 1000; absent: none.
StatusOr<std::vector<EgressRecord>> EgressLogFromJson(const nlohmann::json& box);

// Exec results and process lists: api/exec_result.h, api/process_info.h.
// ExecutionJson (run_code and its `done` event) and one `result` event.
StatusOr<Execution> ExecutionFromJson(const nlohmann::json& j);
StatusOr<CellResult> CellResultFromJson(const nlohmann::json& j, std::string_view what);
// {"text": "..."} of a stdout or stderr event.
StatusOr<std::string> TextEventFromJson(std::string_view data, std::string_view event);
// The {"error": {"code", "message"}} of an `error` event, as a Status.
Status ErrorEventFromJson(std::string_view data);

// A listing ({"entries": [...]}) of the directory the caller asked for. Every name passes the
// check Box::ListDir applies to a local box's names (CheckNameStaysInDirectory), and every
// entry's path must be one directory + "/" + its name, the same for all entries.
StatusOr<std::vector<FileEntry>> EntriesFromJson(const nlohmann::json& j, std::string_view dir);

}  // namespace codebox::remote

#endif  // CODEBOX_REMOTE_ANSWERS_H_
