// FieldReader: the checked reading of one JSON message's fields, shared by every decoder in
// messages.cc. A field of the wrong type or out of range, or one no decoder asked for, is a
// ProtocolError naming the message and the field; nothing here throws.
#ifndef CODEBOX_PROTOCOL_FIELD_READER_H_
#define CODEBOX_PROTOCOL_FIELD_READER_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/text.h"
#include "codebox/status.h"
#include "protocol/message.h"

namespace codebox::protocol::msg {

inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Reads the fields of one message with checked types and ranges; remembers which fields it
// read so that the rest can be reported as unknown.
class FieldReader {
 public:
  // "op" and "event" name the message; their dispatcher has read them already. An object
  // inside a message (`nested`) has no such names.
  FieldReader(const Json& message, std::string_view what, bool nested = false)
      : message_(message), what_(what) {
    if (nested) return;
    seen_.insert("op");
    seen_.insert("event");
  }

  StatusOr<std::string> String(const char* field, std::optional<std::string> fallback = {}) {
    const Json* value = Find(field);
    if (value == nullptr) {
      if (fallback) return *fallback;
      return Missing(field);
    }
    if (!value->is_string()) return Fault(field, "is not a string");
    return value->get_ref<const std::string&>();
  }

  StatusOr<int64_t> Int(const char* field, int64_t min, int64_t max,
                        std::optional<int64_t> fallback = {}) {
    const Json* value = Find(field);
    if (value == nullptr) {
      if (fallback) return *fallback;
      return Missing(field);
    }
    if (!value->is_number_integer()) return Fault(field, "is not an integer");
    int64_t v = 0;
    if (value->is_number_unsigned()) {
      uint64_t u = value->get<uint64_t>();
      if (u > static_cast<uint64_t>(kInt64Max)) return Range(field, std::to_string(u), min, max);
      v = static_cast<int64_t>(u);
    } else {
      v = value->get<int64_t>();
    }
    if (v < min || v > max) return Range(field, std::to_string(v), min, max);
    return v;
  }

  StatusOr<bool> Bool(const char* field, std::optional<bool> fallback = {}) {
    const Json* value = Find(field);
    if (value == nullptr) {
      if (fallback) return *fallback;
      return Missing(field);
    }
    if (!value->is_boolean()) return Fault(field, "is not a boolean");
    return value->get<bool>();
  }

  // The raw value (nullptr when absent or null), for arrays and objects.
  const Json* Find(const char* field) {
    seen_.insert(field);
    auto it = message_.find(field);
    if (it == message_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  Status Missing(const char* field) const {
    return ProtocolError(std::string(what_) + ": missing field \"" + field + "\"");
  }
  Status Fault(const char* field, std::string_view fault) const {
    return ProtocolError(std::string(what_) + ": field \"" + field + "\" " + std::string(fault));
  }

  Status CheckNoUnknown() const {
    for (auto it = message_.begin(); it != message_.end(); ++it) {
      if (!seen_.count(it.key())) {
        return ProtocolError(std::string(what_) + ": unknown field \"" +
                             base::TerminalSafe(it.key(), 64) + "\"");
      }
    }
    return Status::Ok();
  }

 private:
  Status Range(const char* field, const std::string& value, int64_t min, int64_t max) const {
    return Fault(field,
                 "is " + value + ", outside " + std::to_string(min) + ".." + std::to_string(max));
  }

  const Json& message_;
  std::string_view what_;
  std::set<std::string, std::less<>> seen_;
};

inline StatusOr<std::vector<std::string>> StringArray(FieldReader& r, const char* field,
                                                      const Json* value) {
  if (value == nullptr || !value->is_array()) return r.Fault(field, "is not an array of strings");
  std::vector<std::string> out;
  out.reserve(value->size());
  for (const Json& item : *value) {
    if (!item.is_string()) return r.Fault(field, "holds a value that is not a string");
    out.push_back(item.get_ref<const std::string&>());
  }
  return out;
}

}  // namespace codebox::protocol::msg

#endif  // CODEBOX_PROTOCOL_FIELD_READER_H_
