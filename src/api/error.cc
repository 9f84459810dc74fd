#include "api/error.h"

#include <string>

#include "base/json_fields.h"
#include "base/text.h"

namespace codebox::api {

using nlohmann::json;

json ErrorToJson(const Status& status) {
  return {{"error",
           {{"code", std::string(StatusCodeName(status.code()))}, {"message", status.message()}}}};
}

Status ErrorEventFromJson(std::string_view data) {
  auto j = base::ParseJsonObject(data, "the server's error event");
  if (!j.ok()) return j.status();
  const json* error = base::JsonFields(*j, "").Find("error");
  if (error == nullptr || !error->is_object()) {
    return ProtocolError("the server's error event has no {\"error\": {...}} object");
  }
  base::JsonFields f(*error, "the server's error event");
  ASSIGN_OR_RETURN(std::string code, f.String("code"));
  ASSIGN_OR_RETURN(std::string message, f.String("message", ""));
  // The code names a StatusCode; one this client does not know is an internal error of the
  // server's, still with its message.
  StatusCode mapped = StatusCode::kInternal;
  for (int c = 1; c <= static_cast<int>(StatusCode::kLastStatusCode); ++c) {
    if (StatusCodeName(static_cast<StatusCode>(c)) == code) mapped = static_cast<StatusCode>(c);
  }
  std::string text = base::TerminalSafe(message, 4096);
  if (mapped == StatusCode::kInternal && code != "internal") {
    text = base::TerminalSafe(code, 64) + ": " + text;
  }
  return Status(mapped, "server: " + text);
}

}  // namespace codebox::api
