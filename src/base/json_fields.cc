#include "base/json_fields.h"

#include <algorithm>
#include <cmath>

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

Status JsonFields::Fault(std::string_view key, std::string_view problem) const {
  return Status(code_, what_ + ": field \"" + base::TerminalSafe(key, 64) + "\" " +
                       std::string(problem));
}

Status JsonFields::Missing(std::string_view key) const {
  return Status(code_, what_ + ": missing field \"" + base::TerminalSafe(key, 64) + "\"");
}

const json* JsonFields::Find(const char* key) const {
  read_.insert(key);
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

Status JsonFields::CheckNoUnknown() const {
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (!read_.count(it.key())) {
      return Status(code_, what_ + ": unknown field \"" + base::TerminalSafe(it.key(), 64) + "\"");
    }
  }
  return Status::Ok();
}

StatusOr<std::string> JsonFields::String(const char* key,
                                         std::optional<std::string> fallback) const {
  const json* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *std::move(fallback);
    return Missing(key);
  }
  if (!v->is_string()) return Fault(key, "is not a string");
  return v->get_ref<const std::string&>();
}

StatusOr<int64_t> JsonFields::Int(const char* key, int64_t min, int64_t max,
                                  std::optional<int64_t> fallback) const {
  const json* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return Missing(key);
  }
  if (!v->is_number_integer()) return Fault(key, "is not an integer");
  auto out_of_range = [&](const std::string& value) {
    return Fault(key, "is " + value + ", outside " + std::to_string(min) + ".." +
                          std::to_string(max));
  };
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (max < 0 || u > static_cast<uint64_t>(max)) return out_of_range(std::to_string(u));
    if (static_cast<int64_t>(u) < min) return out_of_range(std::to_string(u));
    return static_cast<int64_t>(u);
  }
  int64_t i = v->get<int64_t>();
  if (i < min || i > max) return out_of_range(std::to_string(i));
  return i;
}

StatusOr<double> JsonFields::Number(const char* key, double min, double max,
                                    std::optional<double> fallback) const {
  const json* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return Missing(key);
  }
  if (!v->is_number()) return Fault(key, "is not a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    return Fault(key,
                 "is " + v->dump() + ", outside " + json(min).dump() + ".." + json(max).dump());
  }
  return d;
}

StatusOr<bool> JsonFields::Bool(const char* key, std::optional<bool> fallback) const {
  const json* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return Missing(key);
  }
  if (!v->is_boolean()) return Fault(key, "is not a boolean");
  return v->get<bool>();
}

StatusOr<std::vector<std::string>> JsonFields::Strings(
    const char* key, std::optional<std::vector<std::string>> fallback) const {
  const json* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *std::move(fallback);
    return Fault(key, "is not an array of strings");
  }
  if (!v->is_array()) return Fault(key, "is not an array of strings");
  std::vector<std::string> out;
  out.reserve(v->size());
  for (const json& s : *v) {
    if (!s.is_string()) return Fault(key, "holds a value that is not a string");
    out.push_back(s.get_ref<const std::string&>());
  }
  return out;
}

StatusOr<std::vector<const json*>> JsonFields::Objects(const char* key, size_t max_items,
                                                       bool required) const {
  const json* v = Find(key);
  if (v == nullptr) {
    if (required) return Missing(key);
    return std::vector<const json*>{};
  }
  if (!v->is_array()) return Fault(key, "is a " + TypeOf(*v) + ", not an array");
  if (v->size() > max_items) {
    return Fault(key, "has " + std::to_string(v->size()) + " entries, more than " +
                          std::to_string(max_items));
  }
  std::vector<const json*> out;
  out.reserve(v->size());
  for (const json& item : *v) {
    if (!item.is_object()) return Fault(key, "holds a " + TypeOf(item) + ", not an object");
    out.push_back(&item);
  }
  return out;
}

}  // namespace codebox::base
