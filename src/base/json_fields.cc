#include "base/json_fields.h"

#include <algorithm>

#include "base/json.h"
#include "base/text.h"

namespace codebox::base {

using nlohmann::json;

namespace {

std::string TypeOf(const json& j) { return j.type_name(); }

}  // namespace

StatusOr<json> ParseJsonObject(std::string_view body, std::string_view what) {
  json j = base::ParseJsonOrDiscarded(body);
  if (j.is_discarded()) {
    return ProtocolError(std::string(what) + " is not valid JSON (" + std::to_string(body.size()) +
                         " bytes: " + base::TerminalSafe(body.substr(0, 120)) + ")");
  }
  if (!j.is_object()) {
    return ProtocolError(std::string(what) + " is a JSON " + TypeOf(j) + ", not an object");
  }
  return j;
}

Status JsonFields::Error(std::string_view key, std::string_view problem) const {
  return ProtocolError(what_ + ": field '" + std::string(key) + "' " + std::string(problem));
}

const json* JsonFields::Find(const char* key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

const json* JsonFields::Get(const char* key, bool required, Status* missing) const {
  const json* v = Find(key);
  if (v == nullptr && required) *missing = Error(key, "is missing");
  return v;
}

StatusOr<std::string> JsonFields::String(const char* key, bool required) const {
  Status missing;
  const json* v = Get(key, required, &missing);
  if (!missing.ok()) return missing;
  if (v == nullptr) return std::string();
  if (!v->is_string()) return Error(key, "is a " + TypeOf(*v) + ", expected a string");
  return v->get<std::string>();
}

StatusOr<int64_t> JsonFields::Integer(const char* key, int64_t min, int64_t max, bool required) const {
  Status missing;
  const json* v = Get(key, required, &missing);
  if (!missing.ok()) return missing;
  if (v == nullptr) return std::max<int64_t>(min, 0);
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(max)) {
      return Error(key, "is " + std::to_string(u) + ", over " + std::to_string(max));
    }
    return static_cast<int64_t>(u);
  }
  if (!v->is_number_integer()) return Error(key, "is a " + TypeOf(*v) + ", expected an integer");
  int64_t i = v->get<int64_t>();
  if (i < min || i > max) {
    return Error(key, "is " + std::to_string(i) + ", outside " + std::to_string(min) + ".." +
                          std::to_string(max));
  }
  return i;
}

StatusOr<bool> JsonFields::Bool(const char* key, bool required) const {
  Status missing;
  const json* v = Get(key, required, &missing);
  if (!missing.ok()) return missing;
  if (v == nullptr) return false;
  if (!v->is_boolean()) return Error(key, "is a " + TypeOf(*v) + ", expected true or false");
  return v->get<bool>();
}

StatusOr<std::vector<std::string>> JsonFields::Strings(const char* key, bool required) const {
  Status missing;
  const json* v = Get(key, required, &missing);
  if (!missing.ok()) return missing;
  std::vector<std::string> out;
  if (v == nullptr) return out;
  if (!v->is_array()) return Error(key, "is a " + TypeOf(*v) + ", expected a list of strings");
  out.reserve(v->size());
  for (const json& s : *v) {
    if (!s.is_string()) return Error(key, "holds a " + TypeOf(s) + ", expected only strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

}  // namespace codebox::base
