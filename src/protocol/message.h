// Control messages: JSON objects in kHello / kControl frames. One adapter around
// nlohmann::json so that no exception escapes into callers (the agent and the host).
#ifndef CODEBOX_PROTOCOL_MESSAGE_H_
#define CODEBOX_PROTOCOL_MESSAGE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "codebox/status.h"

namespace codebox::protocol {

using Json = nlohmann::json;

// Parses a control payload; it must be a JSON object. Errors say "bad JSON: ..." or
// "control message is not a JSON object".
StatusOr<Json> ParseControl(std::string_view payload);
// Serializes; never throws (invalid UTF-8 is replaced).
std::string DumpControl(const Json& message);

// Typed field access with errors naming the field: GetString(msg, "path").
StatusOr<std::string> GetString(const Json& message, const char* field);
StatusOr<int64_t> GetInt(const Json& message, const char* field, std::optional<int64_t> fallback = {});
StatusOr<bool> GetBool(const Json& message, const char* field, std::optional<bool> fallback = {});

}  // namespace codebox::protocol

#endif  // CODEBOX_PROTOCOL_MESSAGE_H_
