#include "protocol/message.h"

#include <cstdint>

#include "base/json.h"

namespace codebox::protocol {

StatusOr<Json> ParseControl(std::string_view payload) {
  Json j = base::ParseJsonOrDiscarded(payload);
  if (j.is_discarded()) return ProtocolError("bad JSON in control message");
  if (!j.is_object()) return ProtocolError("control message is not a JSON object");
  return j;
}

std::string DumpControl(const Json& message) {
  return message.dump(-1, ' ', false, Json::error_handler_t::replace);
}

StatusOr<std::string> GetString(const Json& message, const char* field) {
  auto it = message.find(field);
  if (it == message.end()) return ProtocolError(std::string("missing field \"") + field + "\"");
  if (!it->is_string()) return ProtocolError(std::string("field \"") + field + "\" is not a string");
  return it->get<std::string>();
}

StatusOr<int64_t> GetInt(const Json& message, const char* field, std::optional<int64_t> fallback) {
  auto it = message.find(field);
  if (it == message.end() || it->is_null()) {
    if (fallback) return *fallback;
    return ProtocolError(std::string("missing field \"") + field + "\"");
  }
  if (!it->is_number_integer()) {
    return ProtocolError(std::string("field \"") + field + "\" is not an integer");
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return ProtocolError(std::string("field \"") + field + "\" is out of range");
  }
  return it->get<int64_t>();
}

StatusOr<bool> GetBool(const Json& message, const char* field, std::optional<bool> fallback) {
  auto it = message.find(field);
  if (it == message.end() || it->is_null()) {
    if (fallback) return *fallback;
    return ProtocolError(std::string("missing field \"") + field + "\"");
  }
  if (!it->is_boolean()) return ProtocolError(std::string("field \"") + field + "\" is not a boolean");
  return it->get<bool>();
}

}  // namespace codebox::protocol
