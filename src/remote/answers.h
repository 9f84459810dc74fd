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

#include "codebox/box.h"
#include "codebox/execution.h"
#include "codebox/options.h"
#include "codebox/status.h"

namespace codebox::remote {

// The body as a JSON object; `what` names the answer in errors ("the server's exec answer").
StatusOr<nlohmann::json> ParseObject(std::string_view body, std::string_view what);

// Checked reads of one JSON object's fields. Absent or null optional fields give the default.
class Fields {
 public:
  Fields(const nlohmann::json& object, std::string what)
      : object_(object), what_(std::move(what)) {}

  StatusOr<std::string> String(const char* key, bool required = true) const;
  StatusOr<int64_t> Integer(const char* key, int64_t min, int64_t max, bool required = true) const;
  StatusOr<bool> Bool(const char* key, bool required = true) const;
  StatusOr<std::vector<std::string>> Strings(const char* key, bool required = true) const;
  // The field's value, or nullptr when absent or null.
  const nlohmann::json* Find(const char* key) const;
  // kProtocolError "<what>: field '<key>' <problem>".
  Status Error(std::string_view key, std::string_view problem) const;
  const std::string& what() const { return what_; }

 private:
  const nlohmann::json* Get(const char* key, bool required, Status* missing) const;
  const nlohmann::json& object_;
  std::string what_;
};

// What POST /v1/boxes answers (BoxJson): the id and what the box enforces.
struct CreatedBox {
  std::string id;
  BoxInfo info;
};
StatusOr<CreatedBox> CreatedBoxFromJson(const nlohmann::json& j);

// The "egress" records of a box's JSON (GET /v1/boxes/{id}): each field checked, the box's
// text (host, reason, address) made terminal-safe, at most the last 1000; absent: none.
StatusOr<std::vector<EgressRecord>> EgressLogFromJson(const nlohmann::json& box);

// ExecResultJson (exec, python, run, and an exec stream's `done` event).
StatusOr<ExecResult> ExecResultFromJson(const nlohmann::json& j);
// An attach's result (GET .../processes/{pid}/events): ExecResultJson plus the dropped counts.
StatusOr<ExecResult> ProcessResultFromJson(const nlohmann::json& j);
// GET .../processes: at most 256 entries, each argv at most 8 arguments of 128 bytes (made
// terminal-safe), as the server's own host side bounds them.
StatusOr<std::vector<ProcessInfo>> ProcessListFromJson(const nlohmann::json& j);
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
