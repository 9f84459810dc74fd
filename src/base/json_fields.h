// Checked reads of the fields of a JSON object that another process sent (a server's answer,
// a peer's): a field of the wrong type, a number out of range or a missing required field is
// kProtocolError naming the answer and the field, never a crash and never a silently wrong
// value. Parse the text with ParseJsonObject (base/json.h's bounds) first.
#ifndef CODEBOX_BASE_JSON_FIELDS_H_
#define CODEBOX_BASE_JSON_FIELDS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/status.h"

namespace codebox::base {

// The body as a JSON object; `what` names the answer in errors ("the server's exec answer").
StatusOr<nlohmann::json> ParseJsonObject(std::string_view body, std::string_view what);

// Checked reads of one JSON object's fields. Absent or null optional fields give the default.
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string what)
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

}  // namespace codebox::base

#endif  // CODEBOX_BASE_JSON_FIELDS_H_
