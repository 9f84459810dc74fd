// The one checked reader of a JSON object's fields that another process sent: a server's or
// a peer's answer and a client's request (src/api), an agent protocol message (src/protocol),
// an OCI image's index and manifests (src/image). A field of the wrong type, a number out of
// range or a missing required field is an error (kProtocolError, or the reader's own code)
// naming the object and the field ("<what>: field \"k\" is not a string"), never a crash and
// never a silently wrong value; nothing here throws. Parse the text with ParseJsonObject
// (base/json.h's bounds) first.
#ifndef CODEBOX_BASE_JSON_FIELDS_H_
#define CODEBOX_BASE_JSON_FIELDS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "codebox/status.h"

namespace codebox::base {

// The body as a JSON object; `what` names the answer in errors ("the server's exec answer").
StatusOr<nlohmann::json> ParseJsonObject(std::string_view body, std::string_view what);

// Checked reads of one JSON object's fields. The one-argument forms read a required field
// (absent or null: "missing field"); the forms with a fallback read an optional one (absent
// or null: the fallback). It remembers which fields were read (Find, every read, MarkRead),
// so that a decoder that knows every field can refuse the rest (CheckNoUnknown).
class JsonFields {
 public:
  // `object` must outlive the reader; `what` names it in errors ("exec request"). Errors are
  // kProtocolError (another process sent it) unless `code` says otherwise: a client's request
  // to the server is kInvalidArgument.
  JsonFields(const nlohmann::json& object, std::string what,
             StatusCode code = StatusCode::kProtocolError)
      : object_(object), what_(std::move(what)), code_(code) {}

  StatusOr<std::string> String(const char* key) const { return String(key, std::nullopt); }
  StatusOr<std::string> String(const char* key, std::optional<std::string> fallback) const;
  StatusOr<int64_t> Int(const char* key, int64_t min, int64_t max) const {
    return Int(key, min, max, std::nullopt);
  }
  StatusOr<int64_t> Int(const char* key, int64_t min, int64_t max,
                        std::optional<int64_t> fallback) const;
  // A finite number, integer or not, within min..max.
  StatusOr<double> Number(const char* key, double min, double max) const {
    return Number(key, min, max, std::nullopt);
  }
  StatusOr<double> Number(const char* key, double min, double max,
                          std::optional<double> fallback) const;
  StatusOr<bool> Bool(const char* key) const { return Bool(key, std::nullopt); }
  StatusOr<bool> Bool(const char* key, std::optional<bool> fallback) const;
  // An array of strings.
  StatusOr<std::vector<std::string>> Strings(const char* key) const {
    return Strings(key, std::nullopt);
  }
  StatusOr<std::vector<std::string>> Strings(
      const char* key, std::optional<std::vector<std::string>> fallback) const;

  // An array of at most `max_items` objects, each as a pointer into the object read. Absent or
  // null: missing when `required`, else no objects.
  StatusOr<std::vector<const nlohmann::json*>> Objects(const char* key, size_t max_items,
                                                       bool required) const;
  // Objects(), each read by `decode` (an API message's checked decoder); its first error.
  template <class T>
  StatusOr<std::vector<T>> ObjectsOf(const char* key, size_t max_items, bool required,
                                     StatusOr<T> (*decode)(const nlohmann::json&)) const {
    StatusOr<std::vector<const nlohmann::json*>> items = Objects(key, max_items, required);
    if (!items.ok()) return items.status();
    std::vector<T> out;
    out.reserve(items->size());
    for (const nlohmann::json* item : *items) {
      StatusOr<T> one = decode(*item);
      if (!one.ok()) return one.status();
      out.push_back(std::move(one).value());
    }
    return out;
  }

  // The field's value (nullptr when absent or null), for arrays and objects; it counts as read.
  const nlohmann::json* Find(const char* key) const;
  // A field some other code read (a dispatcher's "op") counts as read.
  void MarkRead(const char* key) const { read_.insert(key); }
  // "<what>: unknown field \"<key>\"" for the first field nothing read.
  Status CheckNoUnknown() const;

  // "<what>: field \"<key>\" <problem>".
  Status Fault(std::string_view key, std::string_view problem) const;
  // "<what>: missing field \"<key>\"".
  Status Missing(std::string_view key) const;
  const std::string& what() const { return what_; }

 private:
  const nlohmann::json& object_;
  std::string what_;
  StatusCode code_;
  mutable std::set<std::string, std::less<>> read_;
};

}  // namespace codebox::base

#endif  // CODEBOX_BASE_JSON_FIELDS_H_
